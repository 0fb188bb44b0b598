"""The one training loop every torch model in identrep uses.

:func:`fit_module` runs minibatch gradient descent on ``loss_fn(module, batch)``
with optional early stopping on a validation loss, gradient clipping, a progress
display (:mod:`identrep.training.progress`) and checkpoints that let a stopped run
continue to the same bits (:mod:`identrep.training.checkpoint`). It never picks a
device and owns no data: the caller builds the module on its device and hands over
re-iterable batch sources (:mod:`identrep.training.batches`, re-exported here with
:data:`TRAINING_CONSTRAINTS`).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from identrep.exceptions import ConvergenceWarning
from identrep.training._constraints import TRAINING_CONSTRAINTS, _constraints
from identrep.training._graphs import GraphedStep, graph_mode
from identrep.training._optim import make_optimizer as _make_optimizer
from identrep.training.batches import (
    IndexBatches,
    StepBatches,
    TensorBatches,
    split_within_tasks,
)
from identrep.training.checkpoint import Checkpointer, finished, settings_of
from identrep.training.progress import Progress
from identrep.utils._param_validation import validate_params

__all__ = [
    "TRAINING_CONSTRAINTS",
    "IndexBatches",
    "StepBatches",
    "TensorBatches",
    "fit_module",
    "split_within_tasks",
]


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


def _unpack_tensors(out: Tensor | Sequence) -> tuple[Tensor, Tensor]:
    """``loss`` or ``(loss, weight)`` -> (loss, weight) as device tensors, without
    a host synchronisation (what a recorded CUDA graph may contain)."""
    loss, weight = (out, 1.0) if isinstance(out, Tensor) else out
    if isinstance(weight, Tensor) and weight.device == loss.device:
        return loss, weight.to(loss.dtype)
    return loss, loss.new_full((), float(weight))  # a fill, no copy from the host


def _set_lr(group: dict, value: float) -> None:
    if isinstance(group["lr"], Tensor):  # capturable: replayed steps read it
        group["lr"].fill_(value)
    else:
        group["lr"] = value


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
        "steps_per_epoch",
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
        "checkpoint",
        "checkpoint_every",
        "checkpoint_seconds",
    )
)
def fit_module(
    module: nn.Module,
    loss_fn: Callable[[nn.Module, Any], Tensor | tuple[Tensor, float]],
    train_batches: Iterable,
    *,
    lr: float,
    max_epochs: int,
    steps_per_epoch: int | None = None,
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
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = 1,
    checkpoint_seconds: float | None = None,
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
    steps_per_epoch : int, optional
        Make every epoch exactly this many optimiser steps instead of one pass:
        the batches of ``train_batches`` are dealt out in epochs of this length
        (:class:`StepBatches`, a new pass whenever one ends), each followed by
        validation as after a pass, so training takes ``max_epochs *
        steps_per_epoch`` steps (fewer with early stopping) whatever the data
        size. None (default): one pass an epoch. Not with ``checkpoint``.
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
        With ``checkpoint`` it only ends this call (written, to be resumed) and
        the schedule follows the steps alone, so the run does not depend on it.
    checkpoint : str or path-like, optional
        File that saves the run (:mod:`identrep.training.checkpoint`) after every
        ``checkpoint_every``-th epoch, after ``checkpoint_seconds``, and at the
        epoch that ends it. When the file exists the run resumes from it instead
        of starting over (a finished run returns at once): the same parameters,
        history and best epoch, to the bit, as a run never interrupted. The
        module must be initialised as it was (same seed), the settings equal.
    checkpoint_every : int or None, default=1
        Epochs between checkpoints (None: by ``checkpoint_seconds`` only).
    checkpoint_seconds : float, optional
        Also write when this many seconds passed since the last checkpoint.

    Returns
    -------
    history : dict
        ``train_loss`` (list of float, one per epoch), ``val_loss`` (list of float,
        empty without validation), ``best_epoch`` (int, 0-based; the last epoch
        without validation), ``best_loss`` (float), ``n_epochs`` (int),
        ``stopped_early`` (bool), ``budget_exhausted_while_improving`` (bool: the
        last epoch was the best; a :class:`~identrep.exceptions.ConvergenceWarning`
        says so), ``stopped_on_time`` (bool: ``max_time`` ended training),
        ``seconds`` (float, wall time, over every call of a resumed run).

    Raises
    ------
    InvalidParameterError
        For an argument outside :data:`TRAINING_CONSTRAINTS` (a ``ValueError``
        and a ``TypeError``), worded as every estimator's hyperparameter errors.
    TypeError
        If a batch source is a one-shot iterator.
    FloatingPointError
        If the training loss becomes non-finite (lower ``lr`` or set ``grad_clip``).
    CheckpointError
        If ``checkpoint`` is unreadable or was written by a different run.
    ValueError
        Inside :func:`~identrep.training.cuda_graphs` on CUDA: for an optimiser
        other than Adam/AdamW, or a training batch of zero weight (every batch is
        stepped there).

    Notes
    -----
    Inside :func:`~identrep.training.cuda_graphs`, a fit on CUDA replays each
    full-size batch's step (loss, backward, clipping, optimiser step) from one
    recorded CUDA graph, with the capturable optimiser; other batch shapes step
    eagerly. Its result equals that optimiser stepping eagerly, to the bit, not the
    default optimiser (the last bits differ).
    """
    _check_reiterable(train_batches, "train_batches")
    if val_batches is not None:
        _check_reiterable(val_batches, "val_batches")

    if steps_per_epoch is not None:
        if checkpoint is not None:
            raise ValueError(
                "steps_per_epoch cannot be combined with checkpoint (an epoch may "
                "end inside a pass, which a checkpoint cannot continue); got "
                f"steps_per_epoch={steps_per_epoch} and checkpoint={checkpoint!r}."
            )
        train_batches = StepBatches(train_batches, steps_per_epoch)
    params = [p for p in module.parameters() if p.requires_grad]
    mode = graph_mode(params, optimizer)  # inside training.cuda_graphs only
    graph_kw = {} if mode is None else {"capturable": True}  # the ordinary call
    opt = _make_optimizer(optimizer, params, lr, weight_decay, **graph_kw)
    n_per_epoch = len(train_batches) if hasattr(train_batches, "__len__") else None
    n_steps = None
    if lr_schedule == "cosine":
        if n_per_epoch is None:
            raise TypeError(
                "lr_schedule='cosine' needs train_batches with a len() (the number of "
                "batches per epoch) to plan the schedule."
            )
        n_steps = max(int(max_epochs) * int(n_per_epoch) - 1, 1)
    step, first, t_before = 0, 0, 0.0
    history: dict = {"train_loss": [], "val_loss": []}
    best_epoch, best_loss, best_state = -1, math.inf, None
    epoch, stopped_on_time, stopped_early = -1, False, False
    ckpt = saved = None
    if checkpoint is not None:
        settings = settings_of(
            max_epochs,
            lr_schedule,
            n_per_epoch,
            lr=lr,
            patience=patience,
            min_delta=min_delta,
            grad_clip=grad_clip,
            optimizer=optimizer,
            weight_decay=weight_decay,
            min_lr_ratio=min_lr_ratio,
            validation=val_batches is not None,
            **({"cuda_graphs": mode} if mode is not None else {}),
        )
        ckpt = Checkpointer(
            checkpoint,
            every=checkpoint_every,
            seconds=checkpoint_seconds,
            module=module,
            optimizer=opt,
            settings=settings,
            parts=dict(
                train_batches=train_batches,
                val_batches=val_batches,
                loss_fn=loss_fn,
                post_epoch=post_epoch,
            ),
        )
        saved = ckpt.load()
        if mode is not None:  # a loaded learning rate must live on the device
            for group in opt.param_groups:
                group["lr"] = torch.tensor(float(group["lr"]), device=params[0].device)
    if saved is not None:  # continue after the saved epoch
        step, history, epoch = saved["step"], saved["history"], saved["epoch"]
        best_epoch, best_loss = saved["best_epoch"], saved["best_loss"]
        best_state, t_before, first = saved["best_state"], saved["seconds"], epoch + 1
        stopped_early = saved["stop"] in ("early_stopping", "callback") and (
            epoch + 1 < max_epochs
        )
        if finished(saved, max_epochs):
            first = int(max_epochs)  # nothing left: return the saved result
    # a resumable run must not depend on where it stops: the schedule follows steps
    t_sched = None if ckpt is not None else max_time
    bar = Progress(int(max_epochs), desc, enabled=progress, unit="epoch")
    if 0 < first < max_epochs:
        bar.update(first)

    def graph_step(batch) -> tuple[Tensor, Tensor]:
        loss, w = _unpack_tensors(loss_fn(module, batch))
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        return loss.detach(), w

    graphed = GraphedStep(graph_step, params, opt) if mode == "replay" else None
    t0 = time.perf_counter()
    for epoch in range(first, int(max_epochs)):
        module.train()
        total, weight, empty = 0.0, 0.0, None
        for batch in train_batches:
            if mode is not None:  # on the device throughout: no synchronisation
                out = None if graphed is None else graphed(batch)
                if out is None:  # not replayed (another shape, or capture=False)
                    opt.zero_grad(set_to_none=True)
                    out = graph_step(batch)
                lv, wt = out
                total, weight = total + lv * wt, weight + wt
                empty = (wt <= 0) if empty is None else empty | (wt <= 0)
            else:
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
                lv = loss.detach()  # on an accelerator: summed there, no sync per step
                total = total + (float(lv) if lv.device.type == "cpu" else lv) * w
                weight += w
            step += 1
            if n_steps is not None:  # with max_time: also along the time budget
                frac = min(step / n_steps, 1.0)
                if t_sched is not None:
                    frac = max(frac, min((time.perf_counter() - t0) / t_sched, 1.0))
                scale = min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (
                    1 + math.cos(math.pi * frac)
                )
                for group in opt.param_groups:
                    _set_lr(group, lr * scale)
        if empty is not None and bool(empty):
            bar.close()
            raise ValueError(
                f"{desc}: a training batch had no weight (nothing to score) in epoch "
                f"{epoch + 1}; cuda_graphs steps every batch, so every batch must "
                "score at least one entry. Train without cuda_graphs."
            )
        weight = float(weight)
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
        stop = None
        if callback is not None and callback(epoch, module.eval(), history):
            stop = "callback"
        elif (
            val_batches is not None
            and patience is not None
            and epoch - best_epoch >= patience
        ):
            stop = "early_stopping"
        elif max_time is not None and time.perf_counter() - t0 >= max_time:
            stop = "max_time"
        elif epoch + 1 == max_epochs:
            stop = "max_epochs"
        if ckpt is not None and (stop is not None or ckpt.due(epoch)):
            ckpt.save(
                epoch=epoch,
                step=step,
                history=history,
                best=(best_epoch, best_loss, best_state),
                seconds=t_before + time.perf_counter() - t0,
                stop=stop,
            )
        if stop in ("callback", "early_stopping"):
            stopped_early = epoch + 1 < max_epochs
        stopped_on_time = stop == "max_time" and epoch + 1 < max_epochs
        if stop is not None and stop != "max_epochs":
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
        seconds=t_before + time.perf_counter() - t0,
    )
    return history
