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

The pseudo-input prior of the VSC authors' code (and of the Sparse VAE authors'
port) replaces the fixed prior by the mixture ``p(z) = (1/J) sum_i q(z | u_i)`` of
the posteriors of J learned pseudo-inputs u_i. Its KL has no closed form; with
component weights ``w(x)`` (a softmax selector, a variational posterior over the
component index) Jensen's inequality bounds it in closed form::

    KL(q || p) <= sum_i w_i KL(q || q(. | u_i)) + KL(w || Uniform(J))

(:func:`pseudo_input_kl`). Both codes use the first term alone, which is not a
bound (it can be up to log J below the KL); ours keeps the second. A penalty
pulls the prior's average spike probability towards alpha
(:func:`prior_sparsity_penalty`).
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
    "prior_sparsity_penalty",
    "pseudo_input_kl",
    "pseudo_input_log_prior",
    "spike_slab_kl",
    "spike_slab_log_density",
    "spike_slab_log_ratio",
    "spike_slab_pair_kl",
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


def spike_slab_pair_kl(
    mean: Tensor,
    log_var: Tensor,
    spike_logits: Tensor,
    prior_mean: Tensor,
    prior_log_var: Tensor,
    prior_logits: Tensor,
) -> Tensor:
    """KL(q || p) of two spike-and-slab distributions with the same atom at 0,
    summed over the last dimension (arguments broadcast)::

        sum_j  gamma_j KL(N(mu_j, s_j^2) || N(m_j, t_j^2))
             + KL(Bern(gamma_j) || Bern(pi_j))

    With ``p = N(0, 1)`` and ``pi = alpha`` it is :func:`spike_slab_kl`.

    Parameters
    ----------
    mean, log_var, spike_logits : Tensor
        q's slab mean, slab log-variance and logit(gamma).
    prior_mean, prior_log_var, prior_logits : Tensor
        p's slab mean, slab log-variance and logit(pi).

    Returns
    -------
    Tensor of the broadcast shape without its last dimension, non-negative.
    """
    gamma = torch.sigmoid(spike_logits)
    gauss = 0.5 * (
        prior_log_var
        - log_var
        + (log_var.exp() + (mean - prior_mean).square()) * torch.exp(-prior_log_var)
        - 1.0
    )
    bern = gamma * (F.logsigmoid(spike_logits) - F.logsigmoid(prior_logits)) + (
        1.0 - gamma
    ) * (F.logsigmoid(-spike_logits) - F.logsigmoid(-prior_logits))
    return (gamma * gauss + bern).sum(-1)


def pseudo_input_kl(
    mean: Tensor,
    log_var: Tensor,
    spike_logits: Tensor,
    prior: tuple[Tensor, Tensor, Tensor],
    selector_logits: Tensor,
) -> Tensor:
    """Jensen bound on KL(q(z | x) || (1/J) sum_i q(z | u_i)) (module docstring).

    Parameters
    ----------
    mean, log_var, spike_logits : Tensor of shape (batch, n_latents)
        The posterior.
    prior : tuple of three Tensors of shape (J, n_latents)
        The components' slab means, log-variances and spike logits.
    selector_logits : Tensor of shape (batch, J)
        Unnormalised log-weights of the components.

    Returns
    -------
    Tensor of shape (batch,), non-negative.
    """
    p_mean, p_log_var, p_logits = prior
    pair = spike_slab_pair_kl(
        mean.unsqueeze(1),
        log_var.unsqueeze(1),
        spike_logits.unsqueeze(1),
        p_mean.unsqueeze(0),
        p_log_var.unsqueeze(0),
        p_logits.unsqueeze(0),
    )  # (batch, J)
    log_w = F.log_softmax(selector_logits, dim=-1)
    w = log_w.exp()
    to_uniform = (w * (log_w + math.log(log_w.shape[-1]))).sum(-1)
    return (w * pair).sum(-1) + to_uniform


def prior_sparsity_penalty(prior_logits: Tensor, alpha: float) -> Tensor:
    """``K KL(Bern(pi_bar) || Bern(alpha))``: pi_bar is the pseudo-input prior's
    average spike probability (over components and latents), K the latent count
    (the VSC authors' weight; scalar Tensor)."""
    # log pi_bar and log(1 - pi_bar) from log-sigmoids: finite values and
    # gradients however saturated the logits (sigmoid(-200) is 0 in float32).
    log_n = math.log(prior_logits.numel())
    log_on = torch.logsumexp(F.logsigmoid(prior_logits).flatten(), 0) - log_n
    log_off = torch.logsumexp(F.logsigmoid(-prior_logits).flatten(), 0) - log_n
    kl = log_on.exp() * (log_on - math.log(alpha)) + log_off.exp() * (
        log_off - math.log1p(-alpha)
    )
    return prior_logits.shape[-1] * kl


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


def spike_slab_log_density(
    z: Tensor, active: Tensor, mean: Tensor, log_var: Tensor, spike_logits: Tensor
) -> Tensor:
    """Log-density of a spike-and-slab draw (Lebesgue measure plus the atom at
    0), summed over the last dimension (arguments broadcast).

    Parameters
    ----------
    z : Tensor of shape (..., n_latents)
    active : Tensor of bool, z's shape
        Which latents are in the slab.
    mean, log_var, spike_logits : Tensor broadcastable to z's shape

    Returns
    -------
    Tensor of shape (...)
    """
    log_n = -0.5 * (
        math.log(2 * math.pi) + log_var + (z - mean).square() * torch.exp(-log_var)
    )
    on = F.logsigmoid(spike_logits) + log_n
    return torch.where(active, on, F.logsigmoid(-spike_logits)).sum(-1)


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
    on = math.log(alpha) - 0.5 * (math.log(2 * math.pi) + z.square())
    log_p = torch.where(active, on, math.log1p(-alpha)).sum(-1)
    return log_p - spike_slab_log_density(z, active, mean, log_var, spike_logits)


def pseudo_input_log_prior(
    z: Tensor, active: Tensor, prior: tuple[Tensor, Tensor, Tensor]
) -> Tensor:
    """``log (1/J) sum_i q(z | u_i)`` of the pseudo-input prior, shape ``z.shape[:-1]``.

    Parameters
    ----------
    z, active : Tensor of shape (..., n_latents)
    prior : tuple of three Tensors of shape (J, n_latents)
        As :func:`pseudo_input_kl`.
    """
    p_mean, p_log_var, p_logits = prior
    per = spike_slab_log_density(
        z.unsqueeze(-2), active.unsqueeze(-2), p_mean, p_log_var, p_logits
    )  # (..., J)
    return torch.logsumexp(per, dim=-1) - math.log(p_mean.shape[0])


def vsc_loss(
    module: VSCModule,
    batch: VAEBatch,
    *,
    alpha: float,
    c: float,
    slab_weight: float = 1.0,
    kl_weight: float = 1.0,
    sparsity_weight: float = 0.0,
) -> tuple[Tensor, int]:
    """Negative ELBO of VSC per sample (batch mean), one relaxed sample of z.

    ``-log p(x | z) + kl_weight * KL(q(z | x) || p(z))`` with the closed-form
    :func:`spike_slab_kl`; the likelihood is the module's (Gaussian on standardised
    features, Bernoulli, or categorical counts), summed over features.
    ``kl_weight`` 1 is the ELBO. Where the module has pseudo-inputs the KL is the
    bound of :func:`pseudo_input_kl` and ``sparsity_weight`` times
    :func:`prior_sparsity_penalty` is added (``alpha`` is then the target of
    the prior's average spike probability).

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
    sparsity_weight : float, default=0.0
        Multiplier of :func:`prior_sparsity_penalty` (pseudo-input prior only;
        1 is the VSC authors' weight).

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
    penalty = 0.0
    if module.n_pseudo_inputs > 0:
        prior = module.prior_parts()
        sel = module.selector_logits(batch.x)
        kl = pseudo_input_kl(mean, log_var, logits, prior, sel)
        if sparsity_weight:
            penalty = sparsity_weight * prior_sparsity_penalty(prior[2], alpha)
    else:
        kl = spike_slab_kl(mean, log_var, logits, alpha)
    if kl_weight != 1.0:
        kl = kl_weight * kl
    return (kl - rec).mean() + penalty, batch.x.shape[0]
