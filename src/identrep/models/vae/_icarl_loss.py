"""The iCaRL objective: pure functions of an
:class:`~identrep.models.nn.icarl.ICaRLModule` and a batch (STYLE.md rule 2).

* :func:`icarl_pass`: one stochastic pass (one reparameterised z);
* :func:`expfam_score_matching`: the score-matching objective of the
  non-factorised prior p~(. | u), exact (closed-form Hessian diagonal) or sliced;
* :func:`icarl_loss_terms` and :func:`icarl_loss`: the ELBO with the unnormalised
  log prior plus score matching, with the stop-gradients that make the first term
  train the encoder/decoder and the second the prior (see
  :mod:`identrep.models.vae.icarl`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from identrep.models.vae._elbo import (
    VAEBatch,
    gaussian_log_prob,
    reparameterize,
    standardized_input,
)
from identrep.models.vae._score_matching import (
    hyvarinen_score_matching,
    sliced_score_matching,
)

if TYPE_CHECKING:
    from identrep.models.nn.icarl import ExpFamPrior, ICaRLModule

__all__ = ["expfam_score_matching", "icarl_loss", "icarl_loss_terms", "icarl_pass"]

_LOG_2PI = math.log(2.0 * math.pi)
SCORE_MATCHING_METHODS = ("exact", "sliced")


def icarl_pass(module: ICaRLModule, batch: VAEBatch):
    """One stochastic pass: ``(xs, z, z_mean, z_log_var, x_mean, x_log_var, u)``,
    the standardised x (computed once, for the encoder and the reconstruction),
    one reparameterised z, the decoder's parameters and the prior's u."""
    xs = standardized_input(module, batch)
    z_mean, z_log_var = module.encode_standardized(xs, batch.y, batch.task)
    z = reparameterize(z_mean, z_log_var)
    x_mean, x_log_var = module.decoder(z)
    u = module.conditioner(batch.y, batch.task)
    return xs, z, z_mean, z_log_var, x_mean, x_log_var, u


def expfam_score_matching(
    prior: ExpFamPrior,
    z: Tensor,
    u: Tensor,
    *,
    method: str = "exact",
    projections: Tensor | None = None,
) -> Tensor:
    """Score-matching objective of p~(. | u) at every sample z, shape (batch,).

    ``method="exact"``: Hyvarinen's objective with the closed-form Hessian
    diagonal (:meth:`~identrep.models.nn.icarl.ExpFamPrior.score_and_hessian_diagonal`);
    ``"sliced"``: sliced score matching with ``projections`` of shape
    (n_projections, batch, n) (variance-reduced, see
    :func:`~identrep.models.vae._score_matching.sliced_score_matching`).
    Gradients flow to the prior's parameters and u, never to z's producer (z is
    detached).

    Raises
    ------
    ValueError
        An unknown ``method``, or ``"sliced"`` without ``projections``.
    """
    z = z.detach()
    if method == "exact":
        _, score, hess = prior.score_and_hessian_diagonal(z, u)
        return hyvarinen_score_matching(score, hess)
    if method == "sliced":
        if projections is None:
            raise ValueError("method='sliced' needs projections.")
        return sliced_score_matching(lambda v: prior.log_prob(v, u), z, projections)
    raise ValueError(f"method must be one of {SCORE_MATCHING_METHODS}; got {method!r}.")


def icarl_loss_terms(
    module: ICaRLModule,
    batch: VAEBatch,
    *,
    score_matching: str = "exact",
    n_projections: int = 1,
) -> tuple[Tensor, Tensor]:
    """The two per-sample terms of the iCaRL objective, with their stop-gradients.

    * ``neg_elbo = -log p(x | z) - log p~(z | u) - H[q(z | x, u)]`` with one
      reparameterised z, the unnormalised log prior evaluated with detached prior
      parameters and u (gradients reach the encoder through z, and the decoder),
      and the Gaussian entropy ``H = 0.5 sum_k (1 + log 2pi + log_var_k)``;
    * ``sm``: the score-matching objective of p~(. | u) at z detached (gradients
      reach the prior and its conditioner only).

    Parameters
    ----------
    module : ICaRLModule
    batch : VAEBatch
    score_matching : {"exact", "sliced"}, default="exact"
    n_projections : int, default=1
        Random projections per sample for ``"sliced"`` (standard normal, drawn from
        torch's global generator, like the reparameterisation noise).

    Returns
    -------
    neg_elbo, sm : Tensor of shape (batch,)
    """
    xs, z, z_mean, z_log_var, x_mean, x_log_var, u = icarl_pass(module, batch)
    rec = gaussian_log_prob(xs, x_mean, x_log_var)
    log_prior = module.prior.log_prob(z, u, detach_params=True)
    entropy = 0.5 * (1.0 + _LOG_2PI + z_log_var).sum(-1)
    neg_elbo = -(rec + log_prior + entropy)
    v = None
    if score_matching == "sliced":
        v = torch.randn(int(n_projections), *z.shape, dtype=z.dtype, device=z.device)
    sm = expfam_score_matching(module.prior, z, u, method=score_matching, projections=v)
    return neg_elbo, sm


def icarl_loss(
    module: ICaRLModule,
    batch: VAEBatch,
    *,
    score_matching: str = "exact",
    n_projections: int = 1,
) -> tuple[Tensor, int]:
    """Training loss of iCaRL: batch mean of ``neg_elbo + sm``
    (:func:`icarl_loss_terms`); the stop-gradients make the first term train the
    encoder/decoder and the second the prior, so one backward pass does both.

    Returns
    -------
    loss : Tensor, scalar
    n : int
        Batch size (its weight in epoch means).
    """
    neg_elbo, sm = icarl_loss_terms(
        module, batch, score_matching=score_matching, n_projections=n_projections
    )
    return (neg_elbo + sm).mean(), batch.x.shape[0]
