"""Spike-and-Slab Lasso (SSL) terms of the Sparse VAE: pure functions on tensors.

The prior on the decoder masks W (n_features x n_latents) of Moran et al. (2022),
after Rockova and George (2018)::

    w_jk | gamma_jk ~ gamma_jk psi(w; lambda1) + (1 - gamma_jk) psi(w; lambda0),
    psi(w; lambda) = (lambda / 2) exp(-lambda |w|)      (Laplace, scale 1/lambda),
    gamma_jk | eta_k ~ Bernoulli(eta_k),   eta_k ~ Beta(a, b),

with lambda0 >> lambda1 (spike vs slab). Fitting alternates

* the E-step :func:`ssl_inclusion_probs`, the exact conditional posterior
  p*_jk = P(gamma_jk = 1 | w_jk, eta_k) **with** the lambda / 2 normalising
  constants (``legacy=True`` drops them, as the authors' code does, which inflates
  the slab odds by lambda0 / lambda1);
* the M-step of the inclusion rates :func:`ssl_update_eta` (the Beta-Bernoulli MAP);
* gradient steps on the expected negative log-prior of W,
  :func:`ssl_penalty` = sum_jk |w_jk| (lambda1 p*_jk + lambda0 (1 - p*_jk)).

:func:`ssl_neg_log_prior` is the full expected complete-data negative log-prior
(constants included), for reporting and tests. The Gaussian noise variances have a
scaled inverse-chi^2 prior (:func:`inv_gamma_log_prob`, calibrated by
:func:`noise_prior_scale`). :func:`sparse_vae_loss` is the training objective: the
per-datum negative ELBO plus the W penalty (and the noise prior) divided by N.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from identrep.models.vae._elbo import (
    VAEBatch,
    kl_diag_gaussians,
    observation_log_prob,
    reparameterize,
)

if TYPE_CHECKING:
    from identrep.models.nn.sparse_vae import SparseVAEModule

__all__ = [
    "inv_gamma_log_prob",
    "kl_to_correlated_prior",
    "noise_prior_scale",
    "observation_log_prob",
    "sparse_vae_loss",
    "ssl_inclusion_probs",
    "ssl_neg_log_prior",
    "ssl_penalty",
    "ssl_update_eta",
]

#: Inclusion rates are kept in [_ETA_EPS, 1 - _ETA_EPS] (finite logits).
_ETA_EPS = 1e-10


def ssl_inclusion_probs(
    W: Tensor,
    eta: Tensor,
    lambda0: float,
    lambda1: float,
    *,
    legacy: bool = False,
) -> Tensor:
    """E-step: p*_jk = P(gamma_jk = 1 | w_jk, eta_k) under the SSL prior.

    ``p* = eta psi1(w) / (eta psi1(w) + (1 - eta) psi0(w))`` with
    ``psi_l(w) = (l / 2) exp(-l |w|)``, computed in the logit domain::

        logit p* = logit(eta) + log(lambda1 / lambda0) + (lambda0 - lambda1) |w|.

    ``legacy=True`` omits the ``log(lambda1 / lambda0)`` term (the authors' code).

    Parameters
    ----------
    W : Tensor of shape (n_features, n_latents)
    eta : Tensor of shape (n_latents,)
        Inclusion rates in (0, 1).
    lambda0, lambda1 : float
        Spike and slab rates (lambda0 > lambda1 > 0).
    legacy : bool, default=False

    Returns
    -------
    Tensor of shape (n_features, n_latents), in [0, 1].
    """
    eta = eta.clamp(_ETA_EPS, 1.0 - _ETA_EPS)
    logit = torch.log(eta) - torch.log1p(-eta) + (lambda0 - lambda1) * W.abs()
    if not legacy:
        logit = logit + math.log(lambda1 / lambda0)
    return torch.sigmoid(logit)


def ssl_update_eta(p_star: Tensor, a: float, b: float) -> Tensor:
    """M-step of the inclusion rates: the mode of eta_k given p*.

    ``eta_k = (sum_j p*_jk + a - 1) / (a + b + G - 2)`` (G = n_features), clamped
    to ``[1e-10, 1 - 1e-10]``.

    Parameters
    ----------
    p_star : Tensor of shape (n_features, n_latents)
    a, b : float
        Beta(a, b) hyperparameters of eta.

    Returns
    -------
    Tensor of shape (n_latents,)
    """
    G = p_star.shape[0]
    eta = (p_star.sum(0) + a - 1.0) / (a + b + G - 2.0)
    return eta.clamp(_ETA_EPS, 1.0 - _ETA_EPS)


def ssl_penalty(W: Tensor, p_star: Tensor, lambda0: float, lambda1: float) -> Tensor:
    """The W-dependent part of E_{gamma ~ p*}[-log p(W | gamma)] (a weighted lasso).

    ``sum_jk |w_jk| (lambda1 p*_jk + lambda0 (1 - p*_jk))``; ``p_star`` is a
    constant (no gradient flows into it).

    Parameters
    ----------
    W, p_star : Tensor of shape (n_features, n_latents)
    lambda0, lambda1 : float

    Returns
    -------
    Tensor, scalar.
    """
    p = p_star.detach()
    return (W.abs() * (lambda1 * p + lambda0 * (1.0 - p))).sum()


def ssl_neg_log_prior(
    W: Tensor,
    p_star: Tensor,
    eta: Tensor,
    lambda0: float,
    lambda1: float,
    a: float,
    b: float,
) -> Tensor:
    """E_{gamma ~ p*}[-log p(W, gamma, eta)], constants included.

    ``sum_jk [p* (-log psi1(w) - log eta) + (1 - p*) (-log psi0(w) - log(1 - eta))]
    - sum_k log Beta(eta_k; a, b)``. Its gradient in W is that of
    :func:`ssl_penalty`; its minimiser in eta (for a, b >= 1) is
    :func:`ssl_update_eta`.

    Parameters
    ----------
    W, p_star : Tensor of shape (n_features, n_latents)
    eta : Tensor of shape (n_latents,)
    lambda0, lambda1, a, b : float

    Returns
    -------
    Tensor, scalar.
    """
    eta = eta.clamp(_ETA_EPS, 1.0 - _ETA_EPS)
    absw = W.abs()
    nlp1 = lambda1 * absw - math.log(lambda1 / 2.0)
    nlp0 = lambda0 * absw - math.log(lambda0 / 2.0)
    gam = p_star * (nlp1 - torch.log(eta)) + (1.0 - p_star) * (nlp0 - torch.log1p(-eta))
    log_beta = (
        (a - 1.0) * torch.log(eta)
        + (b - 1.0) * torch.log1p(-eta)
        - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    )
    return gam.sum() - log_beta.sum()


def inv_gamma_log_prob(var: Tensor, shape: float, scale: float) -> Tensor:
    """Log-density of an inverse-gamma variable at ``var``, summed over all entries.

    ``shape * log(scale) - lgamma(shape) - (shape + 1) log(var) - scale / var``. A
    scaled inverse-chi^2(nu, s^2) is the inverse gamma (nu / 2, nu s^2 / 2).

    Parameters
    ----------
    var : Tensor of any shape, positive
    shape, scale : float
        alpha > 0 and beta > 0.

    Returns
    -------
    Tensor, scalar.
    """
    const = shape * math.log(scale) - math.lgamma(shape)
    return (const - (shape + 1.0) * torch.log(var) - scale / var).sum()


def noise_prior_scale(
    variances: np.ndarray,
    df: float = 3.0,
    quantile: float = 0.05,
    prob: float = 0.9,
) -> float:
    """Scale beta of the inverse-gamma (df / 2, beta) noise-variance prior.

    The paper's calibration (Appendix C.2, after BART): the ``quantile`` of the
    features' sample variances is put at the ``prob`` quantile of the prior, i.e.
    P(sigma^2 < q) = prob. Sample variances overestimate the noise, so the prior
    mostly allows smaller noise. For InvGamma(alpha, beta),
    ``P(sigma^2 < q) = P(G > beta / q)`` with ``G ~ Gamma(alpha, 1)``, so
    ``beta = q * Gamma(alpha).ppf(1 - prob)``.

    Parameters
    ----------
    variances : ndarray of shape (n_features,)
    df : float, default=3.0
        Degrees of freedom nu (alpha = nu / 2).
    quantile, prob : float, default=0.05 and 0.9

    Returns
    -------
    float, positive.
    """
    from scipy.stats import gamma

    q = float(np.quantile(np.asarray(variances, dtype=float), quantile))
    q = max(q, 1e-12)
    return q * float(gamma.ppf(1.0 - prob, df / 2.0))


def kl_to_correlated_prior(mean: Tensor, log_var: Tensor, scale_tril: Tensor) -> Tensor:
    """KL(N(mean, diag(exp(log_var))) || N(0, Sigma)) per row, Sigma = L L^T.

    The paper's Eq. 59 (Appendix B.2)::

        0.5 [tr(Sigma^-1 diag(s^2)) + mean^T Sigma^-1 mean - K + log det Sigma
             - sum_k log s_k^2],

    with ``Sigma^-1 = L^-T L^-1`` from one triangular solve, so
    ``tr(Sigma^-1 diag(s^2)) = sum_k s_k^2 ||L^-1 e_k||^2`` and
    ``mean^T Sigma^-1 mean = ||L^-1 mean||^2``.

    Parameters
    ----------
    mean, log_var : Tensor of shape (batch, n_latents)
    scale_tril : Tensor of shape (n_latents, n_latents)
        Lower-triangular L with a positive diagonal.

    Returns
    -------
    Tensor of shape (batch,)
    """
    K = mean.shape[-1]
    eye = torch.eye(K, dtype=mean.dtype, device=mean.device)
    Linv = torch.linalg.solve_triangular(scale_tril, eye, upper=False)
    trace = (log_var.exp() * Linv.square().sum(0)).sum(-1)
    maha = (mean @ Linv.T).square().sum(-1)
    logdet = 2.0 * torch.log(torch.diagonal(scale_tril)).sum()
    return 0.5 * (trace + maha - K + logdet - log_var.sum(-1))


def sparse_vae_loss(
    module: SparseVAEModule,
    batch: VAEBatch,
    *,
    n_data: int,
    lambda0: float,
    lambda1: float,
    noise_prior: tuple[float, float] | None = None,
    penalty_weight: float = 1.0,
    kl_weight: float = 1.0,
) -> tuple[Tensor, int]:
    """The Sparse VAE objective per datum, with one reparameterised z per row.

    ``mean_i [-log p(x_i | z_i, W) + kl_weight KL(q(z | x_i) || N(0, I))]
    + [ssl_penalty(W, p*) - log InvGamma(sigma^2; noise_prior)] / n_data``:
    the minibatch estimate of (negative log-joint of the data set) / N, the
    likelihood summed over features and the KL over latents (a proper ELBO at
    ``kl_weight = 1``, unlike the authors' per-entry averages). ``p*`` is the
    module's current E-step.

    Parameters
    ----------
    module : SparseVAEModule
    batch : VAEBatch
    n_data : int
        Training-set size N.
    lambda0, lambda1 : float
    noise_prior : (shape, scale), optional
        Inverse-gamma prior of the Gaussian noise variances (None: flat).
    penalty_weight : float, default=1.0
        Multiplies the W penalty (0 during the SSL warm-up).
    kl_weight : float, default=1.0
        Multiplies the KL term (1: the ELBO; 1 / K: the authors' loss scaling).

    The KL is to N(0, I), or to N(0, Sigma) when the module learns the prior
    correlation (:func:`kl_to_correlated_prior`).

    Returns
    -------
    loss : Tensor, scalar
    n : int
        Batch size.
    """
    mean, log_var = module.encode(batch.x)
    z = reparameterize(mean, log_var)
    out = module.decoder(z)
    rec = observation_log_prob(
        module.likelihood, module.target(batch.x), out, module.log_var
    )
    L = module.prior_scale_tril()
    if L is None:
        kl = kl_diag_gaussians(
            mean, log_var, torch.zeros_like(mean), torch.zeros_like(mean)
        )
    else:
        kl = kl_to_correlated_prior(mean, log_var, L)
    if kl_weight != 1.0:
        kl = kl_weight * kl
    reg = penalty_weight * ssl_penalty(
        module.decoder.W, module.p_star, lambda0, lambda1
    )
    if noise_prior is not None and module.likelihood == "gaussian":
        reg = reg - inv_gamma_log_prob(module.log_var.exp(), *noise_prior)
    return (kl - rec).mean() + reg / n_data, batch.x.shape[0]
