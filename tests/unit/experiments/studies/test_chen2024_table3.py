"""Chen et al. Table 3: grid, stored latents, agreement across seeds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from identrep.experiments import RunConfig, get_study, run_sweep, write_report


def test_table3_grid_and_its_errors():
    grid = get_study("table3").grid(models=["MTLCM"])
    assert len(grid) == 25 and {c.n_latents for c in grid} == {5, 10, 20, 40, 80}
    assert all(c.model == "MTLCM" and c.mixing == "none" for c in grid)
    assert len(get_study("table3").grid()) == 125  # MTLCM and the four baselines
    quick = get_study("table3").grid(quick=True, models=["MTLCM", "iCaRL"])
    assert [(c.model, c.n_latents, c.seed, c.max_epochs) for c in quick] == [
        ("MTLCM", 5, 0, 15),
        ("MTLCM", 5, 1, 15),
        ("iCaRL", 5, 0, 1),
        ("iCaRL", 5, 1, 1),
    ]
    with pytest.raises(ValueError, match="compares seeds"):
        get_study("table3").grid(seeds=1)
    with pytest.raises(ValueError, match="non-empty subset"):
        get_study("table3").grid(models=["PCA"])


def test_table3_runs_store_latents_and_report_agreement_across_seeds(
    tmp_path, monkeypatch
):
    """The real-data protocol on a small stand-in data set (the real one takes
    minutes per run): latents stored per run, cross-seed MCC over seed pairs."""
    import identrep.experiments.studies.chen2024_table3 as table3
    from identrep.datasets import make_nonlinear_tasks
    from identrep.experiments.studies._chen2024 import RealData

    small = make_nonlinear_tasks(
        n_tasks=12,
        n_samples=150,
        n_latents=3,
        n_causal=1,
        n_observed=10,
        random_state=0,
    )
    X = small.X[small.task_ids == 0]
    Y = np.column_stack(
        [X @ np.random.default_rng(t).normal(size=10) for t in range(8)]
    )
    Y = Y + np.tanh(X[:, :8])
    monkeypatch.setattr(table3, "load_real_data", lambda config: RealData(X=X, Y=Y))
    configs = [
        RunConfig(
            table="table3",
            n_latents=3,
            n_causal=0,
            n_observed=10,
            n_tasks=8,
            n_samples=150,
            mixing="none",
            max_epochs=30 if m == "MTLCM" else 3,
            seed=s,
            model=m,
        )
        for m in ("MTLCM", "MT-iVAE")
        for s in range(3)
    ]
    monkeypatch.setattr(table3, "TABLE3_BASELINE_MATERIALS", 100)
    recs = run_sweep(configs, tmp_path, progress=False)
    for r in recs:
        assert (tmp_path / "latents" / f"{r['run_id']}.npz").exists()
        if r["config"]["model"] == "MTLCM":
            assert 0.0 < r["metrics"]["mtrn_r2"] <= 1.0
        else:  # trained on a subset of the materials, encodes all of them
            assert r["metrics"]["n_train_materials"] == 100
            with np.load(tmp_path / "latents" / f"{r['run_id']}.npz") as z:
                assert z["latents"].shape == (150, 3) and "features" not in z.files
    df, text = write_report(tmp_path)
    summ = pd.read_csv(tmp_path / "results.csv")
    assert len(summ) == 6
    row = [x for x in text.splitlines() if x.startswith("| MT-iVAE | 3 |")][0]
    cells = row.split("|")  # no MTRN features: weak MCC empty, strong in (0, 100]
    assert 0 < float(cells[5].split("±")[0]) <= 100
    row = [x for x in text.splitlines() if x.startswith("| MTLCM | 3 |")][0]
    # 3 seeds -> 3 pairs; cross-seed agreement is an MCC in (0, 100]
    cells = row.split("|")
    weak, strong = float(cells[4].split("±")[0]), float(cells[5].split("±")[0])
    assert 0 < strong <= 100 and 0 < weak <= 100
    # a record whose latents were deleted is a clear error, not a silent gap
    next((tmp_path / "latents").glob("*.npz")).unlink()
    with pytest.raises(FileNotFoundError, match="has no stored latents"):
        write_report(tmp_path)


def test_table3_baselines_train_on_one_subset_for_every_seed_and_d(
    tmp_path, monkeypatch
):
    """The paper trains each model "5 times with different random seeds and
    initializations": the baselines' materials are one subset for every seed
    (and every d, the data being the same), while the model seeds still differ."""
    import identrep.experiments.studies.chen2024_table3 as table3
    from identrep.experiments.studies._chen2024 import RealData

    grid = get_study("table3").grid(
        seeds=3,
        models=["iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL"],
        baseline_materials="subset",
    )
    subsets = [table3.baseline_materials(c, 21263) for c in grid]
    first = subsets[0]
    assert len(first) == table3.TABLE3_BASELINE_MATERIALS
    assert np.all(np.diff(first) > 0) and first[0] >= 0 and first[-1] < 21263
    assert all(np.array_equal(s, first) for s in subsets)
    for m in ("iVAE", "MT-iCaRL"):
        for d in (5, 80):
            seeds = [c.model_seed() for c in grid if (c.model, c.n_latents) == (m, d)]
            assert len(seeds) == 3 and len(set(seeds)) == 3
    # fewer materials than the budget: all of them
    small = dataclasses.replace(grid[0], n_samples=50)
    assert np.array_equal(table3.baseline_materials(small, 50), np.arange(50))

    # fit_baseline hands exactly these rows to the estimator, whatever the seed
    seen = []

    class Recorder:
        history_ = {"train_loss": [1.0], "best_epoch": 0}

        def __init__(self, seed):
            self.seed = seed

        def fit(self, X, Y):
            seen.append((self.seed, X[:, 0].copy()))
            return self

        def transform(self, X):
            return np.zeros((len(X), 2))

    monkeypatch.setattr(
        table3.chen, "baseline_estimator", lambda config, seed, settings: Recorder(seed)
    )
    X = np.arange(21263, dtype=float)[:, None] * np.ones((1, 86))
    data = RealData(X=X, Y=np.zeros((21263, 80)))
    for c in [c for c in grid if (c.model, c.n_latents) == ("iCaRL", 20)]:
        out = table3.fit_baseline(c, data, c.model_seed(), tmp_path)
        assert out["n_train_materials"] == table3.TABLE3_BASELINE_MATERIALS
    assert len({s for s, _ in seen}) == 3
    assert all(np.array_equal(rows, first.astype(float)) for _, rows in seen)


def test_table3_baseline_budget_on_all_materials(tmp_path, monkeypatch):
    """``baseline_materials`` / ``baseline_steps``: new run ids when set, the
    old ones untouched otherwise; all rows and the steps per epoch handed to the
    estimator; bad values named."""
    import identrep.experiments.studies.chen2024_table3 as table3
    from identrep.experiments.studies._chen2024 import RealData

    study = get_study("table3")
    old = [
        c
        for c in study.grid(models=["iVAE"], baseline_materials="subset")
        if (c.n_latents, c.seed) == (10, 0)
    ]
    # the id of the stored record in /work/runs/t3_baselines (before the fields)
    assert old[0].run_id == "table3-iVAE-d10-k0-p86-none-s0-ae7e529a"
    assert "baseline_steps" not in old[0].to_dict()
    # the default: all materials with each model's step budget, the same run ids
    # as the explicit options (so the records of /work/runs/t3_baselines_all,
    # made with them, are the default's); --quick keeps the subset
    models = ["MTLCM", "iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL"]
    default = study.grid(models=models, seeds=2)
    for c in default:
        if c.model == "MTLCM":
            assert c.baseline_materials is None and c.baseline_steps is None
        else:
            assert c.baseline_materials == "all"
            assert c.baseline_steps == table3.TABLE3_BASELINE_STEPS[c.model]
            explicit = study.grid(
                models=[c.model],
                seeds=2,
                baseline_materials="all",
                baseline_steps=table3.TABLE3_BASELINE_STEPS[c.model],
            )
            assert c.run_id in {e.run_id for e in explicit}
    assert {c.baseline_steps for c in default if c.model == "iCaRL"} == {2350}
    quick = study.grid(models=models, quick=True)
    assert all(c.baseline_materials is None for c in quick)
    assert all(c.baseline_steps is None for c in quick)
    # one option alone: the other keeps its plain meaning (no step budget /
    # the subset), as before the default changed
    counted = study.grid(models=["iVAE"], seeds=2, baseline_materials=500)
    assert {(c.baseline_materials, c.baseline_steps) for c in counted} == {(500, None)}
    stepped = study.grid(models=["iVAE"], seeds=2, baseline_steps=1000)
    assert {(c.baseline_materials, c.baseline_steps) for c in stepped} == {(None, 1000)}
    new = study.grid(
        models=["MTLCM", "iVAE"], baseline_materials="all", baseline_steps=2110
    )
    mtlcm = [c for c in new if c.model == "MTLCM"]
    assert all(c.baseline_materials is None for c in mtlcm)  # MTLCM ignores them
    ivae = [c for c in new if c.model == "iVAE" and (c.n_latents, c.seed) == (10, 0)]
    assert ivae[0].run_id != old[0].run_id
    assert ivae[0].model_seed() == old[0].model_seed()  # same model, same seed
    assert table3.baseline_steps_per_epoch(ivae[0]) == 211
    assert table3.baseline_steps_per_epoch(old[0]) is None
    assert np.array_equal(table3.baseline_materials(ivae[0], 40), np.arange(40))
    five = dataclasses.replace(old[0], baseline_materials=5)
    assert len(table3.baseline_materials(five, 40)) == 5

    seen = {}

    class Recorder:
        history_ = {"train_loss": [1.0], "best_epoch": 0}

        def __init__(self, settings):
            seen["steps"] = settings["steps_per_epoch"]

        def fit(self, X, Y):
            seen["rows"] = len(X)
            return self

        def transform(self, X):
            return np.zeros((len(X), 2))

    monkeypatch.setattr(
        table3.chen, "baseline_estimator", lambda c, seed, settings: Recorder(settings)
    )
    data = RealData(X=np.ones((40, 86)), Y=np.zeros((40, 80)))
    out = table3.fit_baseline(ivae[0], data, 0, tmp_path)
    assert seen == {"steps": 211, "rows": 40}
    assert out["n_train_materials"] == 40 and out["steps_per_epoch"] == 211

    with pytest.raises(ValueError, match="multiple of the 10 epochs"):
        table3.baseline_steps_per_epoch(
            dataclasses.replace(ivae[0], baseline_steps=2111)
        )
    with pytest.raises(ValueError, match="baseline_materials must be"):
        dataclasses.replace(old[0], baseline_materials="most")
    with pytest.raises(ValueError, match="baseline_steps must be"):
        dataclasses.replace(old[0], baseline_steps=0)
    with pytest.raises(ValueError, match="table3 only"):
        RunConfig(table="table1", baseline_steps=100)
    with pytest.raises(ValueError, match="--baseline-materials"):
        table3._materials("most")


def test_table3_agreement_refuses_two_settings_in_one_folder(tmp_path):
    """Subset and all-materials records of one model, d and seed index would
    be pooled as if they were more seeds: the cross-seed summary refuses."""
    from identrep.experiments.report import cross_seed_summary

    base = RunConfig(table="table3", model="iVAE", n_causal=0, n_observed=86,
                     n_tasks=80, n_samples=21263, mixing="none")  # fmt: skip
    configs = [base, dataclasses.replace(base, baseline_materials="all")]
    records = [{"config": c.to_dict(), "run_id": c.run_id} for c in configs]
    with pytest.raises(ValueError, match="share seed indices"):
        cross_seed_summary(records, tmp_path)


def test_table3_intro_names_each_step_budget():
    """The report's intro says what the baselines trained on, from the records:
    one step count, or each count with its models (iVAE 211 an epoch, iCaRL
    235, which keeps no validation rows); the subset when no record says."""
    import identrep.experiments.studies.chen2024_table3 as table3

    runs = pd.DataFrame({
        "model": ["MTLCM", "iVAE", "MT-iVAE", "iCaRL"],
        "n_train_materials": [np.nan, 21263, 21263, 21263],
        "steps_per_epoch": [np.nan, 211, 211, 235],
    })  # fmt: skip
    text = table3._trained_on(runs)
    assert text == (
        "one set of 21,263 materials (optimiser steps an epoch: "
        "211 for MT-iVAE, iVAE; 235 for iCaRL)"
    )
    one = table3._trained_on(runs[runs["model"] != "iCaRL"])
    assert one == "one set of 21,263 materials (211 optimiser steps an epoch)"
    assert table3._trained_on(runs[["model"]]) == "one subset of 3,000 materials"
