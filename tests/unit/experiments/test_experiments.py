"""Experiment harness: configs, seeds, atomic records, sweeps, reports."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from identrep.experiments import (
    RunConfig,
    get_table,
    load_records,
    published_results,
    run,
    run_sweep,
    write_report,
)
from identrep.experiments.io import atomic_write_text, write_record
from identrep.experiments.runner import make_data, reference_mixing
from identrep.utils.seeding import derive_seed

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


def test_run_config_validates_choices():
    with pytest.raises(ValueError, match="mixing must be one of"):
        RunConfig(table="table1", mixing="weird")
    with pytest.raises(ValueError, match="n_causal must lie in"):
        RunConfig(table="table1", n_latents=3, n_causal=4)
    with pytest.raises(ValueError, match="mixing_source"):
        RunConfig(table="table1", mixing_source="elsewhere")


def test_run_ids_are_unique_and_stable():
    grid = get_table("table1").grid(seeds=5)
    assert len(grid) == 5 * 45  # MTLCM and four baselines
    ids = [c.run_id for c in grid]
    assert len(set(ids)) == len(ids)
    assert ids == [c.run_id for c in get_table("table1").grid(seeds=5)]
    assert get_table("table1").grid(seeds=5, quick=True)[0].seed == 0
    assert len(get_table("table1").grid(quick=True, models=["MTLCM"])) == 9
    assert {c.model for c in get_table("table2").grid(quick=True)} == {
        "MTLCM",
        "iVAE",
        "MT-iVAE",
        "iCaRL",
        "MT-iCaRL",
    }
    with pytest.raises(ValueError, match="models must be a non-empty subset"):
        get_table("table1").grid(models=["PCA"])


def test_derived_seeds_depend_on_content_not_order():
    assert derive_seed("data", 1, "a") == derive_seed("data", 1, "a")
    assert derive_seed("data", 1, "a") != derive_seed("data", 2, "a")
    assert 0 <= derive_seed("x") < 2**32


def test_reference_mixing_is_the_authors_draw():
    torch.manual_seed(3)
    expected = torch.randn(7, 7).double().numpy()
    np.testing.assert_array_equal(reference_mixing(7, "random", 3), expected)
    Q = reference_mixing(7, "orthogonal", 3)
    np.testing.assert_allclose(Q.T @ Q, np.eye(7), atol=1e-12)
    np.testing.assert_array_equal(reference_mixing(4, "identity", 0), np.eye(4))
    data, _ = make_data(dataclasses.replace(SMALL, seed=3))
    np.testing.assert_array_equal(data.mixing, reference_mixing(3, "random", 3))
    seeded, _ = make_data(dataclasses.replace(SMALL, seed=3, mixing_source="seeded"))
    assert not np.allclose(seeded.mixing, data.mixing)


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert sorted(x.name for x in p.parent.iterdir()) == ["f.txt"]


def test_write_record_round_trips_numpy_types(tmp_path):
    rec = {
        "run_id": "r",
        "a": np.float64(1.5),
        "b": np.int64(2),
        "c": np.arange(3),
        "d": np.bool_(True),
    }
    write_record(tmp_path / "records" / "r.json", rec)
    back = load_records(tmp_path)
    assert back == [{"run_id": "r", "a": 1.5, "b": 2, "c": [0, 1, 2], "d": True}]


def test_load_records_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No records folder"):
        load_records(tmp_path)


def test_run_record_has_config_seeds_metrics_and_is_reproducible():
    a, b = run(SMALL), run(SMALL)
    assert a["config"] == SMALL.to_dict()
    for key in (
        "mcc_task_spearman",
        "mcc_pooled",
        "causal_accuracy",
        "fit_seconds",
        "ceiling_mcc_task",
        "random_mcc_task",
        "log_likelihood",
    ):
        assert key in a["metrics"]
    assert a["environment"]["torch"] == torch.__version__
    for key, value in a["metrics"].items():
        if key != "fit_seconds":
            assert b["metrics"][key] == value, key
    # the fit is good even on this small problem, and better than a random unmixing
    assert a["metrics"]["mcc_pooled"] > 0.95
    assert a["metrics"]["mcc_task_spearman"] > a["metrics"]["random_mcc_task"]


def _strip_times(rec):
    rec = json.loads(json.dumps(rec))
    rec["metrics"].pop("fit_seconds")
    rec.pop("timings")
    rec.pop("environment")  # the git state may change between two sweeps
    return rec


def test_sweep_records_identical_across_job_counts_and_resume(tmp_path, capsys):
    configs = [dataclasses.replace(SMALL, seed=s) for s in range(3)]
    one = run_sweep(configs, tmp_path / "one", jobs=1, progress=False)
    two = run_sweep(configs, tmp_path / "two", jobs=2, progress=False)
    assert [_strip_times(r) for r in one] == [_strip_times(r) for r in two]
    assert len(list((tmp_path / "one" / "records").glob("*.json"))) == 3
    # resume: a finished record is loaded, not recomputed (its file is untouched)
    path = next((tmp_path / "one" / "records").glob("*.json"))
    mtime = path.stat().st_mtime_ns
    again = run_sweep(configs, tmp_path / "one", jobs=1, progress=True)
    assert path.stat().st_mtime_ns == mtime
    assert [r["run_id"] for r in again] == [c.run_id for c in configs]
    assert "Resuming: 3 of 3" in capsys.readouterr().err


def test_report_has_required_columns_and_published_numbers(tmp_path):
    configs = [dataclasses.replace(SMALL, seed=s) for s in range(2)]
    run_sweep(configs, tmp_path, progress=False)
    df, text = write_report(tmp_path)
    results = pd.read_csv(tmp_path / "results.csv")
    for col in (
        "table",
        "model",
        "seed",
        "n_latents",
        "n_causal",
        "n_observed",
        "mixing",
        "mcc_task_spearman",
        "mcc_pooled",
        "causal_accuracy",
        "fit_seconds",
    ):
        assert col in results.columns, col
    assert len(results) == 2
    pub = published_results("table1")
    paper = pub[(pub.model == "MTLCM") & (pub.n_latents == 3) & (pub.n_causal == 2)]
    assert f"{float(paper.mcc_mean.iloc[0]):.2f}" in text
    assert (tmp_path / "report.md").read_text().startswith("# identrep results")
    mean = results["mcc_task_spearman"].mean() * 100
    assert f"{mean:.2f}" in text


def test_report_without_records_raises(tmp_path):
    (tmp_path / "records").mkdir()
    with pytest.raises(ValueError, match="No records"):
        write_report(tmp_path)


def test_unknown_table_lists_known_ones():
    with pytest.raises(ValueError, match="known tables: table1"):
        get_table("table9")


def test_report_writes_latex_and_plots_from_records_alone(tmp_path, monkeypatch):
    configs = [
        dataclasses.replace(SMALL, seed=s, n_latents=d, n_observed=d)
        for s in range(2)
        for d in (3, 4)
    ]
    run_sweep(configs, tmp_path, progress=False)
    write_report(tmp_path)
    tex = (tmp_path / "report.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex
    # one row per configuration; the paper's MTLCM number beside d = 3
    body = tex.split("\\midrule")[1].split("\\bottomrule")[0].strip().splitlines()
    assert len(body) == 2
    assert "$99.95 \\pm 0.01$" in body[0]
    png = tmp_path / "plots" / "table1_random_mcc_vs_n_latents.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        "plots/table1_random_mcc_vs_n_latents.png"
        in (tmp_path / "report.md").read_text()
    )
    # without matplotlib the tables are still written and the report says why
    import identrep.experiments.plots as plots

    def no_matplotlib():
        raise ImportError('Plots need matplotlib: pip install "identrep[plot]".')

    monkeypatch.setattr(plots, "_pyplot", no_matplotlib)
    (tmp_path / "report.tex").unlink()
    write_report(tmp_path)
    assert (tmp_path / "report.tex").exists()
    assert "No plots: Plots need matplotlib" in (tmp_path / "report.md").read_text()


def test_table3_grid_and_its_errors():
    grid = get_table("table3").grid(models=["MTLCM"])
    assert len(grid) == 25 and {c.n_latents for c in grid} == {5, 10, 20, 40, 80}
    assert all(c.model == "MTLCM" and c.mixing == "none" for c in grid)
    assert len(get_table("table3").grid()) == 125  # MTLCM and the four baselines
    quick = get_table("table3").grid(quick=True, models=["MTLCM", "iCaRL"])
    assert [(c.model, c.n_latents, c.seed, c.max_epochs) for c in quick] == [
        ("MTLCM", 5, 0, 40),
        ("MTLCM", 5, 1, 40),
        ("MTLCM", 10, 0, 40),
        ("MTLCM", 10, 1, 40),
        ("iCaRL", 5, 0, 4),
        ("iCaRL", 5, 1, 4),
        ("iCaRL", 10, 0, 4),
        ("iCaRL", 10, 1, 4),
    ]
    with pytest.raises(ValueError, match="compares seeds"):
        get_table("table3").grid(seeds=1)
    with pytest.raises(ValueError, match="non-empty subset"):
        get_table("table3").grid(models=["PCA"])


def test_table3_runs_store_latents_and_report_agreement_across_seeds(
    tmp_path, monkeypatch
):
    """The real-data protocol on a small stand-in data set (the real one takes
    minutes per run): latents stored per run, cross-seed MCC over seed pairs."""
    import identrep.experiments.runner as runner
    from identrep.datasets import make_nonlinear_tasks

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
    monkeypatch.setattr(
        runner, "load_real_data", lambda config: runner.RealData(X=X, Y=Y)
    )
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
    monkeypatch.setattr(runner, "TABLE3_BASELINE_MATERIALS", 100)
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


def test_report_puts_models_side_by_side_with_the_paper(tmp_path):
    """One column per model (MTLCM first), one row per configuration, our
    mean ± std with the paper's number of that model in parentheses."""
    configs = [
        dataclasses.replace(SMALL, model=m, seed=s, max_epochs=2)
        for m in ("iVAE", "MTLCM")
        for s in range(2)
    ]
    recs = run_sweep(configs, tmp_path, progress=False)
    _, text = write_report(tmp_path, plots=False)
    lines = text.split("Side by side")[1].splitlines()
    assert lines[2] == "| n_causal | n_latents | MTLCM | iVAE |"
    row = lines[4].split(" | ")
    pub = published_results("table1").set_index(["model", "n_causal", "n_latents"])
    for col, model in ((2, "MTLCM"), (3, "iVAE")):
        vals = [
            r["metrics"]["mcc_task_spearman"] * 100
            for r in recs
            if r["config"]["model"] == model
        ]
        paper = pub.loc[(model, 2, 3), "mcc_mean"]
        assert row[col].startswith(f"{np.mean(vals):.2f} ± {np.std(vals):.2f}")
        assert row[col].rstrip(" |").endswith(f"({paper:.2f})")


def test_a_failing_run_is_recorded_and_does_not_stop_the_sweep(tmp_path, monkeypatch):
    import identrep.experiments.runner as runner

    real_run = runner.run
    bad = dataclasses.replace(SMALL, seed=1)

    def run(config, **kw):
        if config == bad:
            raise ValueError("the fit is singular (test)")
        return real_run(config, **kw)

    monkeypatch.setattr(runner, "run", run)
    configs = [dataclasses.replace(SMALL, seed=s) for s in range(3)]
    recs = run_sweep(configs, tmp_path, progress=False)
    assert [r.get("status") for r in recs] == [None, "failed", None]
    assert recs[1]["error"] == "ValueError: the fit is singular (test)"
    assert recs[1]["metrics"] == {}
    _, text = write_report(tmp_path, plots=False)
    assert "## Failed runs (1)" in text and bad.run_id in text
    assert len(pd.read_csv(tmp_path / "results.csv")) == 2  # failed run: no row
    # final: a resumed sweep does not run it again
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("rerun"))
    again = run_sweep(configs, tmp_path, progress=False)
    assert [r["run_id"] for r in again] == [r["run_id"] for r in recs]
