"""Infeasible requests are refused before any work, and budgets run to early stopping.

``n_latents`` is checked against the input features, the tasks and the rank stage
2 can see (:func:`identrep.utils.validation.check_n_latents`) at the start of
``fit``; the two-stage pipeline refuses a one-sample or constant task before its
stage 1 trains. MTRN's default budget (a cap of 1000 epochs) ends by early
stopping, not at a silent cap of 200.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import identrep as ir
from identrep.exceptions import ConvergenceWarning, DataError
from identrep.models.multitask import mtrn as mtrn_module


@pytest.fixture(scope="module")
def small():
    return ir.datasets.make_nonlinear_tasks(
        n_tasks=8, n_samples=20, n_latents=2, n_causal=1, n_observed=5, random_state=0
    )


def _no_training(*args, **kwargs):
    raise AssertionError("training started before the data were checked")


def test_mtrn_refuses_more_latents_than_input_features(small, monkeypatch):
    monkeypatch.setattr(mtrn_module.MTRN, "_fit_module", _no_training)
    with pytest.raises(DataError, match=r"MTRN: n_latents=10 exceeds the number of "
                       r"input features \(n_features=5\).*at most 5"):  # fmt: skip
        ir.MTRN().fit(small.X, small.y, task_ids=small.task_ids)


def test_more_latents_than_tasks_is_a_warning(small):
    from identrep.utils.validation import check_n_latents

    with pytest.warns(UserWarning, match="n_latents=4 exceeds the number of tasks"):
        check_n_latents(4, n_features=5, n_tasks=3)


@pytest.mark.parametrize("case", ["one sample", "constant"])
def test_pipeline_rejects_a_degenerate_task_before_stage_1(small, case, monkeypatch):
    monkeypatch.setattr(mtrn_module.MTRN, "fit", _no_training)
    y, t = small.y.copy(), small.task_ids.copy()
    if case == "one sample":
        keep = np.ones(len(y), dtype=bool)
        keep[np.flatnonzero(t == 3)[1:]] = False
        X, y, t = small.X[keep], y[keep], t[keep]
        match = "at least 2"
    else:
        y[t == 3] = 1.5
        X, match = small.X, "constant"
    with pytest.raises(DataError, match=match):
        ir.TaskIdentifiable(n_latents=2).fit(X, y, task_ids=t)


def test_the_pipeline_refuses_more_latents_than_stage_2_can_see(monkeypatch):
    monkeypatch.setattr(mtrn_module.MTRN, "fit", _no_training)
    rng = np.random.default_rng(0)
    X, t = rng.normal(size=(12, 10)), np.repeat(np.arange(4), 3)
    with pytest.raises(DataError, match=r"n_latents=9 exceeds the observations "
                       r"minus the tasks \(12 - 4\)"):  # fmt: skip
        ir.TaskIdentifiable(n_latents=9).fit(X, rng.normal(size=12), task_ids=t)


def test_within_task_rank_ignores_task_means_and_units():
    from identrep.utils.validation import within_task_rank

    rng = np.random.default_rng(0)
    t = np.repeat(np.arange(5), 20)
    Z = rng.normal(size=(100, 2))
    X = Z @ rng.normal(size=(2, 4)) + rng.normal(size=(5, 4))[t] * 100
    assert within_task_rank(X, t) == 2
    assert within_task_rank(X * 1e-200, t) == 2


def test_mtrn_trains_past_200_epochs_until_early_stopping():
    # on this data (seed 1) validation improves until epoch 335 and stops at 355
    d = ir.datasets.make_nonlinear_tasks(
        n_tasks=20, n_samples=40, n_latents=2, n_causal=1, n_observed=4, random_state=1
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = ir.MTRN(n_latents=2, random_state=1).fit(d.X, d.y, task_ids=d.task_ids)
    h = m.history_
    assert h["stopped_early"] and h["best_epoch"] + 1 > 200  # before: cut at 200
