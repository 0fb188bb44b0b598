"""Variational sparse coding (Tonolini, Jensen and Murray-Smith): pure terms.

Prior and posterior are spike-and-slab, per latent j::

    p(z_j)     = alpha N(z_j; 0, 1)            + (1 - alpha) delta_0(z_j)
    q(z_j | x) = gamma_j N(z_j; mu_j, s_j^2)   + (1 - gamma_j) delta_0(z_j)

with gamma_j = sigmoid(v_j(x)) the spike ("active") probability. Both measures have
the same atom at 0, so the KL is finite and in closed form (the paper's eq.)::

    KL = sum_j  gamma_j / 2 (mu_j^2 + s_j^2 - 1 - log s_j^2)
              + gamma_j log(gamma_j / alpha)
              + (1 - gamma_j) log((1 - gamma_j) / (1 - alpha))

i.e. the Bernoulli KL of the selectors plus gamma times the Gaussian KL of the slab.
Samples use the paper's relaxed selector, ``z = slab * sigmoid(c (u - 1 + gamma))``
with ``u ~ U(0, 1)``: as c grows the selector tends to the Bernoulli(gamma) indicator.
Spike warm-up replaces the slab by 1 (``slab_weight = 0``, a binary code) and
blends it in (``slab_weight`` 0 -> 1).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from identrep.models.vae._elbo import VAEBatch, observation_log_prob

if TYPE_CHECKING:
    from identrep.models.nn.sparse_coding import VSCModule

__all__ = [
    "spike_slab_kl",
    "spike_slab_log_ratio",
    "spike_slab_sample",
    "vsc_loss",
]


def spike_slab_kl(
    mean: Tensor, log_var: Tensor, spike_logits: Tensor, alpha: float
) -> Tensor:
    """KL(q(z | x) || p(z)) of the spike-and-slab posterior and prior, summed over
    the last dimension (closed form, module docstring).

    Parameters
    ----------
    mean, log_var : Tensor of shape (..., n_latents)
        Slab mean and log-variance.
    spike_logits : Tensor of shape (..., n_latents)
        logit(gamma).
    alpha : float in (0, 1)
        Prior probability that a latent is active.

    Returns
    -------
    Tensor of shape (...), non-negative.
    """
    gamma = torch.sigmoid(spike_logits)
    log_g, log_1mg = F.logsigmoid(spike_logits), F.logsigmoid(-spike_logits)
    gauss = 0.5 * (mean.square() + log_var.exp() - 1.0 - log_var)
    bern = gamma * (log_g - math.log(alpha)) + (1.0 - gamma) * (
        log_1mg - math.log1p(-alpha)
    )
    return (gamma * gauss + bern).sum(-1)


def spike_slab_sample(
    mean: Tensor,
    log_var: Tensor,
    spike_logits: Tensor,
    c: float,
    *,
    slab_weight: float = 1.0,
    eps: Tensor | None = None,
    u: Tensor | None = None,
) -> Tensor:
    """One relaxed sample ``z = (w slab + 1 - w) * sigmoid(c (u - 1 + gamma))``.

    Parameters
    ----------
    mean, log_var, spike_logits : Tensor of shape (..., n_latents)
    c : float
        Inverse temperature of the selector (larger: closer to 0/1).
    slab_weight : float in [0, 1], default=1.0
        w: 0 during spike warm-up (the code is the selector alone), 1 after.
    eps, u : Tensor of shape (..., n_latents), optional
        Standard-normal and uniform noise (drawn from torch's global generator
        when omitted).

    Returns
    -------
    Tensor of shape (..., n_latents)
    """
    if eps is None:
        eps = torch.randn_like(mean)
    if u is None:
        u = torch.rand_like(mean)
    gamma = torch.sigmoid(spike_logits)
    slab = mean + torch.exp(0.5 * log_var) * eps
    selector = torch.sigmoid(c * (u - 1.0 + gamma))
    if slab_weight != 1.0:
        slab = slab_weight * slab + (1.0 - slab_weight)
    return slab * selector


def spike_slab_log_ratio(
    z: Tensor,
    active: Tensor,
    mean: Tensor,
    log_var: Tensor,
    spike_logits: Tensor,
    alpha: float,
) -> Tensor:
    """``log p(z) - log q(z | x)`` for an exact spike-and-slab draw, summed over the
    last dimension (densities with respect to Lebesgue measure plus the atom at 0,
    which prior and posterior share); for importance weights.

    Parameters
    ----------
    z : Tensor of shape (..., n_latents)
        The draw (0 where inactive).
    active : Tensor of shape (..., n_latents), bool
        Which latents were drawn from the slab.
    mean, log_var, spike_logits : Tensor broadcastable to z's shape
    alpha : float

    Returns
    -------
    Tensor of shape (...)
    """
    log_g, log_1mg = F.logsigmoid(spike_logits), F.logsigmoid(-spike_logits)
    log_n0 = -0.5 * (math.log(2 * math.pi) + z.square())
    log_nq = -0.5 * (
        math.log(2 * math.pi) + log_var + (z - mean).square() * torch.exp(-log_var)
    )
    on = math.log(alpha) + log_n0 - log_g - log_nq
    off = math.log1p(-alpha) - log_1mg
    return torch.where(active, on, off).sum(-1)


def vsc_loss(
    module: VSCModule,
    batch: VAEBatch,
    *,
    alpha: float,
    c: float,
    slab_weight: float = 1.0,
    kl_weight: float = 1.0,
) -> tuple[Tensor, int]:
    """Negative ELBO of VSC per sample (batch mean), one relaxed sample of z.

    ``-log p(x | z) + kl_weight * KL(q(z | x) || p(z))`` with the closed-form
    :func:`spike_slab_kl`; the likelihood is the module's (Gaussian on standardised
    features, Bernoulli, or categorical counts), summed over features.
    ``kl_weight`` 1 is the ELBO.

    Parameters
    ----------
    module : VSCModule
    batch : VAEBatch
    alpha : float
        Prior spike probability.
    c : float
        Selector inverse temperature (annealed by the estimator).
    slab_weight : float, default=1.0
        Spike warm-up weight (see :func:`spike_slab_sample`).
    kl_weight : float, default=1.0
        Weight of the KL term (1: the unweighted negative ELBO).

    Returns
    -------
    loss : Tensor, scalar
    n : int
    """
    mean, log_var, logits = module.encode_parts(batch.x)
    z = spike_slab_sample(mean, log_var, logits, c, slab_weight=slab_weight)
    out = module.decoder(z)
    target = module.target(batch.x).to(out.dtype)
    rec = observation_log_prob(module.likelihood, target, out, module.log_var)
    kl = spike_slab_kl(mean, log_var, logits, alpha)
    if kl_weight != 1.0:
        kl = kl_weight * kl
    return (kl - rec).mean(), batch.x.shape[0]
