"""Batch sources of :func:`~identrep.training.fit_module` and the validation split.

:class:`IndexBatches` (and its tensor form :class:`TensorBatches`) are re-iterable
sources: each pass draws a fresh order from a private, deterministically seeded
``torch.Generator``, optionally keeping groups (tasks) together; their
``state_dict`` lets a training checkpoint continue the order.
:func:`split_within_tasks` makes the validation split by samples within tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

from identrep._typing import Seed
from identrep.training._constraints import _constraints
from identrep.utils._param_validation import (
    validate_parameter_constraints,
    validate_params,
)
from identrep.utils.seeding import check_random_state

__all__ = ["IndexBatches", "StepBatches", "TensorBatches", "split_within_tasks"]


class IndexBatches:
    """Minibatches of item indices, reshuffled on every pass.

    Iterating yields ``collate(idx)`` for consecutive slices ``idx`` (int64 tensors)
    of a permutation of ``range(n_items)``. Each new iteration (epoch) draws a new
    permutation from a ``torch.Generator`` seeded once with ``seed``, so two sources
    built with the same arguments yield identical batch sequences.

    Parameters
    ----------
    n_items : int
        Number of items (rows, observations) to batch over.
    batch_size : int
        Items per batch (upper bound when ``groups`` is given).
    collate : callable, optional
        Maps an index tensor of shape (batch,) to a batch; default: the indices.
    shuffle : bool, default=True
        Reshuffle on every pass; otherwise items come in order.
    seed : int, default=0
        Seed of the private generator.
    groups : array-like of shape (n_items,), optional
        Integer group (task) of every item. Batches are then packed from whole
        groups, in a random group order and with a random order within each group:
        groups are added to a batch while it stays within ``batch_size``; a group
        larger than ``batch_size`` is cut into ``ceil(size / batch_size)`` nearly
        equal chunks, each its own batch. Used by solvers that need many samples of
        each task in a batch (closed-form ridge heads).
    drop_last : bool, default=False
        Drop a final incomplete batch (ungrouped batching only).
    device : torch.device or str, optional
        Device the index tensors are moved to before ``collate``.
    """

    def __init__(
        self,
        n_items: int,
        batch_size: int,
        *,
        collate: Callable[[Tensor], Any] | None = None,
        shuffle: bool = True,
        seed: int = 0,
        groups: Any = None,
        drop_last: bool = False,
        device: torch.device | str | None = None,
    ):
        validate_parameter_constraints(
            _constraints("n_items", "batch_size", "shuffle", "seed", "drop_last"),
            dict(
                n_items=n_items,
                batch_size=batch_size,
                shuffle=shuffle,
                seed=seed,
                drop_last=drop_last,
            ),
            caller_name=type(self).__name__,
        )
        self.n_items = int(n_items)
        self.batch_size = int(batch_size)
        self.collate = collate
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.device = None if device is None else torch.device(device)
        self._generator = torch.Generator().manual_seed(int(seed))
        if groups is None:
            self._groups = None
        else:
            g = torch.as_tensor(np.asarray(groups), dtype=torch.int64).cpu()
            if g.shape != (self.n_items,):
                raise ValueError(
                    f"groups must have shape ({self.n_items},) (one group per item); "
                    f"got {tuple(g.shape)}."
                )
            _, self._groups = torch.unique(g, return_inverse=True)
            self._n_groups = int(self._groups.max()) + 1

    def _index_batches(self) -> list[Tensor]:
        n, bs = self.n_items, self.batch_size
        if self._groups is None:
            order = (
                torch.randperm(n, generator=self._generator)
                if self.shuffle
                else torch.arange(n)
            )
            stop = n - n % bs if (self.drop_last and n >= bs) else n
            return list(order[:stop].split(bs))
        # grouped: random group order, random order within groups, then pack
        if self.shuffle:
            perm = torch.randperm(n, generator=self._generator)
            rank = torch.randperm(self._n_groups, generator=self._generator)
        else:
            perm, rank = torch.arange(n), torch.arange(self._n_groups)
        key = rank[self._groups[perm]]
        order = perm[torch.sort(key, stable=True).indices]
        sizes = torch.bincount(key, minlength=self._n_groups)  # by group rank
        chunks = order.split(sizes.tolist())
        out: list[Tensor] = []
        current: list[Tensor] = []
        filled = 0
        for chunk in chunks:
            m = chunk.numel()
            if m > bs:
                if current:
                    out.append(torch.cat(current))
                    current, filled = [], 0
                out.extend(chunk.tensor_split(math.ceil(m / bs)))
                continue
            if filled + m > bs and current:
                out.append(torch.cat(current))
                current, filled = [], 0
            current.append(chunk)
            filled += m
        if current:
            out.append(torch.cat(current))
        return out

    def __iter__(self) -> Iterator[Any]:
        for idx in self._index_batches():
            if self.device is not None:
                idx = idx.to(self.device)
            yield idx if self.collate is None else self.collate(idx)

    def state_dict(self) -> dict:
        """The random state of the batch order (for training checkpoints)."""
        return {"generator": self._generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        """Continue the batch order from :meth:`state_dict`'s state."""
        self._generator.set_state(state["generator"].cpu())

    def __len__(self) -> int:
        if self._groups is None:
            if self.drop_last and self.n_items >= self.batch_size:
                return self.n_items // self.batch_size
            return math.ceil(self.n_items / self.batch_size)
        state = self._generator.get_state()  # counting must not advance the RNG
        try:
            return len(self._index_batches())
        finally:
            self._generator.set_state(state)


class TensorBatches(IndexBatches):
    """Minibatches of the rows of aligned tensors, reshuffled on every pass.

    Parameters
    ----------
    *tensors : Tensor
        Tensors with the same first dimension n; each batch is the tuple
        ``tuple(t[idx] for t in tensors)``. Indices follow the first tensor's device.
    batch_size, shuffle, seed, groups, drop_last
        As in :class:`IndexBatches`.

    Examples
    --------
    >>> import torch
    >>> x, y = torch.arange(10.0)[:, None], torch.arange(10.0)
    >>> [len(b[0]) for b in TensorBatches(x, y, batch_size=4, seed=0)]
    [4, 4, 2]
    """

    def __init__(
        self,
        *tensors: Tensor,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        groups: Any = None,
        drop_last: bool = False,
    ):
        if not tensors:
            raise ValueError("TensorBatches needs at least one tensor.")
        n = tensors[0].shape[0]
        for i, t in enumerate(tensors):
            if t.shape[0] != n:
                raise ValueError(
                    f"All tensors must have the same first dimension; tensor 0 has "
                    f"{n} rows but tensor {i} has {t.shape[0]}."
                )
        self.tensors = tensors
        super().__init__(
            n,
            batch_size,
            collate=lambda idx: tuple(t[idx] for t in self.tensors),
            shuffle=shuffle,
            seed=seed,
            groups=groups,
            drop_last=drop_last,
            device=tensors[0].device,
        )


class StepBatches:
    """Epochs of a fixed number of steps cut from the passes of another source.

    Every iteration (one epoch of :func:`~identrep.training.fit_module`: one
    validation, one chance to be the restored best state) yields the next
    ``n_steps`` batches of ``batches``, starting a new pass of ``batches`` (for
    :class:`IndexBatches`, a fresh shuffle) whenever one ends. Training on data
    of different sizes can so take the same number of optimiser steps. With
    ``n_steps == len(batches)`` the sequence is that of ``batches`` itself.

    Parameters
    ----------
    batches : re-iterable
        The underlying batch source; must yield at least one batch a pass.
    n_steps : int
        Batches per iteration (>= 1).
    """

    def __init__(self, batches, n_steps: int):
        validate_parameter_constraints(
            {"n_steps": _constraints("steps_per_epoch")["steps_per_epoch"][:1]},
            {"n_steps": n_steps},
            caller_name=type(self).__name__,
        )
        self.batches, self.n_steps = batches, int(n_steps)
        self.passes = 0  # passes of ``batches`` started
        self._it: Iterator[Any] | None = None

    def __len__(self) -> int:
        return self.n_steps

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.n_steps):
            batch = next(self._it, None) if self._it is not None else None
            if batch is None:
                self._it = iter(self.batches)
                self.passes += 1
                batch = next(self._it, None)
                if batch is None:
                    raise ValueError("StepBatches: the batch source yielded no batch.")
            yield batch


@validate_params(_constraints("val_fraction", "rng"))
def split_within_tasks(
    task_ids: Any, val_fraction: float, rng: Seed = None
) -> tuple[np.ndarray, np.ndarray]:
    """Random train/validation split of the samples of every task.

    Each task with n_t samples puts ``min(round(val_fraction * n_t), n_t - 1)`` of
    them in validation, so every task keeps at least one training sample (and tasks
    with one sample have none in validation).

    Parameters
    ----------
    task_ids : array-like of shape (n_obs,)
        Integer task of every observation.
    val_fraction : float in [0, 1)
        Fraction of each task's samples held out.
    rng : int, Generator or None
        Randomness of the split.

    Returns
    -------
    train_idx, val_idx : ndarray of int64
        Sorted observation indices; together a partition of ``range(n_obs)``.
    """
    t = np.asarray(task_ids)
    if t.ndim != 1 or not np.issubdtype(t.dtype, np.integer):
        raise ValueError(
            f"task_ids must be a 1-D integer array; got shape {t.shape} and dtype "
            f"{t.dtype}."
        )
    n = t.shape[0]
    if n == 0 or val_fraction == 0:
        return np.arange(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rng = check_random_state(rng)
    _, codes = np.unique(t, return_inverse=True)
    counts = np.bincount(codes)
    n_val = np.minimum(np.rint(val_fraction * counts).astype(np.int64), counts - 1)
    order = np.lexsort((rng.random(n), codes))  # task-major, random within task
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[codes[order]]
    is_val = rank < n_val[codes]
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)
