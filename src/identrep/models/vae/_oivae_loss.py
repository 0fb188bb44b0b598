"""The output-interpretable VAE (OI-VAE; Ainsworth, Foti, Lee and Fox, 2018): pure
terms.

Features are split into groups; group g is generated from its own linear map of
the latents, ``x_g ~ p(x_g | f_g(W_g z))`` with ``W_g`` (group_dim, n_latents). The
hierarchical prior on the columns ``W_g[:, k]`` marginalises to the group-lasso
penalty ``lam * sum_{g,k} ||W_g[:, k]||_2``: a whole column goes to zero when group
g does not use latent k. The penalty is not differentiable at 0, so it is applied
by its proximal operator (block soft-thresholding) after each gradient step on the
smooth part (the negative ELBO), which leaves exact zeros.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from identrep.models.vae._elbo import (
    VAEBatch,
    kl_diag_gaussians,
    observation_log_prob,
    reparameterize,
)

if TYPE_CHECKING:
    from identrep.models.nn.sparse_coding import OIVAEModule

__all__ = [
    "group_column_norms",
    "group_lasso_penalty",
    "oivae_loss",
    "prox_group_lasso",
]


def group_column_norms(W: Tensor) -> Tensor:
    """``||W[g, :, k]||_2`` for every group g and latent k.

    Parameters
    ----------
    W : Tensor of shape (n_groups, group_dim, n_latents)

    Returns
    -------
    Tensor of shape (n_groups, n_latents)
    """
    return torch.linalg.vector_norm(W, dim=1)


def group_lasso_penalty(W: Tensor, lam: float) -> Tensor:
    """``lam * sum_{g,k} ||W[g, :, k]||_2`` (scalar)."""
    return lam * group_column_norms(W).sum()


def prox_group_lasso(W: Tensor, t: float) -> Tensor:
    """Proximal operator of ``t * sum_{g,k} ||W[g, :, k]||_2``.

    ``argmin_V 0.5 ||V - W||_F^2 + t sum ||V[g, :, k]||`` separates over the
    columns, each shrunk towards 0 by t in norm: ``V[g, :, k] = max(0, 1 -
    t / ||W[g, :, k]||) W[g, :, k]`` (block soft-thresholding; exact zeros when the
    norm is at most t).

    Parameters
    ----------
    W : Tensor of shape (n_groups, group_dim, n_latents)
    t : float, >= 0
        Threshold (step size times penalty weight).

    Returns
    -------
    Tensor of W's shape.
    """
    norms = group_column_norms(W)
    tiny = torch.finfo(W.dtype).tiny
    shrink = torch.clamp(1.0 - t / norms.clamp_min(tiny), min=0.0)
    return W * shrink[:, None, :]


def oivae_loss(module: OIVAEModule, batch: VAEBatch) -> tuple[Tensor, int]:
    """The smooth part of the OI-VAE objective: the negative ELBO per sample (batch
    mean) with one reparameterised z, ``-log p(x | z) + KL(q(z | x) || N(0, I))``,
    the likelihood summed over features. The group-lasso penalty is applied by
    :func:`prox_group_lasso`.

    Returns
    -------
    loss : Tensor, scalar
    n : int
    """
    mean, log_var = module.encode(batch.x)
    z = reparameterize(mean, log_var)
    out = module.decoder(z)
    target = module.target(batch.x).to(out.dtype)
    rec = observation_log_prob(module.likelihood, target, out, module.log_var)
    zeros = torch.zeros_like(mean)
    kl = kl_diag_gaussians(mean, log_var, zeros, zeros)
    return (kl - rec).mean(), batch.x.shape[0]
