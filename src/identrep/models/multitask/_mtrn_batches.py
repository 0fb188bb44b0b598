"""MTRN's minibatch collation and its exact head refit (the ``post_epoch`` step).

The estimator (:class:`~identrep.models.multitask.mtrn.MTRN`) decides the layout;
these helpers turn the checked multi-task arrays into re-iterable batch sources of
:class:`~identrep.models.multitask._mtrn_loss.ObsBatch` (observations) or
:class:`~identrep.models.multitask._mtrn_loss.RowBatch` (rows of the wide layout),
built with the estimator's ``_batches`` (``make`` below), and into the block-
coordinate step that replaces joint heads by their exact ridge solution.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch
from torch import Tensor

from identrep.models.multitask._mtrn_loss import ObsBatch, RowBatch
from identrep.models.multitask._mtrn_stream import HostRows, StreamedRidgeRefit
from identrep.models.multitask.heads import (
    GroupLassoHeads,
    JointHeads,
    fit_group_lasso_heads,
    fit_ridge_heads,
    fit_ridge_heads_wide,
)

__all__ = [
    "batch_mode",
    "final_heads",
    "head_refit_step",
    "observation_batches",
    "row_batches",
]


def batch_mode(data, counts, heads: str, batch_size: int, n_latents: int) -> str:
    """How MTRN draws minibatches: ``"rows"`` for wide data, unless ridge or lasso
    heads would see too few samples of a task per batch (then, and for the long
    layout, ``"observations"``)."""
    if data.layout != "wide":
        return "observations"
    if heads == "joint":
        return "rows"
    n_rows = data.X.shape[0]
    per_batch = min(int(batch_size), n_rows) * counts / n_rows
    enough = 2 * (int(n_latents) + 1)
    return "rows" if np.median(per_batch) >= enough else "observations"


def final_heads(module, F, y_std, task_ids, n_tasks, *, alpha, l1_reg):
    """The fitted heads (W (T, d), b (T,), float64 numpy) on the standardised scale.

    Joint heads are read from the module; ridge and lasso heads are solved once on
    all observations (features of shape (n_obs, d) as float64 numpy: ``F``, or
    ``F()`` when a callable, so joint heads never compute them).
    """
    heads = module.heads
    if isinstance(heads, JointHeads):
        W = heads.weight.detach().cpu().double().numpy()
        return W, heads.bias.detach().cpu().double().numpy()
    F = F() if callable(F) else F
    args = (torch.as_tensor(F), torch.as_tensor(y_std), torch.as_tensor(task_ids))
    if isinstance(heads, GroupLassoHeads):
        W, b, _ = fit_group_lasso_heads(*args, n_tasks, l1_reg)
    else:
        W, b = fit_ridge_heads(*args, n_tasks, alpha)
    return W.numpy(), b.numpy()


def observation_batches(
    make: Callable, data, y_std, train_idx, val_idx, Xt, seed, *, ridge, dtype=None
):
    """Train and validation sources over observations (long layout, or wide data
    too sparse for per-batch ridge heads); targets in ``dtype`` (default
    ``Xt.dtype``; the network's, when ``Xt`` is float64 input it standardises).

    With ``ridge`` heads batches hold whole tasks, and validation batches solve
    each task's head on its training samples and score its held-out ones.
    """
    dev = Xt.device
    rows = torch.as_tensor(data.rows, device=dev)
    yt = torch.as_tensor(y_std, dtype=dtype or Xt.dtype, device=dev)
    tt = torch.as_tensor(data.task_ids, device=dev)

    def collate(fit=None, score=None):
        def f(i):
            return ObsBatch(
                Xt[rows[i]],
                yt[i],
                tt[i],
                None if fit is None else fit[i],
                None if score is None else score[i],
            )

        return f

    groups = data.task_ids[train_idx] if ridge else None
    train_b = make(train_idx, collate(), seed=seed, groups=groups)
    if val_idx.size == 0:
        return train_b, None
    if not ridge:
        return train_b, make(val_idx, collate(), shuffle=False)
    is_val = np.zeros(data.n_obs, dtype=bool)
    is_val[val_idx] = True
    is_val_t = torch.as_tensor(is_val, device=dev)
    val_b = make(
        np.arange(data.n_obs),
        collate(fit=~is_val_t, score=is_val_t),
        shuffle=False,
        groups=data.task_ids,
    )
    return train_b, val_b


def row_batches(
    make: Callable, data, y_std, train_idx, val_idx, Xt, seed, *, ridge, dtype=None
):
    """Train and validation sources over the rows of wide data (every task of a row
    predicted at once, unobserved entries masked); targets in ``dtype`` as in
    :func:`observation_batches`."""
    dev = Xt.device
    n_rows, T = data.X.shape[0], data.n_tasks
    Y = np.zeros((n_rows, T))
    Y[data.rows, data.task_ids] = y_std
    fit = np.zeros((n_rows, T), dtype=bool)
    fit[data.rows[train_idx], data.task_ids[train_idx]] = True
    val = np.zeros((n_rows, T), dtype=bool)
    val[data.rows[val_idx], data.task_ids[val_idx]] = True
    Yt = torch.as_tensor(Y, dtype=dtype or Xt.dtype, device=dev)
    fit_t = torch.as_tensor(fit, device=dev)
    val_t = torch.as_tensor(val, device=dev)

    def collate(score):
        return lambda i: RowBatch(Xt[i], Yt[i], fit_t[i], score[i])

    train_b = make(np.flatnonzero(fit.any(1)), collate(fit_t), seed=seed)
    if val_idx.size == 0:
        return train_b, None
    need = (val | fit).any(1) if ridge else val.any(1)
    return train_b, make(np.flatnonzero(need), collate(val_t), shuffle=False)


def _all_features(module, X) -> Tensor:
    """Features of every row of ``X`` (a tensor, or :class:`HostRows` streamed in
    chunks)."""
    return X.features(module) if isinstance(X, HostRows) else module.features(X)


def _refit_joint_heads(module, *, X, rows, y, task_ids, alpha) -> None:
    """Replace the joint heads by the exact ridge solution given the current features.

    A block-coordinate step on the training observations (``rows`` into ``X``,
    standardised targets ``y``), run by :func:`~identrep.training.fit_module` after
    every epoch.
    """
    F = _all_features(module, X)[rows]
    W, b = fit_ridge_heads(F, y, task_ids, module.heads.n_tasks, alpha)
    module.heads.weight.copy_(W.to(module.heads.weight.dtype))
    module.heads.bias.copy_(b.to(module.heads.bias.dtype))


def _refit_joint_heads_wide(module, *, X, Y, mask, alpha) -> None:
    """:func:`_refit_joint_heads` for wide data: training entries ``mask`` of the
    (rows x tasks) standardised target matrix ``Y``."""
    W, b = fit_ridge_heads_wide(_all_features(module, X), Y, mask, alpha)
    module.heads.weight.copy_(W.to(module.heads.weight.dtype))
    module.heads.bias.copy_(b.to(module.heads.bias.dtype))


def head_refit_step(
    data, y_std, train_idx, Xt: Tensor | HostRows, *, rows_mode: bool, alpha: float
) -> Callable:
    """The ``post_epoch`` step refitting joint heads on the training observations;
    for wide data (``rows_mode``) each row's features enter the refit once."""
    dev = Xt.device
    if rows_mode:
        mask = np.zeros((data.X.shape[0], data.n_tasks), dtype=bool)
        Ytr = np.zeros((data.X.shape[0], data.n_tasks))
        mask[data.rows[train_idx], data.task_ids[train_idx]] = True
        Ytr[data.rows[train_idx], data.task_ids[train_idx]] = y_std[train_idx]
        return partial(
            _refit_joint_heads_wide,
            X=Xt,
            Y=torch.as_tensor(Ytr, device=dev),
            mask=torch.as_tensor(mask, device=dev),
            alpha=alpha,
        )
    if isinstance(Xt, HostRows) and Xt.shape[0] > Xt.chunk_size:
        return StreamedRidgeRefit(
            Xt,
            data.rows[train_idx],
            y_std[train_idx],
            data.task_ids[train_idx],
            data.n_tasks,
            alpha,
        )
    return partial(
        _refit_joint_heads,
        X=Xt,
        rows=torch.as_tensor(data.rows[train_idx], device=dev),
        y=torch.as_tensor(y_std[train_idx], device=dev),
        task_ids=torch.as_tensor(data.task_ids[train_idx], device=dev),
        alpha=alpha,
    )
