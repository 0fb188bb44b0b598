"""Fit and transform on a user's file (:mod:`identrep.tabular.fitting`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import identrep as ir
from identrep.persistence import load_model, read_manifest
from identrep.tabular import FitResult, fit, transform
from identrep.tabular import fitting as fitting_module


@pytest.fixture(scope="module")
def long_csv(tmp_path_factory):
    """A small long table from the linear process (MTLCM alone fits it quickly)."""
    d = ir.datasets.make_linear_tasks(
        n_tasks=6, n_samples=25, n_latents=2, n_causal=1, random_state=0
    )
    df = pd.DataFrame(d.X, columns=["a", "b"])
    df["task"] = [f"t{t}" for t in d.task_ids]
    df["v"] = d.y
    path = tmp_path_factory.mktemp("data") / "long.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_writes_every_output_atomically(long_csv, tmp_path, monkeypatch, capsys):
    written = []
    real = fitting_module.atomic_write_text

    def spy(path, text):
        written.append(path.name)
        return real(path, text)

    monkeypatch.setattr(fitting_module, "atomic_write_text", spy)
    out = tmp_path / "fit"
    res = fit(long_csv, target="v", task_col="task", stage2_only=True, out=out,
              progress=False)  # fmt: skip
    assert capsys.readouterr().err == ""  # progress=False: silent
    assert isinstance(res, FitResult) and res.out == out
    assert written == ["latents.csv", "causal_map.csv", "report.md", "report.html"]
    names = {"latents.csv", "causal_map.csv", "model", "report.md", "report.html"}
    assert names <= set(res.files)
    assert all(p.exists() and p.parent == out for p in res.files.values())
    assert not list(out.glob(".*.tmp"))  # no temporary file left behind
    pd.testing.assert_frame_equal(pd.read_csv(out / "latents.csv"), res.latents)
    pd.testing.assert_frame_equal(pd.read_csv(out / "causal_map.csv"), res.causal_map)
    assert list(res.latents.columns) == ["row", "z0", "z1"]
    np.testing.assert_allclose(
        res.causal_map[["z0", "z1"]].to_numpy(), res.model.causal_indicators_
    )
    assert res.causal_map["task"].tolist() == [f"t{t}" for t in range(6)]
    meta = read_manifest(out / "model")["metadata"]
    assert meta == {
        "layout": "long", "features": ["a", "b"], "targets": ["v"],
        "task_col": "task", "id_col": None, "data_file": str(long_csv),
        "n_latents": 2, "stage2_only": True, "seed": 0, "max_epochs": None,
    }  # fmt: skip
    Z = load_model(out / "model").transform(
        pd.read_csv(long_csv)[["a", "b"]].iloc[res.latents["row"]]
    )
    np.testing.assert_allclose(Z, res.latents[["z0", "z1"]].to_numpy(), rtol=1e-12)


def test_fit_progress_lines(long_csv, tmp_path, capsys):
    fit(long_csv, target="v", task_col="task", stage2_only=True, seeds=2,
        out=tmp_path / "o")  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"Reading {long_csv} ..."
    assert err[1] == (
        "  long layout: 150 rows, 2 features, 6 tasks, 150 observed targets"
    )
    assert "  note: n_latents not given; using 2." in err
    assert any(line.startswith("  note: MTLCM's default start") for line in err)
    assert "Fitting MTLCM, seed 1 (2/2) ..." in err
    assert any(line.startswith("  cross-seed MCC of the latents: ") for line in err)
    assert err[-1].startswith("Wrote latents.csv, causal_map.csv, ")
    report = (tmp_path / "o" / "report.md").read_text()
    assert "Agreement across seeds" in report


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"seeds": 0}, "seeds must be a positive integer; got 0."),
        ({"n_latents": True}, "n_latents must be a positive integer; got True."),
        ({"max_epochs": 2.5}, "max_epochs must be a positive integer; got 2.5."),
    ],
)
def test_fit_checks_its_integers(long_csv, tmp_path, kwargs, message):
    with pytest.raises(ValueError) as exc:
        fit(long_csv, target="v", task_col="task", out=tmp_path / "o", **kwargs)
    assert str(exc.value) == message
    assert not (tmp_path / "o").exists()


def test_model_data_errors_name_the_file(long_csv, tmp_path):
    with pytest.raises(ir.DataError) as exc:
        fit(long_csv, target="v", task_col="task", stage2_only=True, n_latents=3,
            out=tmp_path / "o", progress=False)  # fmt: skip
    assert str(exc.value).startswith(
        f"{long_csv}: n_latents=3 exceeds the number of input features (n_features=2)"
    )
    assert not (tmp_path / "o").exists()


def test_transform_into_a_folder(long_csv, tmp_path, capsys):
    res = fit(long_csv, target="v", task_col="task", stage2_only=True,
              out=tmp_path / "fit", progress=False)  # fmt: skip
    dest = tmp_path / "dest"
    dest.mkdir()
    frame = transform(tmp_path / "fit" / "model", long_csv, dest, progress=True)
    pd.testing.assert_frame_equal(frame, res.latents)
    pd.testing.assert_frame_equal(pd.read_csv(dest / "latents.csv"), res.latents)
    err = capsys.readouterr().err
    assert f"Loading model {tmp_path / 'fit' / 'model'} ..." in err
    assert f"Wrote 150 rows x 2 latents to {dest / 'latents.csv'}." in err


# ------------------------------------------------------------ --out safety


def _never_read(*args, **kwargs):
    raise AssertionError("the table was read before --out was checked")


def test_out_is_checked_before_any_work(long_csv, tmp_path, monkeypatch):
    monkeypatch.setattr(fitting_module, "load_table", _never_read)
    a_file = tmp_path / "results.csv"
    a_file.write_text("keep")
    with pytest.raises(ir.DataError, match="exists and is not a folder"):
        fit(long_csv, target="v", task_col="task", out=a_file, progress=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ir.DataError, match=r"did not write \(notes.txt\)"):
        fit(long_csv, target="v", task_col="task", out=mine, progress=False)
    assert a_file.read_text() == "keep" and (mine / "notes.txt").read_text() == "keep"


def test_a_fit_that_dies_while_writing_changes_no_output(
    long_csv, tmp_path, monkeypatch
):
    out = tmp_path / "fit"
    kw = dict(target="v", task_col="task", stage2_only=True, out=out, progress=False)
    fit(long_csv, seed=0, **kw)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def crash(summary):
        raise KeyboardInterrupt  # as a kill between the latents and the report

    monkeypatch.setattr(fitting_module, "render_report", crash)
    with pytest.raises(KeyboardInterrupt):
        fit(long_csv, seed=1, **kw)
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before  # the old latents, map and report, together
    assert read_manifest(out / "model")["metadata"]["seed"] == 0
    assert not list(tmp_path.glob(".fit.*"))  # nothing left beside it
    monkeypatch.undo()
    res = fit(long_csv, seed=1, **kw)  # a later fit replaces them all at once
    assert read_manifest(out / "model")["metadata"]["seed"] == 1
    assert (out / "report.md").read_bytes() != before["report.md"]  # seed 1's
    pd.testing.assert_frame_equal(pd.read_csv(out / "latents.csv"), res.latents)


def test_mtlcm_budget_is_set_from_fit_and_its_warning_is_readable(long_csv, tmp_path):
    out = tmp_path / "fit"
    res = fit(long_csv, target="v", task_col="task", stage2_only=True, out=out,
              max_iter=1, n_init=2, progress=False)  # fmt: skip
    saved = load_model(out / "model")
    assert (saved.max_iter, saved.n_init) == (1, 2)
    assert len(saved.restart_log_likelihoods_) == 2
    report = (out / "report.md").read_text()
    assert "ConvergenceWarning" in report and "--max-iter, --n-init" in report
    assert "ABNORMAL" not in report  # scipy's raw message is not passed on
    assert res.model.max_iter == 1


def test_the_cli_passes_max_iter_and_n_init(long_csv, tmp_path):
    from identrep.cli import main

    out = tmp_path / "cli"
    argv = ["fit", str(long_csv), "--target", "v", "--task-col", "task"]
    argv += ["--stage2-only", "--max-iter", "5", "--n-init", "2", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    model = load_model(out / "model")
    assert (model.max_iter, model.n_init) == (5, 2)
    assert "--max-iter 5 --n-init 2" in (out / "report.md").read_text()


def test_cleaning_leftovers_never_touches_the_users_own_hidden_files(
    long_csv, tmp_path
):
    keep = [tmp_path / ".fit.bak", tmp_path / ".fit.notes"]
    for p in keep:
        p.write_text("mine")
    stale = tmp_path / ".fit.abc123.tmp"  # what a killed fit leaves
    stale.mkdir()
    fit(long_csv, target="v", task_col="task", stage2_only=True,
        out=tmp_path / "fit", progress=False)  # fmt: skip
    assert all(p.read_text() == "mine" for p in keep)
    assert not stale.exists()


def _wide_table(tmp_path, n_features=3, n_tasks=12, seed=0):
    """A wide table: a row-number column first, features f*, targets y*."""
    rng = np.random.default_rng(seed)
    n = 60
    Z = rng.normal(size=(n, 2))
    X = np.tanh(Z @ rng.normal(size=(2, n_features))) + 0.05 * rng.normal(
        size=(n, n_features)
    )
    Y = Z @ rng.normal(size=(2, n_tasks)) + 0.1 * rng.normal(size=(n, n_tasks))
    df = pd.DataFrame({"row_id": np.arange(100, 100 + n)})
    for j in range(n_features):
        df[f"f{j}"] = X[:, j]
    for k in range(n_tasks):
        df[f"y{k}"] = Y[:, k]
    path = tmp_path / "wide.csv"
    df.to_csv(path, index=False)
    return path, [f"y{k}" for k in range(n_tasks)]


def test_a_row_number_column_is_left_out_and_n_latents_fits_inputs(tmp_path, capsys):
    path, targets = _wide_table(tmp_path)
    res = fit(path, target=targets, out=tmp_path / "o", max_epochs=3)
    err = capsys.readouterr().err
    assert "note: Column(s) ['row_id'] number the rows" in err  # before: an input
    assert list(res.model.feature_names_in_) == ["f0", "f1", "f2"]
    assert "note: n_latents not given; using 3." in err  # before: 10 > 3 inputs
    assert res.latents.filter(like="z").shape[1] == 3
    assert "number the rows" in (tmp_path / "o" / "report.md").read_text()


def test_too_many_latents_are_refused_before_any_fit(tmp_path, monkeypatch):
    path, targets = _wide_table(tmp_path)
    monkeypatch.setattr(fitting_module, "_make_model", _never_read)
    with pytest.raises(ir.DataError, match=r"wide.csv: n_latents=1000 exceeds the "
                       r"number of input features \(n_features=3\)"):  # fmt: skip
        fit(path, target=targets, out=tmp_path / "o", n_latents=1000)


def test_stage2_only_n_latents_follows_the_rank_of_the_inputs(tmp_path, capsys):
    path, targets = _wide_table(tmp_path, n_features=3)
    df = pd.read_csv(path)
    df["f3"] = df["f0"] + 2 * df["f1"]  # collinear: within-task rank 3 of 4
    df.to_csv(path, index=False)
    res = fit(path, target=targets, out=tmp_path / "o", stage2_only=True)
    assert "note: n_latents not given; using 3." in capsys.readouterr().err
    assert res.latents.filter(like="z").shape[1] == 3
    with pytest.raises(ir.DataError, match=r"n_latents=4 exceeds the rank of the "
                       r"inputs centred within tasks \(3\)"):  # fmt: skip
        fit(path, target=targets, out=tmp_path / "o2", stage2_only=True, n_latents=4)


def test_the_report_gives_heldout_r2_seed_stability_and_input_correlations(
    tmp_path,
):
    from identrep.tabular.report import CROSS_SEED_HELP

    path, targets = _wide_table(tmp_path)
    fit(path, target=targets, out=tmp_path / "o", n_latents=2, seeds=2,
        max_epochs=30, progress=False)  # fmt: skip
    md = (tmp_path / "o" / "report.md").read_text()
    for text in (
        "| stage 1 held-out R^2 per task | median ",  # before: in-sample R^2 only
        "| task | causal latents | held-out R^2 | same set in the other 1 seed(s) |",
        "| causal sets (latents matched to seed 0) | ",
        "## Latents and inputs",
        "| z0 | f",
        CROSS_SEED_HELP,
    ):
        assert text in md, text
    row = next(ln for ln in md.splitlines() if ln.startswith("| y0 |"))
    r2, same = row.split(" | ")[2:4]
    assert -10 < float(r2) <= 1 and same.rstrip(" |") in ("0%", "100%")


def test_fit_shows_training_progress_in_a_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IDENTREP_PROGRESS_SECONDS", "3600")
    path, targets = _wide_table(tmp_path)
    fit(path, target=targets, out=tmp_path / "o", n_latents=2, max_epochs=3)
    err = capsys.readouterr().err  # not a terminal: plain lines
    assert "MTRN[joint]: 1/3 epochs, train " in err  # before: only on a terminal
    assert "TaskIdentifiable: stage 2 of 2, MTLCM" in err and "\r" not in err
