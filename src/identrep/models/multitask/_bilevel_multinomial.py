r"""Multinomial group-lasso heads for :class:`~identrep.BilevelSparseMTL`.

Classification version of the bilevel sparse learner (Lachapelle et al., 2023): for
every task t of a batch, on the batch-normalised features f = BN(h(x)) in R^d,

    W_t = argmin_W  -(1/n_t) sum_i log softmax(W^T [f_i; 1])[y_i]
                    + lam_t sum_{j <= d} ||W_{j,:}||_2,

W of shape (d + 1, K): row j groups feature j across the K classes, the last row
is the unpenalised intercept; ``lam_t = l1_reg * lambda_max_t`` (no gradient). The
heads are solved by :func:`~identrep.models.multitask.heads.group_lasso_multinomial`
(warm started from each task's previous solution) and differentiated implicitly on
their group support. The outer loss is the mean cross-entropy of the batch.

A batch holds whole tasks of different sizes; they are padded to the largest one
(``omega`` = 0 on padding rows), so the solver runs batched over tasks.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import torch
from sklearn.utils.metaestimators import available_if
from torch import Tensor, nn

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.models.multitask._mtrn_batches import observation_batches
from identrep.models.multitask._mtrn_loss import ObsBatch
from identrep.models.multitask.heads.group_lasso import (
    group_lasso_multinomial,
    lambda_max_multinomial,
)
from identrep.utils.numerics import column_moments
from identrep.utils.seeding import seeded
from identrep.utils.validation import check_multitask, check_task_ids

__all__ = [
    "MultinomialHeadsMixin",
    "MultinomialLassoHeads",
    "fit_multinomial",
    "multinomial_heads",
    "multinomial_loss",
    "pad_tasks",
]

#: tasks per final (float64) head solve
_FINAL_CHUNK = 256


def pad_tasks(F: Tensor, labels: Tensor, local: Tensor, n_tasks: int, n_classes: int):
    """Pad the observations of ``n_tasks`` tasks into per-task blocks.

    Parameters
    ----------
    F : Tensor of shape (n, d)
    labels : LongTensor of shape (n,)
        Class codes in 0..n_classes-1.
    local : LongTensor of shape (n,)
        Task of every row, in 0..n_tasks-1.
    n_tasks, n_classes : int

    Returns
    -------
    Fp : Tensor of shape (n_tasks, n_max, d + 1)
        Features with a last column of ones (differentiable in F).
    Yp : Tensor of shape (n_tasks, n_max, n_classes), one-hot
    omega : Tensor of shape (n_tasks, n_max)
        1 on observations, 0 on padding.
    pos : LongTensor of shape (n,)
        Row of every observation inside its task's block.
    """
    counts = torch.bincount(local, minlength=n_tasks)
    order = torch.argsort(local, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    pos = torch.empty_like(local)
    pos[order] = torch.arange(local.numel(), device=local.device) - starts[local[order]]
    n_max = int(counts.max().item())
    F1 = torch.cat([F, F.new_ones(F.shape[0], 1)], 1)
    Fp = F.new_zeros(n_tasks, n_max, F1.shape[1]).index_put((local, pos), F1)
    Yp = F.new_zeros(n_tasks, n_max, n_classes)
    Yp[local, pos, labels] = 1
    omega = F.new_zeros(n_tasks, n_max)
    omega[local, pos] = 1
    return Fp, Yp, omega, pos


class MultinomialLassoHeads(nn.Module):
    """Solver state of multinomial group-lasso heads: each task's latest solution
    (buffer ``weight`` of shape (n_tasks, d + 1, n_classes)), the warm start of its
    next solve; no parameters."""

    def __init__(
        self, n_features, n_tasks, n_classes, *, tol=1e-5, max_iter=500, diff="implicit"
    ):
        super().__init__()
        shape = (int(n_tasks), int(n_features) + 1, int(n_classes))
        self.register_buffer("weight", torch.zeros(shape))
        self.solver = dict(tol=float(tol), max_iter=int(max_iter), diff=diff)

    def solve(self, F: Tensor, labels: Tensor, tasks: Tensor, l1_reg: float, fit=None):
        """Heads of the tasks in ``tasks`` (codes per row) on features ``F``, solved
        on the rows where the bool mask ``fit`` is True (all when None).

        Returns the heads (n_unique, d + 1, K), the unique task codes and the local
        task index of every row.
        """
        uniq, local = torch.unique(tasks, return_inverse=True)
        Fp, Yp, omega, pos = pad_tasks(
            F, labels, local, uniq.numel(), self.weight.shape[-1]
        )
        if fit is not None:  # held-out rows weigh nothing in the inner problem
            omega[local, pos] = fit.to(omega.dtype)
        lam = float(l1_reg) * lambda_max_multinomial(Fp.detach(), Yp, omega)
        W0 = self.weight[uniq].to(F.dtype)
        W, _ = group_lasso_multinomial(Fp, Yp, omega, lam, W0, **self.solver)
        with torch.no_grad():
            self.weight[uniq] = W.detach().to(self.weight.dtype)
        return W, uniq, local


def multinomial_loss(module, batch: ObsBatch, *, l1_reg: float):
    """Mean cross-entropy of a batch of whole tasks under their lasso heads.

    ``batch.y`` holds class codes (as floats). Heads are solved on the rows of
    ``batch.fit`` and the loss averages over those of ``batch.score`` (all rows
    when None: validation batches solve on a task's training rows and score its
    held-out ones). Returns (loss, number of scored observations).
    """
    F = module(batch.x)
    labels = batch.y.long()
    W, _, local = module.heads.solve(F, labels, batch.task, l1_reg, fit=batch.fit)
    F1 = torch.cat([F, F.new_ones(F.shape[0], 1)], 1)
    logits = torch.einsum("nm,nmk->nk", F1, W[local])
    if batch.score is None:
        loss = nn.functional.cross_entropy(logits, labels)
        return loss, torch.tensor(labels.numel())
    ce = nn.functional.cross_entropy(logits, labels, reduction="none")
    n = batch.score.sum()
    return torch.where(batch.score, ce, 0.0).sum() / n.clamp_min(1), n


@torch.no_grad()
def final_multinomial_heads(
    F, labels, task_ids, n_tasks, n_classes, l1_reg, *, tol=1e-8, max_iter=20000
):
    """Heads of every task on all its observations, float64, in chunks of tasks.

    Returns W (n_tasks, d, K) and b (n_tasks, K) as numpy arrays.
    """
    F = torch.as_tensor(F, dtype=torch.float64)
    labels = torch.as_tensor(labels)
    task_ids = torch.as_tensor(task_ids)
    d = F.shape[1]
    W = np.zeros((n_tasks, d + 1, n_classes))
    for start in range(0, n_tasks, _FINAL_CHUNK):
        stop = min(start + _FINAL_CHUNK, n_tasks)
        rows = (task_ids >= start) & (task_ids < stop)
        local = task_ids[rows] - start
        Fp, Yp, omega, _ = pad_tasks(
            F[rows], labels[rows], local, stop - start, n_classes
        )
        lam = float(l1_reg) * lambda_max_multinomial(Fp, Yp, omega)
        Wc, _ = group_lasso_multinomial(Fp, Yp, omega, lam, tol=tol, max_iter=max_iter)
        W[start:stop] = Wc.numpy()
    return W[:, :d], W[:, d]


def multinomial_heads(est, n_tasks: int, n_classes: int) -> MultinomialLassoHeads:
    """Empty multinomial heads of ``est`` (an MTRN) in its ``dtype_``: the ones
    ``fit`` trains, and the ones a saved model's state dict is loaded into."""
    heads = MultinomialLassoHeads(
        int(est.n_latents), int(n_tasks), int(n_classes), **est._inner_solver()
    )
    return heads.to(dtype=est.dtype_)


def fit_multinomial(est, X, y, task_ids):
    """``fit`` of an MTRN (or :class:`~identrep.BilevelSparseMTL`) with
    ``heads="group_lasso"`` and ``loss="multinomial"`` (see the module doc)."""
    t_start = time.perf_counter()
    est._check_fit_input(X, min_samples=2)
    est._check_y_given(y)
    if task_ids is None:
        raise DataError(
            "loss='multinomial' needs the long layout: class labels y of shape "
            "(n_samples,) with task_ids=...; got task_ids=None."
        )
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise DataError(
            f"loss='multinomial' needs 1-D class labels y; got shape {y_arr.shape}."
        )
    classes, codes = np.unique(y_arr, return_inverse=True)
    if classes.size < 2:
        raise DataError(
            f"loss='multinomial' needs at least 2 classes in y; got {classes.size}."
        )
    data = check_multitask(
        X, codes.astype(float), task_ids, min_samples=1, check_constant=False
    )
    p, T, K = data.X.shape[1], data.n_tasks, int(classes.size)
    rng, (init_seed, batch_seed) = est._start_fit(2)
    stats = column_moments(data.X) if est._standardizes() else None
    with seeded(init_seed):
        net = est._build_module(p, T, est.dtype_, input_stats=stats, probe=data.X[:2])
    net.heads = multinomial_heads(est, T, K)
    net = net.to(device=est.device_, dtype=est.dtype_)
    train_idx, val_idx = est._split(data.task_ids, rng)
    # whole tasks per batch (as ridge heads); validation: solve on a task's
    # training rows, score its held-out ones
    train_b, val_b = observation_batches(
        est._batches,
        data,
        data.y,
        train_idx,
        val_idx,
        est._tensor(data.X, est._x_dtype()),
        batch_seed,
        ridge=True,
        dtype=est.dtype_,
    )
    est.history_ = est._fit_module(
        net,
        partial(multinomial_loss, l1_reg=float(est.l1_reg)),
        train_b,
        val_b,
        desc=f"{type(est).__name__}[multinomial]",
    )
    est.module_ = net.eval()
    F = est._features(data.X)[data.rows]
    W, b = final_multinomial_heads(
        F, data.y.astype(int), data.task_ids, T, K, float(est.l1_reg)
    )
    est.head_weights_, est.head_bias_ = W, b
    est.classes_ = classes
    est.tasks_, est.n_tasks_, est.n_latents_ = data.tasks, T, int(est.n_latents)
    est.batch_mode_ = "observations"
    est._record_features(X, p)
    est.supports_ = np.linalg.norm(W, axis=-1) > 0
    est.fit_seconds_ = time.perf_counter() - t_start
    return est


class MultinomialHeadsMixin:
    """Classification outputs of an MTRN fitted with ``loss="multinomial"``:
    ``predict_proba``, and the class predictions and accuracy that ``predict`` and
    ``score`` return for such a model."""

    def _check_classifier(self, what: str) -> None:
        self._check_fitted()
        if not hasattr(self, "classes_"):
            raise DataError(
                f"{what} needs a model fitted with loss='multinomial'; this one was "
                f"fitted with loss={self.loss!r}."
            )

    @available_if(lambda self: self.loss == "multinomial")
    def predict_proba(self, X: ArrayLike, task_ids: ArrayLike) -> np.ndarray:
        """Class probabilities of every sample under its task's head
        (``loss="multinomial"`` only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task_ids : array-like of shape (n_samples,)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), columns in the order of
        ``classes_``.
        """
        self._check_classifier("predict_proba")
        X = self._check_X(X)
        codes = check_task_ids(task_ids, X.shape[0], self.tasks_)
        F = self._features(X)
        logits = np.einsum("nd,ndk->nk", F, self.head_weights_[codes])
        logits += self.head_bias_[codes]
        logits -= logits.max(1, keepdims=True)
        P = np.exp(logits)
        return P / P.sum(1, keepdims=True)

    def _predict_classes(self, X: ArrayLike, task_ids) -> np.ndarray:
        """The most probable class of every sample under its task's head."""
        if task_ids is None:
            raise DataError("predict of a multinomial model needs task_ids.")
        return self.classes_[self.predict_proba(X, task_ids).argmax(1)]

    def _score_classes(self, X: ArrayLike, y: ArrayLike, task_ids) -> float:
        """Accuracy over all samples."""
        if task_ids is None:
            raise DataError("score of a multinomial model needs task_ids.")
        return float(np.mean(self._predict_classes(X, task_ids) == np.asarray(y)))
