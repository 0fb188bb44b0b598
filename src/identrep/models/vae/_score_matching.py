"""Score matching for unnormalised log-densities (pure functions on tensors).

For an unnormalised density p~(z) on R^n with score s(z) = grad_z log p~(z), the
score-matching objective of Hyvarinen (2005) is, per sample,

    J(z) = sum_j [ d^2/dz_j^2 log p~(z) + 0.5 * (d/dz_j log p~(z))^2 ],

and its expectation under a data distribution p_d equals
``0.5 * E ||s(z) - grad log p_d(z)||^2`` up to a constant that does not depend on
p~. It never needs the normalising constant, which is why iCaRL (Lu et al., 2022)
uses it to fit a non-factorised exponential-family prior.

The second-order term needs the *diagonal* of the Hessian of log p~. Computing
``grad(sum(grad log p~), z)`` instead returns the Hessian's row sums, which differ
from the diagonal as soon as log p~ couples coordinates -- exactly the
non-factorised case. :func:`score_and_hessian_diagonal` differentiates each score
coordinate separately (n extra backward passes). Sliced score matching (Song et al.,
2019) replaces the trace of the Hessian by ``v^T H v`` for random projections v with
``E[v v^T] = I`` (one extra backward pass per projection): an unbiased estimate of
the same objective, cheaper for large n but noisier.

Every function takes a ``log_density`` callable mapping a batch ``z`` of shape
(batch, n) to shape (batch,), where row b depends on ``z[b]`` only (a batch of
independent samples); that is what makes a derivative of the batch sum a per-sample
derivative. The functions work under ``torch.no_grad()`` too (they re-enable
gradients locally), so a validation pass can evaluate them.

References
----------
A. Hyvarinen (2005). Estimation of non-normalized statistical models by score
matching. JMLR 6.
Y. Song, S. Garg, J. Shi, S. Ermon (2019). Sliced score matching: a scalable approach
to density and score estimation. UAI.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = [
    "hyvarinen_score_matching",
    "score_and_hessian_diagonal",
    "score_matching_loss",
    "sliced_score_matching",
]

LogDensity = Callable[[Tensor], Tensor]


def _as_input(z: Tensor) -> Tensor:
    """``z`` itself if it already carries a graph, else a leaf copy requiring grad."""
    if z.dim() != 2:
        raise ValueError(f"z must have shape (batch, n_latents); got {tuple(z.shape)}.")
    return z if z.requires_grad else z.detach().requires_grad_(True)


def _grad(out: Tensor, z: Tensor, create_graph: bool) -> Tensor:
    """grad of ``out.sum()`` w.r.t. ``z``; zeros where ``out`` does not depend on z."""
    if not out.requires_grad:
        return torch.zeros_like(z)
    (g,) = torch.autograd.grad(
        out.sum(), z, create_graph=create_graph, retain_graph=True, allow_unused=True
    )
    return torch.zeros_like(z) if g is None else g


def score_and_hessian_diagonal(
    log_density: LogDensity, z: Tensor, *, create_graph: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """Log-density, score and exact Hessian diagonal of a batch, by autograd.

    The score is one backward pass of the batch sum; the Hessian diagonal is one
    further backward pass per latent dimension j, of ``sum_b s_j(z_b)``, keeping
    only column j (the other columns are the off-diagonal entries of row j). Cost:
    n + 1 backward passes.

    Parameters
    ----------
    log_density : callable
        Maps z of shape (batch, n) to log p~(z) of shape (batch,), each row
        depending only on its own sample.
    z : Tensor of shape (batch, n)
        Points. If ``z`` does not require grad a detached leaf copy is used;
        otherwise derivatives are taken w.r.t. ``z`` itself and gradients can flow
        further back (into whatever produced it).
    create_graph : bool, default=True
        Keep the graph of the derivatives, so a loss built from them can be
        back-propagated to the parameters of ``log_density``.

    Returns
    -------
    log_p : Tensor of shape (batch,)
    score : Tensor of shape (batch, n)
        d/dz_j log p~(z).
    hess_diag : Tensor of shape (batch, n)
        d^2/dz_j^2 log p~(z).

    Examples
    --------
    >>> import torch
    >>> P = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    >>> f = lambda z: -0.5 * ((z @ P) * z).sum(-1)
    >>> _, s, h = score_and_hessian_diagonal(f, torch.ones(3, 2))
    >>> h[0].tolist()  # -diag(P), not the row sums -(2.5, 1.5)
    [-2.0, -1.0]
    """
    with torch.enable_grad():
        z = _as_input(z)
        log_p = log_density(z)
        if log_p.shape != z.shape[:1]:
            raise ValueError(
                "log_density must return one value per sample, shape "
                f"({z.shape[0]},); got {tuple(log_p.shape)}."
            )
        score = _grad(log_p, z, create_graph=True)
        cols = [
            _grad(score[:, j], z, create_graph=create_graph)[:, j]
            for j in range(z.shape[1])
        ]
        hess_diag = torch.stack(cols, dim=1)
    if not create_graph:
        score = score.detach()
    return log_p, score, hess_diag


def hyvarinen_score_matching(score: Tensor, hess_diag: Tensor) -> Tensor:
    """Hyvarinen's score-matching objective of every sample.

    ``J = sum_j (hess_diag_j + 0.5 * score_j^2)``; its mean over samples of p_d is
    ``0.5 * E_{p_d} ||score - grad log p_d||^2`` minus a constant of p_d.

    Parameters
    ----------
    score : Tensor of shape (batch, n)
    hess_diag : Tensor of shape (batch, n)

    Returns
    -------
    Tensor of shape (batch,)

    Examples
    --------
    >>> import torch
    >>> s, h = torch.tensor([[1.0, -2.0]]), torch.tensor([[-1.0, -1.0]])
    >>> hyvarinen_score_matching(s, h)  # -2 + 0.5 * (1 + 4)
    tensor([0.5000])
    """
    return (hess_diag + 0.5 * score.square()).sum(-1)


def sliced_score_matching(
    log_density: LogDensity,
    z: Tensor,
    projections: Tensor,
    *,
    variance_reduction: bool = True,
    create_graph: bool = True,
) -> Tensor:
    """Sliced score-matching objective of every sample (Song et al., 2019).

    With projections v of zero mean and ``E[v v^T] = I`` (standard normal or
    Rademacher), ``v^T H v`` is an unbiased estimate of the Hessian trace, so

        J_v(z) = mean_v [ v^T H(z) v ] + 0.5 ||s(z)||^2        (variance_reduction)
        J_v(z) = mean_v [ v^T H(z) v + 0.5 (v^T s(z))^2 ]     (otherwise)

    has the same expectation as :func:`hyvarinen_score_matching`. ``H v`` is one
    backward pass of ``v^T s`` per projection, whatever n (vectorised over the
    projections).

    Parameters
    ----------
    log_density : callable
        As in :func:`score_and_hessian_diagonal`.
    z : Tensor of shape (batch, n)
    projections : Tensor of shape (n_projections, batch, n) or (batch, n)
        Random directions v, drawn by the caller (no hidden RNG here), e.g.
        ``torch.randn``.
    variance_reduction : bool, default=True
        Use the exact ``0.5 ||s||^2`` instead of its projected estimate (SSM-VR).
    create_graph : bool, default=True
        Keep the graph for back-propagation to the parameters of ``log_density``.

    Returns
    -------
    Tensor of shape (batch,)
    """
    v = projections if projections.dim() == 3 else projections.unsqueeze(0)
    if v.shape[1:] != z.shape:
        raise ValueError(
            f"projections must have shape (n_projections, {z.shape[0]}, "
            f"{z.shape[1]}) or ({z.shape[0]}, {z.shape[1]}); got "
            f"{tuple(projections.shape)}."
        )
    with torch.enable_grad():
        z = _as_input(z)
        log_p = log_density(z)
        score = _grad(log_p, z, create_graph=True)
        v = v.to(dtype=z.dtype, device=z.device)
        if not score.requires_grad:  # log-density linear in z: H = 0
            hv = torch.zeros_like(v)
        else:  # H v_k for every projection, vectorised over k
            (hv,) = torch.autograd.grad(
                score,
                z,
                grad_outputs=v,
                is_grads_batched=True,
                create_graph=create_graph,
                retain_graph=True,
            )
        trace = (hv * v).sum(-1).mean(0)
        if variance_reduction:
            quad = 0.5 * score.square().sum(-1)
        else:
            quad = 0.5 * (score * v).sum(-1).square().mean(0)
        out = trace + quad
    return out if create_graph else out.detach()


def score_matching_loss(
    log_density: LogDensity,
    z: Tensor,
    *,
    method: str = "exact",
    projections: Tensor | None = None,
) -> Tensor:
    """Mean score-matching objective of a batch (exact or sliced).

    Parameters
    ----------
    log_density : callable
        As in :func:`score_and_hessian_diagonal`.
    z : Tensor of shape (batch, n)
    method : {"exact", "sliced"}, default="exact"
        Exact Hessian diagonal (n backward passes) or sliced estimate.
    projections : Tensor, optional
        Required for ``method="sliced"`` (see :func:`sliced_score_matching`).

    Returns
    -------
    Tensor, scalar
    """
    if method == "exact":
        _, score, hess_diag = score_and_hessian_diagonal(log_density, z)
        return hyvarinen_score_matching(score, hess_diag).mean()
    if method == "sliced":
        if projections is None:
            raise ValueError("method='sliced' needs projections (e.g. torch.randn).")
        return sliced_score_matching(log_density, z, projections).mean()
    raise ValueError(f"method must be 'exact' or 'sliced'; got {method!r}.")
