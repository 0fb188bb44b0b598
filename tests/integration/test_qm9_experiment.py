"""QM9 study on the test fixture through the standard sweep: records, latents,
resume, shared settings, report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from identrep.datasets.qm9 import QM9_TARGETS
from identrep.experiments import get_study, load_records, run_sweep, write_report
from identrep.experiments.io import latents_path
from identrep.experiments.report import cross_seed_summary

DATA = Path(__file__).resolve().parents[1] / "data" / "qm9"
# tiny budget: 80 molecules, 2 epochs, small EGNN (a few seconds per run)
KW = dict(
    n_molecules=80,
    max_epochs=2,
    source=DATA,
    hidden=8,
    n_layers=2,
    batch_size=40,
)


def _grid(**kw):
    return get_study("qm9").grid(**{"latent_dims": (2, 3), "seeds": 2, **KW, **kw})


@pytest.mark.slow
def test_qm9_sweep_writes_standard_records_resumes_and_reports(tmp_path):
    out = tmp_path / "qm9"
    configs = _grid()
    recs = run_sweep(configs, out, jobs=2, progress=False)

    ids = [c.run_id for c in configs]
    assert [(c.n_latents, c.seed) for c in configs] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert [r["run_id"] for r in recs] == ids
    assert sorted(r["run_id"] for r in load_records(out)) == sorted(ids)
    for rid in ids:
        rec = json.loads((out / "records" / f"{rid}.json").read_text())
        # the standard record: config, seeds, metrics, timings, environment
        assert set(rec) == {
            "run_id",
            "config",
            "data_seed",
            "model_seed",
            "metrics",
            "timings",
            "environment",
        }
        assert rec["config"]["table"] == "qm9" and rec["config"]["max_epochs"] == 2
        assert rec["config"]["n_molecules"] == 80 and rec["config"]["hidden"] == 8
        m = rec["metrics"]
        assert m["mtrn_epochs"] == 2 and np.isfinite(m["mtrn_r2"])
        assert m["n_molecules_used"] == 80
        assert set(m["mtrn_r2_per_target"]) == set(QM9_TARGETS)
        assert np.array(m["causal_indicators"]).shape == (
            12,
            rec["config"]["n_latents"],
        )
        with np.load(latents_path(out / "latents", rid)) as z:
            d = rec["config"]["n_latents"]
            assert z["features"].shape == (80, d) and z["latents"].shape == (80, d)
            assert np.all(np.isfinite(z["latents"]))
    assert not list(out.rglob("*.tmp"))  # atomic writes left no temporaries
    assert not (out / ".sweep.lock").exists()

    # cross-seed summary: one row per latent dim, MCCs in [0, 1]
    summ = cross_seed_summary(load_records(out), out).sort_values("n_latents")
    assert summ["n_latents"].tolist() == [2, 3]
    assert summ["n_pairs"].tolist() == [1, 1]
    for col in ("cross_seed_weak_mcc_mean", "cross_seed_mcc_mean"):
        assert summ[col].between(0, 1).all()

    # resume: nothing reruns; a run whose latents vanished is recomputed exactly
    rec_files = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*")}
    victim_id = next(c.run_id for c in configs if (c.n_latents, c.seed) == (3, 1))
    victim = latents_path(out / "latents", victim_id)
    with np.load(victim) as z:
        before = z["latents"].copy()
    victim.unlink()
    run_sweep(_grid(), out, progress=False)
    after_files = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*")}
    changed = {k for k in rec_files if after_files[k] != rec_files[k]}
    assert changed == {f"{victim_id}.json"}
    with np.load(victim) as z:
        np.testing.assert_allclose(z["latents"], before, rtol=1e-5, atol=1e-5)

    # other settings in the same folder are refused
    with pytest.raises(ValueError, match="other settings"):
        run_sweep(_grid(latent_dims=(2,), max_epochs=3), out, progress=False)

    # report: the standard results.csv, report.md and the figure
    df, md = write_report(out)
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 4 and set(results["n_latents"]) == {2, 3}
    assert len(df) == 4
    head = (
        "| model | n_latents | seeds | MTRN weak MCC across seeds ×100 | "
        "strong MCC across seeds (latents) ×100 |"
    )
    assert head in md
    assert md.count("\n| MTLCM | 2 | 2 |") == 1 and md.count("\n| MTLCM | 3 | 2 |") == 1
    for _, r in summ.iterrows():
        mean, std = 100 * r.cross_seed_mcc_mean, 100 * r.cross_seed_mcc_std
        assert f"{mean:.2f} ± {std:.2f}" in md
    assert "80 molecules" in md and "above 0.9" in md
    assert (
        (out / "report.md")
        .read_text()
        .endswith("![qm9_mcc_vs_n_latents](plots/qm9_mcc_vs_n_latents.png)\n")
    )
    png = out / "plots" / "qm9_mcc_vs_n_latents.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_qm9_report_of_an_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No records folder"):
        write_report(tmp_path)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:MTRN.*budget:UserWarning")  # 2 epochs on purpose
def test_qm9_mtlcm_restarts_keep_the_run_ids_and_the_mtrn():
    """--mtlcm-n-init: one start keeps the stored run ids; more starts get their
    own id but name the same stage 1 (its checkpoint), train the same MTRN and
    fit MTLCM from starts whose first is the one-start fit."""
    study = get_study("qm9")
    paper = dict(n_molecules=30000, latent_dims=(6, 7), max_epochs=100, patience=20)
    one = study.grid(seeds=2, **paper)
    # the ids of the records in docs/results/qm9_converged and of the d = 6 runs
    # (their MTRN checkpoints are named by them): the field must not move them
    assert [c.run_id for c in one] == [
        "qm9-MTLCM-d06-s0-4f5e0c86",
        "qm9-MTLCM-d06-s1-9b0ef63b",
        "qm9-MTLCM-d07-s0-f96bf067",
        "qm9-MTLCM-d07-s1-a86c8f51",
    ]
    assert all("mtlcm_n_init" not in c.to_dict() for c in one)
    assert [c.mtrn_run_id for c in one] == [c.run_id for c in one]
    many = study.grid(seeds=2, mtlcm_n_init=10, **paper)
    assert all(c.to_dict()["mtlcm_n_init"] == 10 for c in many)
    assert not {c.run_id for c in many} & {c.run_id for c in one}
    assert [c.mtrn_run_id for c in many] == [c.run_id for c in one]
    assert [c.model_seed() for c in many] == [c.model_seed() for c in one]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="mtlcm_n_init must be a positive"):
            study.grid(seeds=1, mtlcm_n_init=bad, **paper)

    # the fits: same MTRN bits, restart 0 is the one-start fit, best kept
    from identrep.experiments.studies import chen2024_qm9 as qm9

    (c1,) = study.grid(latent_dims=(3,), seeds=1, **KW)
    (c3,) = study.grid(latent_dims=(3,), seeds=1, mtlcm_n_init=3, **KW)
    data, _ = qm9.make_data(c1)
    p1 = qm9._pipeline(c1, c1.model_seed()).fit(data.X, data.Y)
    p3 = qm9._pipeline(c3, c3.model_seed()).fit(data.X, data.Y)
    F = p1.mtrn_.transform(data.X)
    np.testing.assert_array_equal(p3.mtrn_.transform(data.X), F)
    lls = p3.mtlcm_.restart_log_likelihoods_
    assert len(lls) == 3 and lls[0] == pytest.approx(p1.mtlcm_.log_likelihood_)
    assert p3.mtlcm_.log_likelihood_ == pytest.approx(max(lls))


def test_qm9_cli_mtlcm_n_init_reaches_the_runs(capsys):
    from identrep.cli import main

    argv = ["reproduce", "qm9", "--dry-run", "--latent-dims", "6", "--seeds", "1"]
    assert main([*argv, "--n-molecules", "30000", "--max-epochs", "100"]) == 0
    plain = capsys.readouterr().out
    assert (
        main(
            [
                *argv,
                "--n-molecules",
                "30000",
                "--max-epochs",
                "100",
                "--mtlcm-n-init",
                "4",
            ]
        )
        == 0
    )
    restarts = capsys.readouterr().out
    assert "qm9-MTLCM-d06-s0-" in plain and "qm9-MTLCM-d06-s0-" in restarts
    assert plain != restarts


def test_qm9_report_intro_names_the_mtlcm_starts():
    from identrep.experiments.studies.chen2024_qm9 import _intro

    old = pd.DataFrame({"n_molecules_used": [30000], "max_epochs": [100]})
    assert "then MTLCM. MCC x 100" in _intro(old)  # records of one start
    new = old.assign(mtlcm_n_init=[10.0])
    assert "then MTLCM (10 starts, the highest likelihood kept). " in _intro(new)
