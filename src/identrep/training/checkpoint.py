"""Checkpoints of :func:`~identrep.training.fit_module`: stop a training run and
continue it later, in another process or on another day, to the same bits.

A checkpoint is one file (``torch.save`` of tensors, numbers and strings, read back
with ``weights_only=True``) holding everything the loop needs to go on as if it had
never stopped: the module's and the optimiser's state, the optimisation step (the
learning-rate schedule is a function of it), the state of every stateful part of
the run (the batch sources' random generators, a loss whose weights follow the
epoch, ...: anything with ``state_dict()`` / ``load_state_dict()``), torch's global
random state (dropout, reparameterisation noise), the early-stopping state (best
loss, best epoch, best parameters), the history and the elapsed time. It is written
atomically (:func:`identrep.utils.io.atomic_path`: a temporary sibling, fsynced,
then renamed), so a crash or a kill while writing leaves the previous checkpoint.

Resuming checks that the checkpoint belongs to the same run: the same training
settings, the same parameter names, shapes and dtypes, the same number of batches
per epoch, and the same initial parameters (a digest of the module's state when
``fit_module`` was entered, so a different seed, data-dependent initialisation or
architecture is caught) and the same first training and validation batches (other
data of the same shapes). A mismatch raises
:class:`~identrep.exceptions.CheckpointError` naming every difference; so does a
file that is not a readable checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from identrep.exceptions import CheckpointError
from identrep.utils.io import atomic_path

__all__ = ["FORMAT", "Checkpointer", "finished", "module_digest", "settings_of"]

#: The format tag of a checkpoint file (and its version below).
FORMAT = "identrep-fit-checkpoint"
VERSION = 1

#: Why a run ended; a checkpoint of a run that ended for one of these is finished.
FINISHED = ("early_stopping", "callback", "max_epochs")


def module_digest(module: nn.Module) -> str:
    """SHA-256 of the module's state (names, dtypes, shapes and bytes, in order)."""
    h = hashlib.sha256()
    for name, value in module.state_dict().items():
        t = value.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _hash_into(h, obj: Any) -> None:
    """Feed the tensors (and numbers) of a batch, however nested, into ``h``."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            h.update(str(k).encode())
            _hash_into(h, obj[k])
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            _hash_into(h, item)
    else:
        h.update(repr(obj).encode())


def batch_digest(source: Any) -> str | None:
    """SHA-256 of the first batch of a batch source, without moving it on.

    A source with ``state_dict`` has its state put back after the batch is drawn;
    a sequence is indexed. None for an empty or absent source.
    """
    if source is None:
        return None
    if isinstance(source, Sequence):
        first = source[0] if len(source) else None
    else:
        state = source.state_dict()
        try:
            first = next(iter(source), None)
        finally:
            source.load_state_dict(state)
    if first is None:
        return None
    h = hashlib.sha256()
    _hash_into(h, first)
    return h.hexdigest()


def _shapes(module: nn.Module) -> dict[str, str]:
    return {
        k: f"{tuple(v.shape)} {v.dtype}".replace("torch.", "")
        for k, v in module.state_dict().items()
    }


def _stateful(parts: dict[str, Any]) -> dict[str, Any]:
    """The parts whose state a checkpoint must hold, by name.

    A part with ``state_dict`` / ``load_state_dict`` is stateful; so is the object
    of a bound method that has them (``post_epoch=objective.step``). A list or a
    tuple of batches, a function or a ``functools.partial`` is taken as stateless.
    A batch source (the parts named ``*_batches``) that is neither raises: its
    order might be random, and a checkpoint could not restore it.
    """
    out: dict[str, Any] = {}
    for name, part in parts.items():
        if part is None:
            continue
        owner = getattr(part, "__self__", None)
        for obj in (part, owner):
            if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
                out[name] = obj
                break
        else:
            if name.endswith("_batches") and not isinstance(part, Sequence):
                raise TypeError(
                    f"fit_module(checkpoint=...): {name} ({type(part).__name__}) has "
                    "no state_dict() / load_state_dict(), so a checkpoint could not "
                    "restore its batch order; use IndexBatches/TensorBatches, a list "
                    "of batches, or give the source those two methods."
                )
    return out


def _rng_state(device: torch.device | None) -> dict[str, Any]:
    state = {"cpu": torch.get_rng_state(), "cuda": None}
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device | None) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if state.get("cuda") is not None and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


class Checkpointer:
    """Saves and restores one :func:`~identrep.training.fit_module` run.

    Parameters
    ----------
    path : str or path-like
        The checkpoint file (its folder is created when first written).
    every : int or None
        Write after every ``every``-th epoch (None: only by ``seconds``).
    seconds : float or None
        Also write after an epoch when this many seconds passed since the last
        write. Whatever the intervals, the epoch that ends a run (early stopping,
        the callback, ``max_epochs`` or ``max_time``) is always written.
    module, optimizer
        The run's module (as it enters ``fit_module``) and optimiser.
    settings : dict
        The training settings a resumed run must share (lr, schedule, ...).
    parts : dict
        ``{"train_batches": ..., "val_batches": ..., "loss_fn": ...,
        "post_epoch": ...}``; their state is saved where they have one.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        every: int | None,
        seconds: float | None,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        settings: dict[str, Any],
        parts: dict[str, Any],
    ):
        self.path = Path(path)
        self.every, self.seconds = every, seconds
        self.module, self.optimizer = module, optimizer
        self.parts = _stateful(parts)
        # the module's device: whether the global CUDA generator is part of the run
        self.device = next((p.device for p in module.parameters()), None)
        self.fingerprint = {
            **settings,
            "parts": sorted(self.parts),
            "parameters": _shapes(module),
            "initial_state": module_digest(module),
            "first_train_batch": batch_digest(parts.get("train_batches")),
            "first_val_batch": batch_digest(parts.get("val_batches")),
        }
        self._last_epoch, self._last_time = -1, time.perf_counter()

    # ------------------------------------------------------------------ write
    def due(self, epoch: int) -> bool:
        """Whether the epoch just ended (0-based) should be written."""
        if self.every is not None and epoch - self._last_epoch >= self.every:
            return True
        return (
            self.seconds is not None
            and time.perf_counter() - self._last_time >= self.seconds
        )

    def save(
        self,
        *,
        epoch: int,
        step: int,
        history: dict,
        best: tuple,
        seconds: float,
        stop: str | None,
    ) -> None:
        """Write the state after ``epoch`` atomically; ``best`` is (epoch, loss,
        state dict or None); ``stop`` is why the run ended there (None: it goes
        on, or ``"max_time"``: it continues when resumed)."""
        best_epoch, best_loss, best_state = best
        payload = {
            "format": FORMAT,
            "version": VERSION,
            "fingerprint": self.fingerprint,
            "epoch": int(epoch),
            "step": int(step),
            "history": {k: list(v) for k, v in history.items()},
            "best_epoch": int(best_epoch),
            "best_loss": float(best_loss),
            "best_state": best_state,
            "module": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "parts": {k: p.state_dict() for k, p in self.parts.items()},
            "rng": _rng_state(self.device),
            "seconds": float(seconds),
            "stop": stop,
        }
        with atomic_path(self.path) as tmp:
            torch.save(payload, tmp)
        self._last_epoch, self._last_time = epoch, time.perf_counter()

    # ------------------------------------------------------------------- read
    def _read(self) -> dict:
        try:
            payload = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as exc:  # zip, pickle and EOF errors alike
            raise CheckpointError(
                f"Cannot read the training checkpoint {self.path}: "
                f"{type(exc).__name__}: {exc}. It is damaged or not a checkpoint; "
                "delete it (or pass another path) to train from the start."
            ) from exc
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise CheckpointError(
                f"{self.path} is not an identrep training checkpoint (no "
                f"format {FORMAT!r}); delete it or pass another checkpoint path."
            )
        if payload.get("version") != VERSION:
            raise CheckpointError(
                f"{self.path} is a version {payload.get('version')} checkpoint; this "
                f"identrep reads version {VERSION}. Finish the run with the identrep "
                "that wrote it, or delete it to train from the start."
            )
        return payload

    def _check(self, saved: dict) -> None:
        diffs = []
        for key in sorted(set(saved) | set(self.fingerprint)):
            there, here = saved.get(key), self.fingerprint.get(key)
            if there == here:
                continue
            if key == "parameters":
                names = sorted(set(there or {}) ^ set(here or {}))
                names += [k for k in here if k in there and there[k] != here[k]]
                shown = ", ".join(
                    f"{k} {(there or {}).get(k, 'absent')} there, "
                    f"{(here or {}).get(k, 'absent')} here"
                    for k in names[:5]
                )
                diffs.append(f"module parameters differ ({shown})")
            elif key == "initial_state":
                diffs.append(
                    "the module's initial parameters differ (another random_state, "
                    "other data for a data-dependent initialisation, or another "
                    "architecture)"
                )
            elif key.startswith("first_"):
                which = "training" if key == "first_train_batch" else "validation"
                diffs.append(
                    f"the first {which} batch differs (other data, another split "
                    "or another batch order)"
                )
            else:
                diffs.append(f"{key} {_show(there)} there, {_show(here)} here")
        if diffs:
            raise CheckpointError(
                f"The training checkpoint {self.path} was written by a different "
                f"run: {'; '.join(diffs)}. Resume with the settings it was "
                "written with, or delete it to train from the start."
            )

    def load(self) -> dict | None:
        """Restore the run from the checkpoint file, or None when there is none.

        Loads the module, optimiser, parts and global random state in place and
        returns the loop's state: ``epoch`` (the last one done, 0-based), ``step``,
        ``history``, ``best_epoch``, ``best_loss``, ``best_state``, ``seconds``
        and ``stop``.

        Raises
        ------
        CheckpointError
            If the file is unreadable, not a checkpoint, or of another run.
        """
        if not self.path.exists():
            return None
        saved = self._read()
        self._check(saved["fingerprint"])
        self.module.load_state_dict(saved["module"])
        self.optimizer.load_state_dict(saved["optimizer"])
        for name, part in self.parts.items():
            part.load_state_dict(saved["parts"][name])
        _set_rng_state(saved["rng"], self.device)
        best = saved["best_state"]
        if best is not None and self.device is not None:
            best = {k: v.to(self.device) for k, v in best.items()}
        self._last_epoch = saved["epoch"]
        return {
            "epoch": int(saved["epoch"]),
            "step": int(saved["step"]),
            "history": saved["history"],
            "best_epoch": int(saved["best_epoch"]),
            "best_loss": float(saved["best_loss"]),
            "best_state": best,
            "seconds": float(saved["seconds"]),
            "stop": saved["stop"],
        }


def finished(state: dict, max_epochs: int) -> bool:
    """Whether a restored run had already ended (nothing is left to train)."""
    if state["stop"] in ("early_stopping", "callback"):
        return True
    return state["epoch"] + 1 >= int(max_epochs)


def settings_of(max_epochs: int, lr_schedule, n_per_epoch, **settings) -> dict:
    """The fingerprint settings: ``max_epochs`` only where it plans the schedule
    (a constant-rate run may be continued with a larger budget)."""
    out = {k: (float(v) if isinstance(v, float) else v) for k, v in settings.items()}
    out["lr_schedule"] = lr_schedule
    out["batches_per_epoch"] = n_per_epoch
    if lr_schedule is not None:
        out["max_epochs"] = int(max_epochs)
    return out
