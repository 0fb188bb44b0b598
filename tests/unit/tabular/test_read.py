"""Reading and checking a user's table (:mod:`identrep.tabular.read`)."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from identrep.exceptions import DataError
from identrep.tabular import TableData, load_table, read_table
from identrep.tabular.read import load_inputs


@pytest.fixture
def wide(tmp_path):
    """6 rows, inputs a, b, a text column, an id column and three tasks."""
    df = pd.DataFrame(
        {
            "id": ["r0", "r1", "r2", "r3", "r4", "r5"],
            "a": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
            "b": [1.0, 0.0, 1.0, 2.0, 0.5, 3.0],
            "site": ["x", "y", "x", "y", "x", "y"],
            "y0": [1.0, np.nan, 2.0, np.nan, 3.0, 1.5],
            "y1": [np.nan, 4.0, 1.0, 2.0, np.nan, np.nan],
            "y2": [0.5, 0.5, np.nan, 1.0, np.nan, 2.0],
        }
    )
    path = tmp_path / "wide.csv"
    df.to_csv(path, index=False)
    return path, df


@pytest.fixture
def long(tmp_path):
    """Three distinct inputs (ids u0..u2) measured for two or three tasks."""
    df = pd.DataFrame(
        {
            "id": ["u0", "u1", "u0", "u2", "u1", "u2", "u0"],
            "a": [0.0, 1.0, 0.0, 2.0, 1.0, 2.0, 0.0],
            "b": [5.0, 6.0, 5.0, 7.0, 6.0, 7.0, 5.0],
            "task": [3, 3, 7, 7, 9, 9, 9],
            "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, np.nan],
        }
    )
    path = tmp_path / "long.csv"
    df.to_csv(path, index=False)
    return path, df


# ----------------------------------------------------------------- read_table
def test_read_table_csv_tsv_and_string_column_names(tmp_path):
    df = pd.DataFrame({1: [1.0, 2.0], "b": [3.0, 4.0]})
    df.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    got = read_table(tmp_path / "t.tsv")
    assert list(got.columns) == ["1", "b"]
    np.testing.assert_array_equal(got.to_numpy(), df.to_numpy())


def test_read_table_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="No such data file"):
        read_table(tmp_path / "none.csv")
    with pytest.raises(DataError, match="is a folder; expected a CSV or Parquet"):
        read_table(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="is empty: expected a header line"):
        read_table(tmp_path / "empty.csv")
    (tmp_path / "head.csv").write_text("x0,x1\n")
    with pytest.raises(DataError, match=r"has a header \(x0, x1\) but no data rows"):
        read_table(tmp_path / "head.csv")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "fastparquet", None)
    (tmp_path / "t.parquet").write_bytes(b"")
    with pytest.raises(ImportError, match=r'pip install "identrep\[parquet\]"'):
        read_table(tmp_path / "t.parquet")


# ----------------------------------------------------------------- wide layout
def test_load_table_wide(wide):
    path, df = wide
    tab = load_table(path, target=["y0", "y1", "y2"], id_col="id")
    assert isinstance(tab, TableData)
    assert tab.layout == "wide" and tab.task_col is None
    assert tab.features == ["a", "b"] and tab.ignored == ["site"]
    np.testing.assert_array_equal(tab.X, df[["a", "b"]].to_numpy())
    assert list(tab.Y.columns) == ["y0", "y1", "y2"]
    np.testing.assert_array_equal(tab.unit_rows, np.arange(6))
    assert tab.ids.tolist() == df["id"].tolist()
    assert tab.tasks.tolist() == ["y0", "y1", "y2"]
    assert tab.task_counts().tolist() == [4, 3, 4] and tab.n_obs == 11
    X, Y, t = tab.fit_args()  # X named by feature, so estimators record the names
    assert list(X.columns) == ["a", "b"] and Y is tab.Y and t is None
    np.testing.assert_array_equal(X.to_numpy(), tab.X)


def test_load_table_given_features(wide):
    path, _ = wide
    tab = load_table(path, target=["y0", "y1"], features=["b"])
    assert tab.features == ["b"] and tab.ignored == []
    assert tab.X.shape == (6, 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target": []}, "Give at least one target column"),
        ({"target": ["y0", "y0"]}, "--target lists a column twice"),
        ({"target": ["y0", "nope"]}, "--target column(s) 'nope' not found"),
        ({"target": ["y0", "y1"], "id_col": "nope"}, "--id-col column(s) 'nope'"),
        ({"target": ["y0", "y1"], "task_col": "site"}, "takes one --target column"),
        ({"target": ["y0", "y1"], "id_col": "y1"}, "must differ"),
        ({"target": ["y0"]}, "gives a single task"),
        ({"target": ["y0", "y1"], "features": ["a", "y1"]}, "one role only"),
        ({"target": ["y0", "y1"], "features": ["site"]},
         "feature column 'site' has a non-numeric value 'x' at line 2 of the file "
         "(row index 0) (6 such value(s) in the column)"),
        ({"target": ["y0", "site"], "features": ["a"]},
         "target column 'site' has a non-numeric value 'x' at line 2 of the file "
         "(row index 0) (6 such value(s) in the column). Target columns must hold "
         "numbers; leave a cell empty for 'not measured'."),
    ],
)  # fmt: skip
def test_load_table_wide_errors(wide, kwargs, message):
    path, _ = wide
    with pytest.raises(DataError) as exc:
        load_table(path, **kwargs)
    assert message in str(exc.value)


def test_load_table_wide_value_errors(wide, tmp_path):
    _, df = wide
    d = df.copy()
    d.loc[2, "y1"] = np.inf
    d.to_csv(p := tmp_path / "inf.csv", index=False)
    with pytest.raises(DataError, match=r"'y1' has an infinite value at line 4"):
        load_table(p, target=["y0", "y1", "y2"])
    d = df.copy()
    d.loc[[1, 2, 3], "y1"] = np.nan
    d.to_csv(p := tmp_path / "few.csv", index=False)
    with pytest.raises(DataError, match="'y1' has 0 observed value.*at least 2"):
        load_table(p, target=["y0", "y1", "y2"])
    d = df.copy()
    d.loc[3, "b"] = np.inf
    d.to_csv(p := tmp_path / "infx.csv", index=False)
    with pytest.raises(DataError) as exc:
        load_table(p, target=["y0", "y1", "y2"])
    msg = str(exc.value)
    assert "(first, infinite, at line 5 of the file (row index 3))" in msg
    assert "'b' was taken as an input because it is numeric" in msg
    d = df[["site", "y0", "y1"]]
    d.to_csv(p := tmp_path / "nofeat.csv", index=False)
    with pytest.raises(DataError, match="no numeric input column"):
        load_table(p, target=["y0", "y1"])
    d = df.astype({"b": object})
    d.loc[1, "b"] = "1,5"  # a stray text value in a numeric column: not ignored
    d.to_csv(p := tmp_path / "typo.csv", index=False)
    with pytest.raises(DataError, match="'b' has a non-numeric value '1,5'"):
        load_table(p, target=["y0", "y1", "y2"])


# ----------------------------------------------------------------- long layout
def test_load_table_long(long):
    path, df = long
    tab = load_table(path, target="v", task_col="task", id_col="id")
    assert tab.layout == "long" and tab.Y is None
    assert tab.features == ["a", "b"]
    assert tab.n_dropped == 1  # the row without a value
    np.testing.assert_array_equal(tab.obs_rows, np.arange(6))
    assert tab.task_ids.dtype == np.int64  # whole-number labels stay integers
    assert tab.tasks.tolist() == [3, 7, 9] and tab.task_counts().tolist() == [2, 2, 2]
    np.testing.assert_array_equal(tab.unit_rows, [0, 1, 3])
    assert tab.ids.tolist() == ["u0", "u1", "u2"]
    X, y, t = tab.fit_args()
    np.testing.assert_array_equal(X, df[["a", "b"]].to_numpy()[:6])
    np.testing.assert_array_equal(y, df["v"].to_numpy()[:6])
    np.testing.assert_array_equal(t, [3, 3, 7, 7, 9, 9])
    # without an id column, inputs are told apart by their feature values
    tab = load_table(path, target="v", task_col="task")
    np.testing.assert_array_equal(tab.unit_rows, [0, 1, 3])
    assert tab.ids is None


def test_load_table_long_errors(long, tmp_path):
    path, df = long
    d = df.copy()
    d.loc[4, "a"] = 9.0  # u1 with other features
    d.to_csv(p := tmp_path / "id.csv", index=False)
    with pytest.raises(DataError) as exc:
        load_table(p, target="v", task_col="task", id_col="id")
    assert (
        "rows with the same 'id' value 'u1' have different features (line 3 of the "
        "file (row index 1) and line 6 of the file (row index 4))" in str(exc.value)
    )
    d = df.copy()
    d.loc[2, "task"] = np.nan
    d.to_csv(p := tmp_path / "task.csv", index=False)
    with pytest.raises(DataError, match="task column 'task' is empty at line 4"):
        load_table(p, target="v", task_col="task")
    d = df.assign(task="only")
    d.to_csv(p := tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match="has a single value 'only'"):
        load_table(p, target="v", task_col="task")
    d = df.assign(v=np.nan)
    d.to_csv(p := tmp_path / "none.csv", index=False)
    with pytest.raises(DataError, match="has no task with a target value"):
        load_table(p, target="v", task_col="task")
    d = df.copy()
    d.loc[0, "task"] = 11
    d.to_csv(p := tmp_path / "few.csv", index=False)
    with pytest.raises(DataError, match=r"task 3 \(column 'task'\) has 1 row\(s\)"):
        load_table(p, target="v", task_col="task")


def test_parquet_positions_are_row_indices(long, tmp_path):
    pytest.importorskip("pyarrow")
    _, df = long
    d = df.assign(a=df["a"].astype(str))
    d.loc[2, "a"] = "oops"
    d.to_parquet(p := tmp_path / "t.parquet")
    with pytest.raises(DataError, match="'oops' at row index 2 "):
        load_table(p, target="v", task_col="task")


# ----------------------------------------------------------------- load_inputs
def test_load_inputs_layouts(long, wide):
    path, df = long
    X, ids, id_col, rows = load_inputs(
        path, features=["b", "a"], n_features_in=2, layout="long", task_col="task",
        id_col="id",
    )  # fmt: skip
    np.testing.assert_array_equal(rows, [0, 1, 3])
    np.testing.assert_array_equal(X, df[["b", "a"]].to_numpy()[[0, 1, 3]])
    assert ids.tolist() == ["u0", "u1", "u2"] and id_col == "id"
    # a long model on a table without its task column: one row per data row
    wpath, wdf = wide
    X, ids, id_col, rows = load_inputs(
        wpath, features=["a"], n_features_in=1, layout="long", task_col="task",
        id_col="nope",
    )  # fmt: skip
    assert rows is None and ids is None and id_col is None
    np.testing.assert_array_equal(X, wdf[["a"]].to_numpy())


def test_load_inputs_errors(wide):
    path, _ = wide
    with pytest.raises(DataError, match="model feature column\\(s\\) 'c' not found"):
        load_inputs(path, features=["a", "c"], n_features_in=2)
    # no saved names: every numeric column (a, b, y0, y1, y2) must match the model
    with pytest.raises(DataError, match="expects 3 inputs; the file has 5 numeric"):
        load_inputs(path, features=None, n_features_in=3)


def test_uint64_task_labels_stay_positive(tmp_path):
    big = np.array([2**63 + 10, 2**64 - 2**12, 5], dtype=np.uint64)
    a = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0]  # not a row number
    df = pd.DataFrame({"a": a, "task": np.repeat(big, 3)})
    df["v"] = np.arange(9.0) ** 2
    df.to_csv(tmp_path / "t.csv", index=False)
    tab = load_table(tmp_path / "t.csv", target="v", task_col="task")
    assert sorted(int(v) for v in tab.tasks) == sorted(int(v) for v in big)
