"""QM9 experiment on the test fixture: records, latents, resume, settings, report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from identrep.experiments.io import load_records
from identrep.experiments.qm9 import qm9_report, qm9_run_id, qm9_summary, run_qm9

DATA = Path(__file__).resolve().parents[1] / "data" / "qm9"
# tiny budget: 80 molecules, 2 epochs, small EGNN (a few seconds per run)
KW = dict(
    n_molecules=80,
    max_epochs=2,
    source=DATA,
    progress=False,
    hidden=8,
    n_layers=2,
    batch_size=40,
)


@pytest.mark.slow
def test_qm9_experiment_records_resume_report(tmp_path):
    out = tmp_path / "qm9"
    summ = run_qm9(out, latent_dims=(2, 3), seeds=2, **KW)

    ids = [qm9_run_id(d, s) for d in (2, 3) for s in (0, 1)]
    assert sorted(r["run_id"] for r in load_records(out)) == sorted(ids)
    for rid in ids:
        rec = json.loads((out / "records" / f"{rid}.json").read_text())
        assert rec["table"] == "qm9" and rec["config"]["max_epochs"] == 2
        assert rec["config"]["n_molecules"] == 80 and rec["config"]["hidden"] == 8
        m = rec["metrics"]
        assert m["mtrn_epochs"] == 2 and np.isfinite(m["mtrn_r2"])
        assert set(m["mtrn_r2_per_target"]) == set(rec["config"]["targets"])
        assert np.array(m["causal_indicators"]).shape == (
            12,
            rec["config"]["n_latents"],
        )
        with np.load(out / rec["latents_file"]) as z:
            d = rec["config"]["n_latents"]
            assert z["features"].shape == (80, d) and z["latents"].shape == (80, d)
            assert np.all(np.isfinite(z["latents"]))
    assert not list(out.rglob("*.tmp"))  # atomic writes left no temporaries

    # summary: one row per latent dim, MCCs in [0, 1]
    assert summ["n_latents"].tolist() == [2, 3]
    assert summ["n_pairs"].tolist() == [1, 1]
    for col in ("cross_seed_weak_mcc_mean", "cross_seed_mcc_mean"):
        assert summ[col].between(0, 1).all()
    assert (out / "qm9_results.csv").is_file()

    # resume: nothing reruns; a run whose latents vanished is recomputed exactly
    rec_files = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*")}
    victim = out / "latents" / f"{qm9_run_id(3, 1)}.npz"
    with np.load(victim) as z:
        before = z["latents"].copy()
    victim.unlink()
    run_qm9(out, latent_dims=(2, 3), seeds=2, **KW)
    after_files = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*")}
    changed = {k for k in rec_files if after_files[k] != rec_files[k]}
    assert changed == {f"{qm9_run_id(3, 1)}.json"}
    with np.load(victim) as z:
        np.testing.assert_allclose(z["latents"], before, rtol=1e-5, atol=1e-5)

    # other settings in the same folder are refused
    with pytest.raises(ValueError, match="other settings"):
        run_qm9(out, latent_dims=(2,), seeds=2, **{**KW, "max_epochs": 3})

    # report: markdown table and the figure
    summ2, md = qm9_report(out)
    assert summ2.equals(qm9_summary(out))
    assert "| latent dim | seeds | MTRN (weak) | MTLCM |" in md
    assert md.count("\n| 2 | 2 |") == 1 and md.count("\n| 3 | 2 |") == 1
    assert (out / "qm9_report.md").read_text() == md
    png = out / "qm9_mcc.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_qm9_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="Unknown QM9 settings"):
        run_qm9(tmp_path, source=DATA, width=3)
    with pytest.raises(ValueError, match="latent_dims must be distinct"):
        run_qm9(tmp_path, latent_dims=(2, 2), source=DATA)
    with pytest.raises(ValueError, match="seeds must be"):
        run_qm9(tmp_path, seeds=0, source=DATA)
    with pytest.raises(ValueError, match="max_epochs must be"):
        run_qm9(tmp_path, max_epochs=0, source=DATA)
    with pytest.raises(FileNotFoundError, match="No QM9 records"):
        qm9_summary(tmp_path)
