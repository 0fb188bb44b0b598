"""The one training loop every torch model in identrep uses, and its batch helpers.

:func:`fit_module` runs minibatch gradient descent on ``loss_fn(module, batch)``
with optional early stopping on a validation loss, gradient clipping and a
progress display (:mod:`identrep.training.progress`). It never picks a device and
owns no data: the caller builds the module on its device and hands over
re-iterable batch sources.

:class:`IndexBatches` (and its tensor form :class:`TensorBatches`) are such sources:
each pass draws a fresh order from a private, deterministically seeded
``torch.Generator``, optionally keeping groups (tasks) together.
:func:`split_within_tasks` makes the validation split by samples within tasks.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from identrep._typing import Seed
from identrep.exceptions import ConvergenceWarning
from identrep.training._optim import OPTIMIZERS as _OPTIMIZERS
from identrep.training._optim import make_optimizer as _make_optimizer
from identrep.training.progress import Progress
from identrep.utils._param_validation import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from identrep.utils.seeding import check_random_state

__all__ = [
    "TRAINING_CONSTRAINTS",
    "IndexBatches",
    "TensorBatches",
    "fit_module",
    "split_within_tasks",
]

#: The declared constraints of the training budget, shared by :func:`fit_module`,
#: the batch helpers, :func:`split_within_tasks` and every torch estimator's
#: ``_parameter_constraints``, so a hyperparameter follows one rule everywhere
#: (e.g. a bool is never a count, ``grad_clip`` is a positive number or None).
TRAINING_CONSTRAINTS: dict[str, list] = {
    "lr": [Interval(Real, 0, None, closed="neither")],
    "max_epochs": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "patience": [Interval(Integral, 1, None, closed="left"), None],
    "val_fraction": [Interval(Real, 0, 1, closed="left")],
    "grad_clip": [Interval(Real, 0, None, closed="neither"), None],
    "weight_decay": [Interval(Real, 0, None, closed="left")],
    "lr_schedule": [StrOptions({"cosine"}), None],
    "min_delta": [Interval(Real, 0, None, closed="left")],
    "min_lr_ratio": [Interval(Real, 0, 1, closed="both")],
    "optimizer": [StrOptions(set(_OPTIMIZERS))],
    "progress": ["boolean"],
    "desc": [str],
    "post_epoch": ["callable", None],
    "callback": ["callable", None],
    "max_time": [Interval(Real, 0, None, closed="neither"), None],
    "loss_fn": ["callable"],
    "seed": [Interval(Integral, None, None, closed="neither")],
    "shuffle": ["boolean"],
    "drop_last": ["boolean"],
    "n_items": [Interval(Integral, 1, None, closed="left")],
    "rng": ["random_state"],
}


def _constraints(*names: str) -> dict[str, list]:
    return {n: TRAINING_CONSTRAINTS[n] for n in names}


# ---------------------------------------------------------------------- batches
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


# ------------------------------------------------------------------------- loop
def _check_reiterable(batches: Iterable, name: str) -> None:
    if isinstance(batches, Iterator):
        raise TypeError(
            f"{name} must be re-iterable (a new pass every epoch), e.g. an "
            "IndexBatches/TensorBatches or a list; got a one-shot iterator "
            f"({type(batches).__name__})."
        )


def _unpack(out: Tensor | Sequence) -> tuple[Tensor, float]:
    """``loss`` or ``(loss, weight)`` -> (loss, weight)."""
    if isinstance(out, Tensor):
        return out, 1.0
    loss, weight = out
    return loss, float(weight)


def _mean_loss(module, loss_fn, batches) -> float:
    total, weight = 0.0, 0.0
    with torch.no_grad():
        for batch in batches:
            loss, w = _unpack(loss_fn(module, batch))
            if w > 0:
                total += float(loss) * w
                weight += w
    return total / weight if weight > 0 else math.nan


def _non_finite(bar, desc: str, value: float, epoch: int, lr: float):
    bar.close()
    raise FloatingPointError(
        f"{desc}: the training loss became non-finite ({value}) in epoch "
        f"{epoch + 1}; lower lr (now {lr:g}) or set grad_clip."
    )


@validate_params(
    _constraints(
        "loss_fn",
        "lr",
        "max_epochs",
        "patience",
        "min_delta",
        "grad_clip",
        "optimizer",
        "weight_decay",
        "lr_schedule",
        "min_lr_ratio",
        "progress",
        "desc",
        "post_epoch",
        "callback",
        "max_time",
    )
)
def fit_module(
    module: nn.Module,
    loss_fn: Callable[[nn.Module, Any], Tensor | tuple[Tensor, float]],
    train_batches: Iterable,
    *,
    lr: float,
    max_epochs: int,
    val_batches: Iterable | None = None,
    patience: int | None = None,
    min_delta: float = 0.0,
    grad_clip: float | None = None,
    optimizer: str = "adam",
    weight_decay: float = 0.0,
    lr_schedule: str | None = None,
    min_lr_ratio: float = 0.01,
    progress: bool = False,
    desc: str = "training",
    post_epoch: Callable[[nn.Module], None] | None = None,
    callback: Callable[[int, nn.Module, dict], bool | None] | None = None,
    max_time: float | None = None,
) -> dict:
    """Train ``module`` in place by minibatch gradient descent on ``loss_fn``.

    Every epoch makes one pass over ``train_batches`` (one optimiser step per batch)
    and then, if given, evaluates the mean loss over ``val_batches`` without
    gradients. With validation data the parameters of the epoch with the lowest
    validation loss are restored at the end, and training stops early once the
    validation loss has not improved by more than ``min_delta`` for ``patience``
    epochs. The module is left in ``eval`` mode.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place; all parameters with ``requires_grad`` are optimised. Its
        device and dtype are the caller's business.
    loss_fn : callable
        ``loss_fn(module, batch)`` returns a scalar loss tensor, or a pair
        ``(loss, weight)`` where ``weight`` is the number of terms the loss averages
        over; epoch losses are then weighted means over batches (otherwise plain
        means). Batches of weight 0 are skipped.
    train_batches : re-iterable
        Yields training batches; iterated once per epoch (e.g.
        :class:`TensorBatches`, which reshuffles on every pass).
    lr : float
        Learning rate.
    max_epochs : int
        Maximum number of passes over ``train_batches``.
    val_batches : re-iterable, optional
        Validation batches for early stopping and best-state restoration.
    patience : int, optional
        Epochs without improvement before stopping; ``None`` never stops early (the
        best state is still restored when ``val_batches`` is given).
    min_delta : float, default=0.0
        Minimum decrease of the validation loss that counts as an improvement.
    grad_clip : float, optional
        Clip the global gradient norm to this value before each step.
    optimizer : {"adam", "adamw", "sgd"}, default="adam"
    weight_decay : float, default=0.0
        Passed to the optimiser.
    lr_schedule : {None, "cosine"}, default=None
        None keeps ``lr`` constant; "cosine" anneals it after every optimiser step
        along a half cosine from ``lr`` at the first step to ``min_lr_ratio * lr``
        at the last step of epoch ``max_epochs`` (Loshchilov & Hutter, 2017), which
        damps the late-training noise of constant-step Adam. The schedule is set by
        ``max_epochs``, so early stopping may end training before it bottoms out.
    min_lr_ratio : float, default=0.01
        Final learning rate of the cosine schedule, relative to ``lr``.
    progress : bool, default=False
        Show the epochs on stderr (:class:`~identrep.training.progress.Progress`:
        a tqdm bar on a terminal, a plain line every 15 s elsewhere).
    desc : str, default="training"
        Label of the status line.
    post_epoch : callable, optional
        ``post_epoch(module)`` after every training pass and before validation, in
        eval mode and under ``torch.no_grad()``: a closed-form update of a block of
        parameters given the others (e.g. exact task heads given the features, a
        block-coordinate step). The optimiser's running moments for that block
        are left as they are.
    callback : callable, optional
        ``callback(epoch, module, history)`` after every epoch (0-based epoch, the
        history so far); returning True stops training. For monitoring, e.g.
        scoring the representation against ground truth; it must not change the
        module's parameters.
    max_time : float, optional
        Wall-clock budget in seconds: training stops after the first epoch that
        ends past it (``stopped_on_time`` in the history); a cosine schedule then
        follows the larger of the step and time fractions, so it ends within the
        budget. The result then depends on the machine's speed, not only the seed.

    Returns
    -------
    history : dict
        ``train_loss`` (list of float, one per epoch), ``val_loss`` (list of float,
        empty without validation), ``best_epoch`` (int, 0-based; the last epoch
        without validation), ``best_loss`` (float), ``n_epochs`` (int),
        ``stopped_early`` (bool), ``budget_exhausted_while_improving`` (bool: the
        last epoch was the best; a :class:`~identrep.exceptions.ConvergenceWarning`
        says so), ``stopped_on_time`` (bool: ``max_time`` ended training),
        ``seconds`` (float, wall time).

    Raises
    ------
    InvalidParameterError
        For an argument outside :data:`TRAINING_CONSTRAINTS` (a ``ValueError``
        and a ``TypeError``), worded as every estimator's hyperparameter errors.
    TypeError
        If a batch source is a one-shot iterator.
    FloatingPointError
        If the training loss becomes non-finite (lower ``lr`` or set ``grad_clip``).
    """
    _check_reiterable(train_batches, "train_batches")
    if val_batches is not None:
        _check_reiterable(val_batches, "val_batches")

    params = [p for p in module.parameters() if p.requires_grad]
    opt = _make_optimizer(optimizer, params, lr, weight_decay)
    n_steps = None
    if lr_schedule == "cosine":
        n_per_epoch = len(train_batches) if hasattr(train_batches, "__len__") else None
        if n_per_epoch is None:
            raise TypeError(
                "lr_schedule='cosine' needs train_batches with a len() (the number of "
                "batches per epoch) to plan the schedule."
            )
        n_steps = max(int(max_epochs) * int(n_per_epoch) - 1, 1)
    step = 0
    history: dict = {"train_loss": [], "val_loss": []}
    best_epoch, best_loss, best_state = -1, math.inf, None
    bar = Progress(int(max_epochs), desc, enabled=progress, unit="epoch")
    stopped_early = False
    t0 = time.perf_counter()
    epoch, stopped_on_time = -1, False
    for epoch in range(int(max_epochs)):
        module.train()
        total, weight = 0.0, 0.0
        for batch in train_batches:
            loss, w = _unpack(loss_fn(module, batch))
            if w <= 0:
                continue
            if loss.device.type == "cpu" and not torch.isfinite(loss):
                _non_finite(bar, desc, float(loss), epoch, lr)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                nn.utils.clip_grad_norm_(params, grad_clip)
            opt.step()
            step += 1
            if n_steps is not None:  # with max_time: also along the time budget
                frac = min(step / n_steps, 1.0)
                if max_time is not None:
                    frac = max(frac, min((time.perf_counter() - t0) / max_time, 1.0))
                scale = min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (
                    1 + math.cos(math.pi * frac)
                )
                for group in opt.param_groups:
                    group["lr"] = lr * scale
            lv = loss.detach()  # on an accelerator: summed there, no sync per step
            total = total + (float(lv) if lv.device.type == "cpu" else lv) * w
            weight += w
        train_loss = float(total) / weight if weight > 0 else math.nan
        if not math.isfinite(train_loss) and weight > 0:  # accelerator: seen here
            _non_finite(bar, desc, train_loss, epoch, lr)
        history["train_loss"].append(train_loss)
        if post_epoch is not None:
            module.eval()
            with torch.no_grad():
                post_epoch(module)

        val_loss = None
        if val_batches is not None:
            module.eval()
            val_loss = _mean_loss(module, loss_fn, val_batches)
            history["val_loss"].append(val_loss)
            if val_loss < best_loss - min_delta or best_state is None:
                best_epoch, best_loss = epoch, val_loss
                best_state = {
                    k: v.detach().clone() for k, v in module.state_dict().items()
                }
        shown = {"train": f"{train_loss:.5g}"}
        if val_loss is not None:
            shown["val"] = f"{val_loss:.5g} (best {best_loss:.5g} @ {best_epoch + 1})"
        bar.update(**shown)
        if callback is not None and callback(epoch, module.eval(), history):
            stopped_early = epoch + 1 < max_epochs
            break
        if (
            val_batches is not None
            and patience is not None
            and epoch - best_epoch >= patience
        ):
            stopped_early = epoch + 1 < max_epochs
            break
        if max_time is not None and time.perf_counter() - t0 >= max_time:
            stopped_on_time = epoch + 1 < max_epochs
            break

    if best_state is not None:
        module.load_state_dict(best_state)
    else:
        best_epoch = epoch
        best_loss = history["train_loss"][-1]
    module.eval()
    bar.close(f"best epoch {best_epoch + 1}" if val_batches is not None else "")
    # the budget ran out while the validation loss was still falling: say so
    still_improving = (
        val_batches is not None and not stopped_early and best_epoch == epoch > 0
    )
    if still_improving:
        warnings.warn(
            f"{desc}: the budget (max_epochs={max_epochs}"
            f"{'' if max_time is None else f', max_time={max_time:g} s'}) ended "
            "while the validation loss was still improving (best at the last "
            "epoch); the model is probably under-fitted. Raise max_epochs (identrep "
            "fit: --max-epochs); early stopping (patience) ends training once it stops "
            "improving.",
            ConvergenceWarning,
            stacklevel=3,
        )
    history.update(
        best_epoch=int(best_epoch),
        best_loss=float(best_loss),
        n_epochs=epoch + 1,
        stopped_early=bool(stopped_early),
        stopped_on_time=bool(stopped_on_time),
        budget_exhausted_while_improving=bool(still_improving),
        seconds=time.perf_counter() - t0,
    )
    return history
