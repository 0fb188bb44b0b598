"""Sweeps: identical records across job counts, resume, failed runs."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from identrep.experiments import RunConfig, run_sweep, write_report

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


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
