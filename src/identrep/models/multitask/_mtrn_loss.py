"""The MTRN loss and its minibatch types (pure: tensors in, tensors out).

:func:`mtrn_loss` is the Gaussian negative log-likelihood (unit noise) of a
minibatch of a :class:`~identrep.models.nn.mlp.MultiTaskNet`, with joint heads
(``module.heads``) or per-task ridge heads solved on the batch and differentiated
through. :class:`ObsBatch` (long layout: observations) and :class:`RowBatch` (wide
layout: rows, every task at once) are what it reads.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from identrep.models.multitask.heads import (
    GroupLassoHeads,
    ridge_heads,
    ridge_heads_masked,
    task_moments,
    task_moments_masked,
)
from identrep.models.nn.mlp import MultiTaskNet

__all__ = ["ObsBatch", "RowBatch", "mtrn_loss"]


class ObsBatch(NamedTuple):
    """Observations of a long-format minibatch.

    x (B, p) inputs, y (B,) targets, task (B,) task codes; ``fit`` (B,) bool marks
    the observations ridge heads are solved on and ``score`` (B,) bool those the
    loss averages over (``None`` = all).
    """

    x: Tensor
    y: Tensor
    task: Tensor
    fit: Tensor | None
    score: Tensor | None


class RowBatch(NamedTuple):
    """Rows of a wide-format minibatch: x (B, p), Y (B, T) with 0 where unobserved,
    ``fit`` and ``score`` (B, T) bool masks of the entries heads are solved on and
    the loss averages over."""

    x: Tensor
    Y: Tensor
    fit: Tensor
    score: Tensor


def _half_mse(resid: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """0.5 * mean of squared residuals over ``mask`` (all if None), and the count."""
    if mask is None:
        return 0.5 * resid.square().mean(), torch.tensor(resid.numel())
    n = mask.sum()
    sq = torch.where(mask, resid, torch.zeros_like(resid)).square()
    return 0.5 * sq.sum() / n.clamp_min(1), n


def mtrn_loss(
    module: MultiTaskNet,
    batch: ObsBatch | RowBatch,
    *,
    alpha: float | None = None,
    l1_reg: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Gaussian negative log-likelihood (unit noise) of a minibatch, up to constants.

    ``0.5 * mean over scored (sample, task) pairs of (y - w_t^T h(x) - b_t)^2``. The
    heads are ``module.heads`` (joint) or, when it is ``None``, per-task ridge
    solutions with penalty ``alpha`` on the batch's ``fit`` entries, differentiated
    through (:func:`identrep.models.multitask.heads.ridge_heads`), or, when it is a
    :class:`~identrep.models.multitask.heads.GroupLassoHeads`, per-task lasso
    solutions with penalty ``l1_reg * lambda_max`` differentiated implicitly on
    their support (:func:`identrep.models.multitask.heads.group_lasso_heads`).

    Parameters
    ----------
    module : MultiTaskNet
    batch : ObsBatch or RowBatch
    alpha : float, optional
        Ridge penalty; required when ``module.heads`` is None.
    l1_reg : float, optional
        Lasso penalty as a fraction of lambda_max; required for group-lasso heads.

    Returns
    -------
    loss : Tensor, scalar
    n_scored : Tensor, scalar
        Number of terms averaged (the batch's weight in epoch means).
    """
    F = module(batch.x)
    lasso = isinstance(module.heads, GroupLassoHeads)
    if isinstance(batch, RowBatch):
        if lasso:
            moments = task_moments_masked(F, batch.Y, batch.fit)
            W, b = module.heads.solve(moments, None, l1_reg)
            return _half_mse(F @ W.T + b - batch.Y, batch.score & batch.fit.any(0))
        if module.heads is not None:
            P = module.heads(F)
            score = batch.score
        else:
            W, b = ridge_heads_masked(F, batch.Y, batch.fit, alpha)
            P = F @ W.T + b
            score = batch.score & batch.fit.any(0)
        return _half_mse(P - batch.Y, score)
    if module.heads is not None and not lasso:
        return _half_mse(module.heads.gather(F, batch.task) - batch.y, batch.score)
    uniq, local = torch.unique(batch.task, return_inverse=True)
    if lasso:
        m = task_moments(F, batch.y, local, uniq.numel(), weight=batch.fit)
        W, b = module.heads.solve(m, uniq, l1_reg)
    else:
        W, b = ridge_heads(F, batch.y, local, uniq.numel(), alpha, weight=batch.fit)
    pred = (F * W[local]).sum(-1) + b[local]
    score = batch.score
    if batch.fit is not None:
        fitted = torch.zeros(uniq.numel(), dtype=torch.bool, device=F.device)
        fitted[local[batch.fit]] = True
        score = fitted[local] if score is None else score & fitted[local]
    return _half_mse(pred - batch.y, score)
