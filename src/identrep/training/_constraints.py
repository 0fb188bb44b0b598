"""The declared constraints of the training settings (one rule everywhere)."""

from __future__ import annotations

import os
from numbers import Integral, Real

from identrep.training._optim import OPTIMIZERS as _OPTIMIZERS
from identrep.utils._param_validation import Interval, StrOptions

__all__ = ["STEP_BUDGET_CONSTRAINTS", "TRAINING_CONSTRAINTS"]

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
    "checkpoint": [str, os.PathLike, None],
    "checkpoint_every": [Interval(Integral, 1, None, closed="left"), None],
    "checkpoint_seconds": [Interval(Real, 0, None, closed="neither"), None],
    "loss_fn": ["callable"],
    "seed": [Interval(Integral, None, None, closed="neither")],
    "shuffle": ["boolean"],
    "drop_last": ["boolean"],
    "n_items": [Interval(Integral, 1, None, closed="left")],
    "rng": ["random_state"],
}


#: The optional step budget of :func:`fit_module` (epochs of a fixed number of
#: optimiser steps), declared by the estimators that offer it (not every one
#: that trains with :data:`TRAINING_CONSTRAINTS`).
STEP_BUDGET_CONSTRAINTS: dict[str, list] = {
    "steps_per_epoch": [Interval(Integral, 1, None, closed="left"), None],
}


def _constraints(*names: str) -> dict[str, list]:
    known = {**TRAINING_CONSTRAINTS, **STEP_BUDGET_CONSTRAINTS}
    return {n: known[n] for n in names}
