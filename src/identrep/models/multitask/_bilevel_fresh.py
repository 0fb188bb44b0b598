"""Fresh tasks at every outer step for :class:`~identrep.BilevelSparseMTL`.

The authors of the bilevel learner (Lachapelle et al., 2023) train on tasks drawn
anew at every outer step instead of a fixed set revisited every epoch. Here a task
sampler (e.g. :class:`~identrep.datasets.SparseTaskSampler`) supplies them: an
object with ``n_samples`` (samples per task), ``n_pool`` (rows of the inputs its
draws index) and ``sample(n_tasks, rng)`` returning ``rows`` (n_tasks, n_samples)
and ``y`` (n_tasks, n_samples). :class:`FreshTaskBatches` turns draws into outer
steps; :func:`fresh_task_loss` solves every drawn task's lasso head cold (a fresh
task has no previous solution) and returns the outer loss.
"""

from __future__ import annotations

from numbers import Integral
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from identrep.exceptions import DataError
from identrep.models.multitask.heads import group_lasso_heads, task_moments

__all__ = ["FreshBatch", "FreshTaskBatches", "check_task_sampler", "fresh_task_loss"]


class FreshBatch(NamedTuple):
    """One outer step of fresh tasks: inputs x (B n, p), targets y (B n,) and the
    task (0..B-1) of every row; tasks are contiguous blocks of n rows."""

    x: Tensor
    y: Tensor
    task: Tensor
    n_tasks: int


def check_task_sampler(sampler, n_rows: int, batch_size: int) -> int:
    """Check ``sampler`` against ``X`` (``n_rows``) and return the tasks per step.

    Raises
    ------
    DataError
        When the sampler lacks the protocol, its pool is not the rows of ``X`` or
        ``batch_size`` holds no whole task.
    """
    missing = [a for a in ("sample", "n_samples", "n_pool") if not hasattr(sampler, a)]
    if missing:
        raise DataError(
            "task_sampler must have sample(n_tasks, rng), n_samples and n_pool (e.g. "
            f"identrep.datasets.SparseTaskSampler); {type(sampler).__name__} lacks "
            f"{', '.join(missing)}."
        )
    if int(sampler.n_pool) != n_rows:
        raise DataError(
            f"task_sampler draws rows of a pool of {sampler.n_pool} inputs, but X has "
            f"{n_rows} rows; build the sampler on the latents of the rows of X."
        )
    n = int(sampler.n_samples)
    if not isinstance(sampler.n_samples, Integral | np.integer) or n < 2:
        raise DataError(
            f"task_sampler.n_samples must be an int >= 2; got {sampler.n_samples!r}."
        )
    if batch_size < n:
        raise DataError(
            f"batch_size ({batch_size}) must hold at least one task of the sampler's "
            f"{n} samples (tasks per step = batch_size // n_samples)."
        )
    return batch_size // n


class FreshTaskBatches:
    """``n_steps`` outer steps per pass, each ``n_tasks`` new tasks of ``sampler``.

    Parameters
    ----------
    sampler : task sampler (see the module doc)
    rows : indexable by an int64 tensor -> Tensor
        The inputs the sampler's rows index (e.g. a
        :class:`~identrep.models.multitask._mtrn_stream.HostRows`).
    n_tasks, n_steps : int
        Tasks per step and steps per pass (epoch).
    seed : int
        Seed of the numpy generator of all draws (drawn once: passes continue the
        stream, so no task repeats by construction).
    standardize : bool or "pooled"
        Centre and scale every task's targets (population std), or centre them
        and divide by the step's pooled std (``"pooled"``), as
        ``standardize_targets`` does for fixed tasks.
    dtype, device
        Of the targets.
    """

    def __init__(
        self, sampler, rows, *, n_tasks, n_steps, seed, standardize, dtype, device
    ):
        self.sampler = sampler
        self.rows = rows
        self.n_tasks = int(n_tasks)
        self.n_steps = int(n_steps)
        self.standardize = standardize
        self.dtype, self.device = dtype, device
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n_steps

    def __iter__(self):
        for _ in range(self.n_steps):
            yield self._draw()

    def _draw(self) -> FreshBatch:
        rows, y = self.sampler.sample(self.n_tasks, self._rng)[:2]
        rows = np.asarray(rows)
        y = np.asarray(y, dtype=np.float64)
        expected = (self.n_tasks, int(self.sampler.n_samples))
        if rows.shape != expected or y.shape != expected:
            raise DataError(
                f"task_sampler.sample({self.n_tasks}, rng) must return rows and y of "
                f"shape {expected}; got {rows.shape} and {y.shape}."
            )
        if self.standardize:
            y = y - y.mean(1, keepdims=True)
            sd = y.std(1, keepdims=True)
            if self.standardize == "pooled":  # one scale: tasks keep their weights
                sd = np.full_like(sd, np.sqrt(np.mean(sd**2)))
            y = y / np.where(sd > 0, sd, 1.0)
        B, n = expected
        x = self.rows[torch.as_tensor(rows.reshape(-1), dtype=torch.long)]
        yt = torch.as_tensor(y.reshape(-1), dtype=self.dtype, device=self.device)
        task = torch.arange(B, device=self.device).repeat_interleave(n)
        return FreshBatch(x, yt, task, B)


def fresh_task_loss(module, batch: FreshBatch, *, l1_reg: float):
    """``0.5 * mean squared error`` of a step of fresh tasks under their lasso
    heads, solved cold on the step's features and differentiated implicitly
    (:func:`~identrep.models.multitask.heads.group_lasso_heads` with the solver
    settings of ``module.heads``). Returns (loss, n_observations)."""
    F = module(batch.x)
    m = task_moments(F, batch.y, batch.task, batch.n_tasks)
    W, b, _ = group_lasso_heads(m, l1_reg, None, **module.heads.solver)
    pred = (F * W[batch.task]).sum(-1) + b[batch.task]
    return 0.5 * (pred - batch.y).square().mean(), torch.tensor(batch.y.numel())
