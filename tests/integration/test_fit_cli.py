"""`identrep fit` / `identrep transform` on a researcher's own tables."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

import identrep as ir
from identrep.cli import main
from identrep.persistence import load_model, read_manifest

EPOCHS = ["--max-epochs", "3"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Small wide, long and Parquet tables from the synthetic processes."""
    root = tmp_path_factory.mktemp("tables")
    d = ir.datasets.make_nonlinear_tasks(
        n_tasks=6, n_samples=30, n_latents=2, n_causal=1, n_observed=5, random_state=0
    )
    X, Y = d.to_wide()
    xcols = [f"x{j}" for j in range(X.shape[1])]
    ycols = [f"y{t}" for t in range(Y.shape[1])]
    wide = pd.DataFrame(X, columns=xcols)
    wide.insert(0, "sample", [f"s{i}" for i in range(len(wide))])
    wide["origin"] = "lab A"  # a text column: left out of the default inputs
    for t, c in enumerate(ycols):
        wide[c] = Y[:, t]
    # every row also measured for the next task: rows with two targets
    nxt = (d.task_ids + 1) % Y.shape[1]
    for i, t in enumerate(nxt):
        wide.loc[i, ycols[t]] = 0.5 * d.y[i] + X[i, 0]
    wide.to_csv(root / "wide.csv", index=False)
    long = wide.melt(
        id_vars=["sample", *xcols], value_vars=ycols, var_name="task", value_name="v"
    ).dropna(subset=["v"])
    long = long.sample(frac=1.0, random_state=0).reset_index(drop=True)
    long.to_csv(root / "long.csv", index=False)

    lin = ir.datasets.make_linear_tasks(
        n_tasks=10, n_samples=40, n_latents=3, n_causal=1, random_state=0
    )
    lt = pd.DataFrame(lin.X, columns=["a", "b", "c"])
    lt["assay"] = [f"assay{t}" for t in lin.task_ids]
    lt["value"] = lin.y
    lt["noise"] = np.random.default_rng(0).standard_normal(len(lt))
    lt.to_parquet(root / "linear.parquet")
    return {
        "root": root,
        "wide": root / "wide.csv",
        "long": root / "long.csv",
        "parquet": root / "linear.parquet",
        "xcols": xcols,
        "ycols": ycols,
        "n_rows": len(wide),
    }


def _csv(path):
    return pd.read_csv(path)


def test_fit_wide_layout_writes_every_output(tables, tmp_path, capsys):
    out = tmp_path / "fit"
    argv = ["fit", str(tables["wide"]), "--target", *tables["ycols"]]
    argv += ["--id-col", "sample", "--n-latents", "2", "--seeds", "2", *EPOCHS]
    assert main([*argv, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "Cross-seed MCC of the latents" in captured.out
    assert "Fitting MTRN + MTLCM, seed 1 (2/2)" in captured.err  # progress on stderr
    for name in ("latents.csv", "causal_map.csv", "causal_map.png", "report.md"):
        assert (out / name).is_file(), name
    lat = _csv(out / "latents.csv")
    assert list(lat.columns) == ["sample", "z0", "z1"]
    assert len(lat) == tables["n_rows"]
    assert lat["sample"].iloc[3] == "s3"
    cm = _csv(out / "causal_map.csv")
    assert list(cm.columns) == ["task", "z0", "z1"]
    assert cm["task"].tolist() == tables["ycols"]
    assert ((cm[["z0", "z1"]] >= 0) & (cm[["z0", "z1"]] <= 1)).all().all()
    report = (out / "report.md").read_text()
    for text in ("## Data", "## Settings", "fit time", "log-likelihood",
                 "![causal map](causal_map.png)", "Agreement across seeds",
                 "'origin'"):  # fmt: skip
        assert text in report, text
    html = (out / "report.html").read_text()
    assert "<img alt='causal map' src='data:image/png;base64," in html
    manifest = read_manifest(out / "model")
    assert manifest["class"] == "TaskIdentifiable"
    assert manifest["feature_names"] == tables["xcols"]
    assert manifest["metadata"]["layout"] == "wide"

    # transform of the saved model reproduces latents.csv exactly
    new = tmp_path / "new.csv"
    assert main(["transform", str(out / "model"), str(tables["wide"]), "--out",
                 str(new)]) == 0  # fmt: skip
    pd.testing.assert_frame_equal(_csv(new), lat)
    Z = load_model(out / "model").transform(
        pd.read_csv(tables["wide"])[tables["xcols"]]
    )
    np.testing.assert_allclose(Z, lat[["z0", "z1"]].to_numpy(), rtol=1e-12)


def test_fit_long_layout_one_row_per_distinct_input(tables, tmp_path):
    out = tmp_path / "fit"
    argv = ["fit", str(tables["long"]), "--target", "v", "--task-col", "task"]
    argv += ["--id-col", "sample", "--n-latents", "2", *EPOCHS, "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    lat = _csv(out / "latents.csv")
    long = _csv(tables["long"])
    assert len(long) == 2 * tables["n_rows"]  # two tasks measured per input
    assert list(lat.columns) == ["sample", "z0", "z1"]
    assert len(lat) == tables["n_rows"]
    assert lat["sample"].tolist() == long["sample"].drop_duplicates().tolist()
    cm = _csv(out / "causal_map.csv")
    assert sorted(cm["task"]) == sorted(tables["ycols"])
    new = tmp_path / "new.csv"
    assert main(["transform", str(out / "model"), str(tables["long"]), "--out",
                 str(new), "--quiet"]) == 0  # fmt: skip
    pd.testing.assert_frame_equal(_csv(new), lat)


def test_fit_long_layout_without_id_identifies_inputs_by_features(tables, tmp_path):
    long = _csv(tables["long"]).drop(columns=["sample"])
    path = tmp_path / "long_noid.csv"
    long.to_csv(path, index=False)
    out = tmp_path / "fit"
    argv = ["fit", str(path), "--target", "v", "--task-col", "task"]
    assert main([*argv, "--n-latents", "2", *EPOCHS, "--quiet", "--out", str(out)]) == 0
    lat = _csv(out / "latents.csv")
    assert list(lat.columns) == ["row", "z0", "z1"]
    assert len(lat) == tables["n_rows"]
    first = long.drop_duplicates(subset=tables["xcols"]).index.to_numpy()
    np.testing.assert_array_equal(lat["row"].to_numpy(), first)


def test_fit_parquet_stage2_only_on_given_features(tables, tmp_path, capsys):
    out = tmp_path / "fit"
    argv = ["fit", str(tables["parquet"]), "--target", "value", "--task-col", "assay"]
    argv += ["--features", "a", "b", "c", "--stage2-only", "--seeds", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    lat = _csv(out / "latents.csv")
    assert list(lat.columns) == ["row", "z0", "z1", "z2"]  # K = n_features
    assert len(lat) == 400
    cm = _csv(out / "causal_map.csv")
    assert cm.shape == (10, 4)
    assert read_manifest(out / "model")["class"] == "MTLCM"
    # the linear process is recovered: compare with the truth
    truth = ir.datasets.make_linear_tasks(
        n_tasks=10, n_samples=40, n_latents=3, n_causal=1, random_state=0
    )
    assert ir.metrics.mcc(truth.Z, lat[["z0", "z1", "z2"]].to_numpy()) > 0.95
    assert "seeds usually agree exactly" in (out / "report.md").read_text()


def test_parquet_without_pyarrow_names_the_extra(tables, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    argv = ["fit", str(tables["parquet"]), "--target", "value", "--task-col", "assay"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert 'pip install "identrep[parquet]"' in capsys.readouterr().err


def test_report_without_matplotlib(tables, tmp_path, monkeypatch):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    out = tmp_path / "fit"
    argv = ["fit", str(tables["parquet"]), "--target", "value", "--task-col", "assay"]
    assert main([*argv, "--stage2-only", "--quiet", "--out", str(out)]) == 0
    assert not (out / "causal_map.png").exists()
    assert "matplotlib is not installed" in (out / "report.md").read_text()
    assert "<img" not in (out / "report.html").read_text()


# --------------------------------------------------------------- bad input
@pytest.fixture
def bad_tables(tables, tmp_path):
    wide = _csv(tables["wide"])
    long = _csv(tables["long"])
    paths = {}

    def save(name, frame):
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)

    w = wide.astype({"x2": object})
    w.loc[4, "x2"] = "12,5"
    save("text_value", w)
    w = wide.copy()
    w.loc[7, "x1"] = np.nan
    save("nan_feature", w)
    lo = long.copy()
    lo["task"] = "only"
    save("one_task", lo)
    lo = long.copy()
    lo.loc[lo.index[0], "task"] = "rare"
    save("few_rows", lo)
    paths["empty"] = tmp_path / "empty.csv"
    paths["empty"].write_text("")
    paths["header_only"] = tmp_path / "header_only.csv"
    paths["header_only"].write_text("x0,x1,y0,y1\n")
    return paths


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("wide", ["--target", "y0", "y_missing"], "'y_missing' not found"),
        ("wide", ["--target", "y0", "y1", "--features", "x0", "nope"], "'nope' not"),
        ("text_value", ["--target", "y0", "y1"],
         "column 'x2' has a non-numeric value '12,5' at line 6 of the file "
         "(row index 4)"),
        ("nan_feature", ["--target", "y0", "y1", "y2", "y3", "y4", "y5"],
         "feature column 'x1' has 1 missing or infinite value(s) (first, missing, "
         "at line 9 of the file (row index 7)"),
        ("one_task", ["--target", "v", "--task-col", "task"],
         "task column 'task' has a single value 'only'"),
        ("few_rows", ["--target", "v", "--task-col", "task"],
         "task 'rare' (column 'task') has 1 row(s)"),
        ("wide", ["--target", "y0"], "gives a single task"),
        ("empty", ["--target", "y0", "y1"], "is empty"),
        ("header_only", ["--target", "y0", "y1"], "but no data rows"),
    ],
)  # fmt: skip
def test_malformed_input_fails_with_a_clear_message(
    case, args, message, tables, bad_tables, tmp_path, capsys
):
    path = tables["wide"] if case == "wide" else bad_tables[case]
    rc = main(["fit", str(path), *args, *EPOCHS, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"identrep fit: error: {path}" in err
    assert message in err
    assert not (tmp_path / "o").exists()


def test_transform_errors(tables, tmp_path, capsys):
    assert main(["transform", str(tmp_path / "none"), str(tables["wide"]), "--out",
                 str(tmp_path / "z.csv")]) == 2  # fmt: skip
    assert "No saved model at" in capsys.readouterr().err
    out = tmp_path / "fit"
    argv = ["fit", str(tables["parquet"]), "--target", "value", "--task-col", "assay"]
    assert main([*argv, "--stage2-only", "--quiet", "--out", str(out)]) == 0
    capsys.readouterr()
    rc = main(["transform", str(out / "model"), str(tables["wide"]), "--out",
               str(tmp_path / "z.csv")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "model feature column(s) 'a', 'b', 'c', 'noise' not found" in err


def test_help_documents_layouts_and_outputs(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for word in ("--task-col", "--stage2-only", "wide", "long", "latents.csv"):
        assert word in text


def test_too_many_latents_exit_2_with_one_line_before_any_fit(tables, tmp_path, capsys):
    argv = ["fit", str(tables["wide"]), "--target", *tables["ycols"],
            "--n-latents", "1000", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("identrep fit: error: ")
    assert (
        "n_latents=1000 exceeds the number of input features (n_features=5)"
        in (err[-1])
    )  # before: MTRN trained 1000 latents, then "collinear features"
    assert not any(line.startswith("Fitting") for line in err)
    assert not (tmp_path / "o").exists()
