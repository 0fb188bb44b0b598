"""The ELBO and its terms: pure functions on tensors (STYLE.md rule 2).

* log-densities :func:`gaussian_log_prob`, :func:`laplace_log_prob` and
  :func:`prior_log_prob`, the KL :func:`kl_diag_gaussians` and the sample
  :func:`reparameterize`;
* :func:`vae_pass`: one stochastic pass through a
  :class:`~identrep.models.nn.vae.ConditionalVAE` (one reparameterised z), giving
  every distribution parameter the losses need (:class:`VAEOutput`);
* the losses :func:`neg_elbo_loss` and the iVAE authors' weighted,
  TC-decomposed :func:`weighted_elbo_loss` (with its aggregate-posterior estimates
  :func:`aggregate_posterior_log_probs`).

Every density is parameterised by its **log-variance** (also the Laplace one). All
log-densities and KLs are summed over the last dimension (one value per sample).
The only randomness is the reparameterisation noise, drawn from torch's global
generator when not given (estimators seed it with
:func:`identrep.utils.seeding.seeded`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import Tensor

if TYPE_CHECKING:
    from identrep.models.nn.vae import ConditionalVAE

__all__ = [
    "VAEBatch",
    "VAEOutput",
    "aggregate_posterior_log_probs",
    "bernoulli_log_prob",
    "gaussian_log_prob",
    "kl_diag_gaussians",
    "laplace_log_prob",
    "multinomial_log_prob",
    "neg_elbo_loss",
    "observation_log_prob",
    "prior_log_prob",
    "reparameterize",
    "standardized_input",
    "vae_pass",
    "weighted_elbo_loss",
]

_LOG_2PI = math.log(2.0 * math.pi)


class VAEBatch(NamedTuple):
    """A minibatch: raw inputs x (B, p), raw targets y (B,), task codes (B,) int64.

    An unconditional VAE ignores ``y`` and ``task`` (zeros). ``standardized=True``
    says that ``x`` already holds the module's standardised input
    (``module.standardize`` applied once to the whole data set by the
    estimator's collate: the same element-wise float64 map, so the same numbers);
    the passes then use it as is (:func:`standardized_input`)."""

    x: Tensor
    y: Tensor
    task: Tensor
    standardized: bool = False


class VAEOutput(NamedTuple):
    """Distribution parameters of one stochastic pass (:func:`vae_pass`).

    All of shape (batch, n_latents) except ``x`` and ``x_mean`` (batch, n_features)
    and ``x_log_var`` (n_features,) or (batch, n_features). ``x`` is what the
    decoder reconstructs (the standardised input; the raw input for a Bernoulli or
    categorical module, whose ``x_mean`` are logits); ``z`` one reparameterised
    sample.
    """

    x: Tensor
    z: Tensor
    z_mean: Tensor
    z_log_var: Tensor
    x_mean: Tensor
    x_log_var: Tensor
    prior_mean: Tensor
    prior_log_var: Tensor


# ============================================================ densities
def gaussian_log_prob(x: Tensor, mean: Tensor, log_var: Tensor) -> Tensor:
    """Log-density of a diagonal Gaussian, summed over the last dimension.

    ``sum_k -0.5 * (log 2pi + log_var_k + (x_k - mean_k)^2 / exp(log_var_k))``.

    Parameters
    ----------
    x, mean, log_var : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    return -0.5 * (_LOG_2PI + log_var + (x - mean).square() * torch.exp(-log_var)).sum(
        -1
    )


def laplace_log_prob(x: Tensor, loc: Tensor, log_var: Tensor) -> Tensor:
    """Log-density of independent Laplace variables given their log-variances.

    A Laplace(loc, b) variable has variance ``2 b^2``, so ``b = sqrt(exp(log_var) /
    2)`` and the density is ``exp(-|x - loc| / b) / (2 b)``; summed over the last
    dimension.

    Parameters
    ----------
    x, loc, log_var : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    log_b = 0.5 * (log_var - math.log(2.0))
    return -(math.log(2.0) + log_b + (x - loc).abs() * torch.exp(-log_b)).sum(-1)


def bernoulli_log_prob(x: Tensor, logits: Tensor) -> Tensor:
    """Log-likelihood of independent Bernoulli variables given their logits, summed
    over the last dimension: ``sum_j x_j logits_j - softplus(logits_j)`` (also for
    x in [0, 1], the cross-entropy).

    Parameters
    ----------
    x, logits : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    return (x * logits - torch.nn.functional.softplus(logits)).sum(-1)


def multinomial_log_prob(x: Tensor, logits: Tensor) -> Tensor:
    """Multinomial log-likelihood of counts ``x`` without the count-only constant:
    ``sum_j x_j log softmax(logits)_j`` (bag of words; per-row sums of ``x`` are the
    document lengths).

    Parameters
    ----------
    x, logits : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    return (x * torch.log_softmax(logits, dim=-1)).sum(-1)


def observation_log_prob(likelihood: str, x: Tensor, out: Tensor, log_var: Tensor):
    """log p(x | z) per row for the decoder output ``out`` (batch, n_features).

    "gaussian": ``out`` is the mean, ``log_var`` the per-feature log-variance;
    "bernoulli": per-feature logits; "categorical": logits over the features
    (multinomial counts, :func:`multinomial_log_prob`).

    Returns
    -------
    Tensor of shape (batch,)
    """
    if likelihood == "gaussian":
        return gaussian_log_prob(x, out, log_var)
    if likelihood == "bernoulli":
        return bernoulli_log_prob(x, out)
    return multinomial_log_prob(x, out)


def prior_log_prob(dist: str, z: Tensor, mean: Tensor, log_var: Tensor) -> Tensor:
    """log p(z | u) of a factorised prior of family ``dist`` ("gaussian" or
    "laplace"), given its mean and log-variance; summed over the last dimension."""
    if dist == "laplace":
        return laplace_log_prob(z, mean, log_var)
    return gaussian_log_prob(z, mean, log_var)


def reparameterize(mean: Tensor, log_var: Tensor, eps: Tensor | None = None) -> Tensor:
    """One reparameterised sample ``mean + exp(log_var / 2) * eps``.

    Parameters
    ----------
    mean, log_var : Tensor of shape (..., n)
    eps : Tensor of shape (..., n), optional
        Standard-normal noise. If omitted it is drawn with ``torch.randn_like``
        from torch's global generator (estimators seed it with
        :func:`identrep.utils.seeding.seeded`).

    Returns
    -------
    Tensor of shape (..., n)
    """
    if eps is None:
        eps = torch.randn_like(mean)
    return mean + torch.exp(0.5 * log_var) * eps


def kl_diag_gaussians(
    mean_q: Tensor, log_var_q: Tensor, mean_p: Tensor, log_var_p: Tensor
) -> Tensor:
    """KL(q || p) between diagonal Gaussians, summed over the last dimension.

    ``0.5 * sum_k [log_var_p - log_var_q + (var_q + (mean_q - mean_p)^2) / var_p - 1]``.

    Parameters
    ----------
    mean_q, log_var_q, mean_p, log_var_p : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...), non-negative.
    """
    return 0.5 * (
        log_var_p
        - log_var_q
        + (torch.exp(log_var_q) + (mean_q - mean_p).square()) * torch.exp(-log_var_p)
        - 1.0
    ).sum(-1)


def aggregate_posterior_log_probs(
    z: Tensor, mean: Tensor, log_var: Tensor, n_data: int
) -> tuple[Tensor, Tensor]:
    """Minibatch-weighted-sampling estimates of log q(z) and sum_k log q(z_k).

    With a minibatch of B encoder distributions q(z | x_j) (``mean``, ``log_var``)
    from a data set of ``n_data`` samples, the aggregate posterior at each sample
    ``z_i`` is estimated as (Chen et al., 2018, beta-TCVAE)::

        log q(z_i)   ~ logsumexp_j log q(z_i | x_j)           - log(n_data * B)
        log q(z_ik)  ~ logsumexp_j log q(z_ik | x_j)          - log(n_data * B)

    Parameters
    ----------
    z, mean, log_var : Tensor of shape (B, n_latents)
    n_data : int
        Training-set size N.

    Returns
    -------
    log_qz : Tensor of shape (B,)
    log_qz_product : Tensor of shape (B,)
        ``sum_k log q(z_ik)``.
    """
    # (B_i, B_j, d): log q(z_ik | x_j)
    lp = -0.5 * (
        _LOG_2PI
        + log_var[None]
        + (z[:, None, :] - mean[None]).square() * torch.exp(-log_var[None])
    )
    log_norm = math.log(float(n_data) * z.shape[0])
    log_qz = torch.logsumexp(lp.sum(-1), dim=1) - log_norm
    log_qz_prod = (torch.logsumexp(lp, dim=1) - log_norm).sum(-1)
    return log_qz, log_qz_prod


# ======================================================== stochastic pass
def standardized_input(module, batch: VAEBatch) -> Tensor:
    """The module's standardised input of a batch: ``batch.x`` when the collate
    standardised it already (``batch.standardized``), else
    ``module.standardize(batch.x)``."""
    return batch.x if batch.standardized else module.standardize(batch.x)


def vae_pass(module: ConditionalVAE, batch: VAEBatch) -> VAEOutput:
    """One stochastic pass: standardise x, build u, encode, draw one z, decode it
    and evaluate the prior's parameters at u.

    Parameters
    ----------
    module : ConditionalVAE
    batch : VAEBatch

    Returns
    -------
    VAEOutput
    """
    gaussian = _likelihood(module) == "gaussian"
    if batch.standardized and not gaussian:
        raise ValueError(
            "A batch of standardised x needs the Gaussian likelihood (the other "
            "likelihoods score raw x); build the batch with standardized=False."
        )
    xs = standardized_input(module, batch)
    u = module.conditioner(batch.y, batch.task)
    z_mean, z_log_var = module.encoder(xs, u if module.condition_encoder else None)
    z = reparameterize(z_mean, z_log_var)
    x_mean, x_log_var = module.decoder(z)
    p_mean, p_log_var = module.prior(module.prior_input(u, batch.y, batch.task))
    target = xs if gaussian else module.target(batch.x)
    return VAEOutput(target, z, z_mean, z_log_var, x_mean, x_log_var, p_mean, p_log_var)


def _likelihood(module) -> str:
    return getattr(module, "likelihood", "gaussian")


def _reconstruction_log_prob(module, out: VAEOutput) -> Tensor:
    """log p(x | z) per row of one pass, for the module's likelihood (the
    decoder's mean output is the Gaussian mean or the logits)."""
    return observation_log_prob(_likelihood(module), out.x, out.x_mean, out.x_log_var)


# ================================================================= losses
def neg_elbo_loss(
    module: ConditionalVAE,
    batch: VAEBatch,
    *,
    analytic_kl: bool = True,
    beta: float = 1.0,
) -> tuple[Tensor, int]:
    """Negative ELBO per sample, averaged over the batch, with one sample of z.

    ``-ELBO(x, u) = -E_q[log p(x | z)] + KL(q(z | x, u) || p(z | u))``, the first
    term estimated with one reparameterised sample. The KL is exact for a Gaussian
    prior when ``analytic_kl`` (lower variance), otherwise the one-sample estimate
    ``log q(z | x, u) - log p(z | u)`` (always for a Laplace prior). ``log p(x |
    z)`` follows the module's ``likelihood`` (Gaussian when it has none; Bernoulli
    or categorical on raw x). Units: nats per sample (Gaussian: on the
    standardised inputs). ``beta`` multiplies the KL (the beta-VAE of Higgins et
    al., 2017; 1 is the ELBO).

    Returns
    -------
    loss : Tensor, scalar
    n : int
        Batch size (its weight in epoch means).
    """
    out = vae_pass(module, batch)
    rec = _reconstruction_log_prob(module, out)
    dist = module.prior.dist
    if analytic_kl and dist == "gaussian":
        kl = kl_diag_gaussians(
            out.z_mean, out.z_log_var, out.prior_mean, out.prior_log_var
        )
    else:
        kl = gaussian_log_prob(out.z, out.z_mean, out.z_log_var) - prior_log_prob(
            dist, out.z, out.prior_mean, out.prior_log_var
        )
    if beta != 1.0:
        kl = beta * kl
    return (kl - rec).mean(), batch.x.shape[0]


def weighted_elbo_loss(
    module: ConditionalVAE,
    batch: VAEBatch,
    *,
    weights: Sequence[float],
    n_data: int,
) -> tuple[Tensor, int]:
    """The iVAE authors' weighted, TC-decomposed objective (negated, batch mean).

    With one sample z ~ q(z | x, u) and the estimates of
    :func:`aggregate_posterior_log_probs`, the per-sample objective is::

        a log p(x | z) - b [log q(z | x, u) - log q(z)]
                       - c [log q(z) - sum_k log q(z_k)]
                       - d [sum_k log q(z_k) - log p(z | u)],

    the reconstruction, index-code mutual information, total correlation and
    dimension-wise KL terms. With ``a = b = c = d = 1`` the aggregate-posterior
    terms cancel and it is the one-sample ELBO. The authors' iVAE config uses
    ``(a, b, c, d) = (100, 1, 0, 10)``; the estimate is biased for small batches.

    Parameters
    ----------
    module : ConditionalVAE
    batch : VAEBatch
    weights : (a, b, c, d)
    n_data : int
        Training-set size N.

    Returns
    -------
    loss : Tensor, scalar
    n : int
    """
    a, b, c, d = (float(w) for w in weights)
    out = vae_pass(module, batch)
    log_px = _reconstruction_log_prob(module, out)
    log_qz_x = gaussian_log_prob(out.z, out.z_mean, out.z_log_var)
    log_pz = prior_log_prob(module.prior.dist, out.z, out.prior_mean, out.prior_log_var)
    log_qz, log_qz_prod = aggregate_posterior_log_probs(
        out.z, out.z_mean, out.z_log_var, n_data
    )
    obj = (
        a * log_px
        - b * (log_qz_x - log_qz)
        - c * (log_qz - log_qz_prod)
        - d * (log_qz_prod - log_pz)
    )
    return -obj.mean(), batch.x.shape[0]
