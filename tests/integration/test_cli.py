"""The `identrep` command end to end (in-process and as an installed script)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pandas as pd
import pytest

from identrep.cli import main


def test_demo_prints_recovery_and_causal_sets(capsys):
    assert main(["demo", "--n-latents", "5", "--show-tasks", "2"]) == 0
    out = capsys.readouterr().out
    assert "strong MCC per task" in out
    assert "task 0: true" in out
    score = float(
        out.split("strong MCC pooled over all samples (Pearson):")[1].split()[0]
    )
    assert score > 0.99


@pytest.mark.slow
def test_reproduce_quick_subset_then_report(tmp_path, capsys):
    out = tmp_path / "t1"
    rc = main(
        [
            "reproduce",
            "table1",
            "--quick",
            "--models",
            "MTLCM",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    df = pd.read_csv(out / "results.csv")
    assert sorted(df.n_latents.unique().tolist()) == [3, 10]
    assert len(df) == 3  # (k=2, d=3), (k=2, d=10), (k=4, d=10); one seed each
    assert (df.mcc_task_spearman > 0.99).all()
    text = capsys.readouterr().out
    assert "paper ×100" in text
    assert "**Smaller budgets than the paper's** (as `identrep reproduce" in text
    assert "3 of the paper's 9 configurations; 1 seed(s) (paper: 5)" in text
    (out / "results.csv").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "results.csv").exists()


def test_reproduce_dry_run_lists_runs(capsys):
    assert main(["reproduce", "table1", "--dry-run", "--seeds", "2"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 5 * 18
    argv = ["reproduce", "table1", "--dry-run", "--seeds", "2", "--models"]
    assert main([*argv, "MTLCM,iVAE"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 36 and all("-MTLCM-" in x or "-iVAE-" in x for x in lines)
    with pytest.raises(SystemExit, match="unknown model"):
        main([*argv, "PCA"])


def test_reproduce_without_seeds_takes_the_studys_own_number(capsys):
    """The paper's synthetic process of Moran et al. has 10 seeds, the tables 5:
    without --seeds each study runs its own (the CLI once passed 5 to all)."""
    argv = ["reproduce", "moran2022_synthetic", "--dry-run", "--models", "VAE"]
    assert main(argv) == 0
    ids = capsys.readouterr().out.strip().splitlines()
    assert len(ids) == 5 * 10 and sum("-r0-s9-" in x for x in ids) == 1
    assert main(["reproduce", "table1", "--dry-run", "--models", "MTLCM"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 9 * 5
    assert main([*argv, "--seeds", "3"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 5 * 3


def test_reproduce_synthetic_takes_n_latents(capsys):
    """--n-latents reaches the synthetic process's grid (new runs, new ids);
    without it the grid and its run ids are those of the stored results (2)."""
    from identrep.experiments import get_study

    base = ["reproduce", "moran2022_synthetic", "--dry-run", "--models", "VAE"]
    assert main(base) == 0
    ids2 = capsys.readouterr().out.strip().splitlines()
    assert main([*base, "--n-latents", "5"]) == 0
    ids5 = capsys.readouterr().out.strip().splitlines()
    assert len(ids5) == len(ids2) == 50 and not set(ids2) & set(ids5)
    configs = get_study("moran2022_synthetic").grid(seeds=1, models=("VAE",))
    assert {c.n_latents for c in configs} == {2}
    assert {c.run_id for c in configs} <= set(ids2)


def test_where_with_unknown_field_fails_clearly():
    with pytest.raises(SystemExit, match="unknown field"):
        main(["reproduce", "table1", "--dry-run", "--where", "colour=blue"])


def test_report_on_missing_folder_returns_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "No records folder" in capsys.readouterr().err


@pytest.mark.skipif(
    shutil.which("identrep") is None and sys.prefix == sys.base_prefix,
    reason="console script not installed in this environment",
)
def test_console_script_entry_point():
    exe = shutil.which("identrep")
    cmd = [exe] if exe else [sys.executable, "-m", "identrep.cli"]
    res = subprocess.run(
        [*cmd, "--version"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0
    assert res.stdout.startswith("identrep ")


def test_reproduce_qm9_on_fixture_then_report(tmp_path, capsys):
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data" / "qm9"
    out = tmp_path / "qm9"
    argv = ["reproduce", "qm9", "--qm9-source", str(data), "--n-molecules", "60"]
    argv += ["--max-epochs", "1", "--latent-dims", "2", "--seeds", "2"]
    argv += ["--out", str(out), "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "| 2 | 2 |" in text  # one row: d=2, two seeds
    assert (out / "report.md").is_file() and (out / "results.csv").is_file()
    assert len(list((out / "records").glob("*.json"))) == 2
    assert main(["report", str(out)]) == 0
    assert "QM9" in capsys.readouterr().out


def test_reproduce_qm9_only_flags_are_rejected_elsewhere(tmp_path, capsys):
    assert main(["reproduce", "table1", "--max-epochs", "3", "--dry-run"]) == 2
    assert "--max-epochs applies to qm9 only" in capsys.readouterr().err
    argv = ["reproduce", "qm9", "--latent-dims", "5,x", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "--latent-dims must be comma-separated integers" in capsys.readouterr().err


# ------------------------------------------- user errors: exit 2, one line


def _one_line_error(capsys, prefix: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(prefix), err
    assert not any("Traceback" in line for line in err), err
    return err[-1]


def test_reproduce_into_a_file_is_a_one_line_error(tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep")
    argv = ["reproduce", "table1", "--quick", "--models", "MTLCM"]
    argv += ["--where", "n_latents=3", "--out", str(target), "--no-progress"]
    assert main(argv) == 2
    assert "is a file" in _one_line_error(capsys, "identrep reproduce table1:")
    assert target.read_text() == "keep"


def test_an_unreachable_dask_scheduler_is_a_one_line_error(tmp_path, capsys):
    import dask
    import distributed  # noqa: F401  (first: its config defaults must exist before
    # dask.config.set, which otherwise removes the whole namespace on exit)

    argv = ["reproduce", "table1", "--quick", "--models", "MTLCM"]
    argv += ["--where", "n_latents=3", "--backend", "dask", "--no-progress"]
    argv += ["--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "o")]
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert main(argv) == 2
    assert "127.0.0.1:9" in _one_line_error(capsys, "identrep reproduce table1:")


def test_transform_with_a_malformed_model_is_a_one_line_error(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    manifest = {"format": "identrep-model", "format_version": 1}
    manifest |= {"estimator": {"class": "MTLCM"}, "files": {}}
    (model / "manifest.json").write_text(__import__("json").dumps(manifest))
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    argv = ["transform", str(model), str(tmp_path / "t.csv"), "--out"]
    assert main([*argv, str(tmp_path / "z.csv")]) == 2
    assert "Corrupt model manifest" in _one_line_error(capsys, "identrep transform:")
