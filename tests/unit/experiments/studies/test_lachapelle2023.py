"""Lachapelle et al. (2023): the identifiability study's grid, data, learners and
report plumbing (with stub fits: the bilevel learners live in another branch),
and the frozen-representation study end to end."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import identrep.datasets
from identrep.experiments import get_study, run_sweep, write_report
from identrep.experiments.studies import lachapelle2023 as lach
from identrep.experiments.studies.lachapelle2023 import (
    LACHAPELLE_MODELS,
    SparseMTLConfig,
    linear_r,
)
from identrep.experiments.studies.lachapelle2023_frozen import FrozenConfig

TINY = dict(n_tasks=3, n_samples=6, max_epochs=1)


def test_grid_is_three_one_factor_sweeps_around_a_base_point():
    study = get_study("lachapelle2023")
    assert study.models == LACHAPELLE_MODELS
    grid = study.grid(seeds=2)
    assert len(grid) == 5 * (6 + 5 + 6) * 2
    for c in grid:
        assert c.data == "synthetic" and (c.n_tasks, c.n_samples) == (500, 50)
        field, values = lach.SWEEPS[c.sweep]
        assert getattr(c, field) in values
        others = {k: v for k, v in lach.BASE.items() if k != field}
        assert all(getattr(c, k) == v for k, v in others.items())
    rhos = sorted({c.rho_pct for c in grid if c.sweep == "correlation"})
    assert rhos == [0, 25, 50, 75, 90, 99]
    assert {c.support_pct for c in grid if c.sweep == "support"} >= {100}
    # the base point is the same data set (and model seed) in every sweep
    base = [c for c in grid if c.model == "MTRN" and c.seed == 0]
    base = [c for c in base if all(getattr(c, k) == v for k, v in lach.BASE.items())]
    assert {c.sweep for c in base} == set(lach.SWEEPS)
    assert len({c.data_key() for c in base}) == 1
    assert len({c.model_seed() for c in base}) == 1

    quick = study.grid(quick=True, models=["group-lasso"], data="both")
    assert {c.data for c in quick} == {"synthetic", "shapes"}
    assert {c.seed for c in quick} == {0} and {c.max_epochs for c in quick} == {20}
    assert {(c.data, c.n_tasks) for c in quick} == {("synthetic", 100), ("shapes", 20)}
    only = study.grid(seeds=1, sweeps="support", models=["MTLCM"], max_epochs=7)
    assert {c.sweep for c in only} == {"support"} and {c.max_epochs for c in only} == {
        7
    }


def test_grid_and_config_errors():
    study = get_study("lachapelle2023")
    with pytest.raises(ValueError, match="sweeps must be a comma-separated subset"):
        study.grid(sweeps="correlation,size")
    with pytest.raises(ValueError, match="data must be a comma-separated subset"):
        study.grid(data="mnist")
    with pytest.raises(ValueError, match="seeds must be"):
        study.grid(seeds=0)
    with pytest.raises(ValueError, match="model must be one of"):
        SparseMTLConfig(model="PCA")
    with pytest.raises(ValueError, match=r"rho_pct must lie in \[0, 99\]"):
        SparseMTLConfig(rho_pct=100)
    with pytest.raises(ValueError, match="shapes data have 6 factors"):
        SparseMTLConfig(data="shapes", n_latents=5)
    with pytest.raises(ValueError, match="sweep must be one of"):
        SparseMTLConfig(sweep="size")
    with pytest.raises(ValueError, match="support_pct must be an integer percentage"):
        SparseMTLConfig(support_pct=0.5)
    flags = [o.flag for o in study.options]
    assert flags == ["--sparse-data", "--sweeps", "--learner-epochs"]


def test_synthetic_data_calls_make_sparse_tasks_with_the_configuration(monkeypatch):
    calls = []

    def fake(n_tasks, n_samples, n_latents, **kw):
        calls.append((n_tasks, n_samples, n_latents, kw))
        return "tasks"

    monkeypatch.setattr(identrep.datasets, "make_sparse_tasks", fake, raising=False)
    config = SparseMTLConfig(rho_pct=75, noise_pct=50, support_pct=90, **TINY)
    data, seed = lach.make_data(config)
    assert data.train == "tasks" and data.X_eval is None
    ((n_tasks, n_samples, d, kw),) = calls
    assert (n_tasks, n_samples, d) == (3, 6, 6)
    assert kw == dict(
        correlation=0.75, support_prob=0.9, noise_ratio=0.5, random_state=seed
    )
    lach.make_data(dataclasses.replace(config, mixing="linear"))
    assert calls[-1][3]["mixing"] == "linear"
    # the data seed depends on the data fields only
    assert lach.make_data(dataclasses.replace(config, model="MTRN"))[1] == seed


def test_shapes_data_and_a_real_mtrn_fit(monkeypatch):
    """The shapes path end to end with a learner that exists here (MTRN with
    the conv encoder, one epoch): images, independent-factor evaluation set,
    metrics."""
    monkeypatch.setattr(lach, "N_EVAL_SHAPES", 20)
    config = SparseMTLConfig(model="MTRN", data="shapes", **TINY)
    data, _ = lach.make_data(config)
    size = lach.SHAPES_IMAGE_SIZE
    assert data.train.X.shape == (18, size * size * 3) and data.X_eval.shape[0] == 20
    assert abs(np.corrcoef(data.Z_eval.T)[0, 1]) < 0.6  # independent factors
    est = lach._estimator(config, 0)
    assert est.extractor is lach._conv_extractor and est.max_epochs == 1
    metrics = lach.fit_learner(config, data, 0)
    for key in ("mcc", "mcc_spearman", "r_linear", "uniform_mcc", "fit_seconds"):
        assert np.isfinite(metrics[key]), key
    assert 0 <= metrics["uniform_mcc"] <= 1


def test_learners_get_only_the_settings_they_declare():
    class NoExtractor:
        def __init__(self, n_latents, *, random_state=None):
            pass

    assert lach._kwargs_for(NoExtractor, max_epochs=5, extractor=None) == {}
    with pytest.raises(TypeError, match="takes no 'extractor'"):
        lach._kwargs_for(NoExtractor, extractor=lach._conv_extractor)
    mtlcm = lach._estimator(SparseMTLConfig(model="MTLCM", max_epochs=3), 1)
    assert mtlcm.mtrn_params == {"max_epochs": 3}


def test_linear_r_is_one_for_a_linear_map_and_small_for_noise(rng):
    Z = rng.standard_normal((500, 4))
    assert linear_r(Z, Z @ rng.standard_normal((4, 4)) + 3.0) == pytest.approx(1.0)
    assert linear_r(Z, rng.standard_normal((500, 4))) < 0.15


def _stub_fit(config, data, model_seed, artifacts=None):
    """Deterministic fake learner: MCC falls with the correlation for ICA only."""
    penalty = config.rho_pct / 200 if config.model == "inner-ridge+ICA" else 0.0
    return {
        "mcc": 0.95 - penalty,
        "mcc_spearman": 0.9,
        "r_linear": 0.97,
        "fit_seconds": 0.0,
    }


def test_report_plumbing_with_stub_learners(tmp_path, monkeypatch):
    study = get_study("lachapelle2023")
    for m in study.models:
        monkeypatch.setitem(study.fits, m, _stub_fit)
    # the data are not used by the stubs; make_sparse_tasks comes with the learners
    monkeypatch.setattr(
        identrep.datasets, "make_sparse_tasks", lambda *a, **k: None, raising=False
    )
    configs = study.grid(seeds=2, sweeps="correlation,support")
    configs = [dataclasses.replace(c, **TINY) for c in configs]
    recs = run_sweep(configs, tmp_path, progress=False)
    df, text = write_report(tmp_path)
    assert len(recs) == len(configs) == 5 * (6 + 6) * 2
    res = pd.read_csv(tmp_path / "results.csv")
    assert {"rho_pct", "noise_pct", "support_pct", "sweep", "mcc"} <= set(res.columns)
    assert "correlation sweep" in text and "support sweep" in text
    assert "MCC of 0.96" in text  # the poster's number, quoted as the note
    ica = res[(res["model"] == "inner-ridge+ICA") & (res["rho_pct"] == 99)]
    assert np.allclose(ica["mcc"], 0.95 - 0.495)
    plots = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert "lachapelle2023_synthetic_correlation_mcc_vs_rho_pct.png" in plots
    assert "lachapelle2023_synthetic_support_mcc_vs_support_pct.png" in plots


def test_frozen_study_runs_and_reports(tmp_path):
    study = get_study("lachapelle2023_frozen")
    assert len(study.grid()) == 6 * 3 * 5 * 5
    configs = study.grid(seeds=1, quick=True, n_features=12, n_tasks=2, n_test=40)
    configs = [c for c in configs if c.n_train in (10, 25)]
    recs = run_sweep(configs, tmp_path, progress=False)
    assert all(np.isfinite(r["metrics"]["test_r2"]) for r in recs)
    # every model of a cell sees the same tasks: the data seed is the cell's
    by_cell = {}
    for r in recs:
        cell = (r["config"]["n_train"], r["config"]["useful_pct"])
        by_cell.setdefault(cell, set()).add(r["data_seed"])
    assert all(len(s) == 1 for s in by_cell.values())
    _, text = write_report(tmp_path)
    assert "0.63" in text and "-0.08" in text
    assert any((tmp_path / "plots").glob("lachapelle2023_frozen_*_vs_n_train.png"))
    with pytest.raises(ValueError, match="Unknown frozen settings"):
        study.grid(width=3)
    with pytest.raises(ValueError, match=r"useful_pct must lie in \[1, 100\]"):
        FrozenConfig(useful_pct=0)
