"""Tests of utils/validation.py: every validator message and both data layouts."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from identrep.exceptions import DataError
from identrep.utils.validation import (
    MultiTaskArrays,
    check_array,
    check_multitask,
    check_task_ids,
    encode_task_ids,
    long_to_wide,
    wide_to_long,
)


@pytest.fixture
def long_data(rng):
    """12 samples, 3 tasks of 4 samples (interleaved), 2 features."""
    X = rng.normal(size=(12, 2))
    y = rng.normal(size=12)
    t = np.array([2, 0, 1] * 4)
    return X, y, t


# ------------------------------------------------------------------- check_array


def test_check_array_converts_lists_pandas_and_dtype():
    out = check_array([[1, 2], [3, 4]], "X")
    assert out.dtype == np.float64 and out.shape == (2, 2)
    df = pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4]})
    np.testing.assert_array_equal(check_array(df), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(check_array([True, False], ndim=1), [1.0, 0.0])
    np.testing.assert_array_equal(check_array(np.array([["1", "2.5"]])), [[1, 2.5]])
    assert check_array([[1, 2]], dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize(
    "value,match",
    [
        (
            np.nan,
            r"X contains 1 non-finite \(NaN or inf\) value\(s\) \(first at row 2, "
            r"column 1\); drop or impute",
        ),
        (np.inf, r"X contains 1 non-finite"),
        (-np.inf, r"X contains 1 non-finite"),
    ],
)
def test_check_array_non_finite(value, match):
    X = np.ones((4, 3))
    X[2, 1] = value
    with pytest.raises(DataError, match=match):
        check_array(X, "X")


def test_check_array_counts_and_locates_1d():
    y = np.arange(6.0)
    y[[3, 5]] = np.nan
    with pytest.raises(DataError, match=r"y contains 2 non-finite .*first at index 3"):
        check_array(y, "y", ndim=1)


def test_check_array_allow_nan_still_rejects_inf():
    Y = np.ones((3, 2))
    Y[0, 0] = np.nan
    np.testing.assert_array_equal(
        np.isnan(check_array(Y, "Y", allow_nan=True)), np.isnan(Y)
    )
    Y[1, 1] = np.inf
    with pytest.raises(DataError, match=r"Y contains 1 infinite value\(s\)"):
        check_array(Y, "Y", allow_nan=True)


def test_check_array_shape_errors():
    with pytest.raises(
        DataError,
        match=r"X must be a 2-D array .* got shape \(5,\)\. "
        r"Reshape a single feature with X\.reshape\(-1, 1\)",
    ):
        check_array(np.ones(5), "X")
    with pytest.raises(DataError, match=r"y must be a 1-D array .* got shape \(5, 1\)"):
        check_array(np.ones((5, 1)), "y", ndim=1)
    with pytest.raises(DataError, match=r"X must have at least 3 row\(s\); got 2"):
        check_array(np.ones((2, 2)), "X", min_rows=3)
    with pytest.raises(DataError, match=r"X must have at least one column; got shape"):
        check_array(np.ones((4, 0)), "X")
    with pytest.raises(DataError, match=r"X could not be converted to an array"):
        check_array([[1.0, 2.0], [3.0]], "X")


def test_check_array_non_numeric_is_type_error():
    with pytest.raises(TypeError, match=r"X must be numeric; got dtype <U"):
        check_array(np.array([["a", "b"], ["c", "d"]]), "X")
    with pytest.raises(TypeError, match=r"X must be numeric; got dtype object"):
        check_array(np.array([[object(), 1.0]], dtype=object), "X")


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_check_array_rejects_complex():
    with pytest.raises(TypeError, match="X must be"):
        check_array(np.ones((3, 2)) + 1j, "X")


# -------------------------------------------------------------- encode_task_ids


def test_encode_task_ids_ints_strings_floats_pandas():
    codes, labels = encode_task_ids([5, 2, 5, 9], 4)
    assert codes.tolist() == [1, 0, 1, 2] and labels.tolist() == [2, 5, 9]
    assert codes.dtype == np.int64
    codes, labels = encode_task_ids(np.array(["b", "a", "b"]), 3)
    assert codes.tolist() == [1, 0, 1] and labels.tolist() == ["a", "b"]
    np.testing.assert_array_equal(labels[codes], ["b", "a", "b"])
    codes, labels = encode_task_ids(np.array([1.0, 0.0, 1.0]), 3)
    assert codes.tolist() == [1, 0, 1] and labels.dtype.kind == "i"
    codes, _ = encode_task_ids(pd.Series(["x", "y", "x"]), 3)
    assert codes.tolist() == [0, 1, 0]


def test_encode_task_ids_errors():
    with pytest.raises(
        DataError,
        match=r"task_ids must have shape \(4,\) to match X; "
        r"got \(3,\)",
    ):
        encode_task_ids([0, 1, 2], 4)
    with pytest.raises(DataError, match=r"got \(1, 3\)"):
        encode_task_ids([[0, 1, 2]], 3)
    with pytest.raises(DataError, match="task_ids contains NaN or inf"):
        encode_task_ids([0.0, np.nan], 2)
    with pytest.raises(TypeError, match=r"non-integral floats such as .*1\.5"):
        encode_task_ids([0.0, 1.5], 2)
    with pytest.raises(TypeError, match="task_ids must be integers or string labels"):
        encode_task_ids(np.array([1 + 1j, 2j]), 2)


def test_encode_task_ids_mixed_labels_message_names_input():
    with pytest.raises(TypeError, match="task_ids"):
        encode_task_ids(np.array([1, "a"], dtype=object), 2)


# --------------------------------------------------------------- check_task_ids


def test_check_task_ids_maps_to_known_codes():
    known = np.array([3, 7, 11])
    assert check_task_ids([11, 3, 3], 3, known).tolist() == [2, 0, 0]
    assert check_task_ids(np.array([7.0, 11.0]), 2, known).tolist() == [1, 2]
    assert check_task_ids(["b"], 1, np.array(["a", "b"])).tolist() == [1]
    # wide-layout tasks keep the column order, which need not be sorted
    cols = np.array(["y0", "y1", "y2", "y10"])
    assert check_task_ids(["y10", "y2", "y0"], 3, cols).tolist() == [3, 2, 0]
    with pytest.raises(DataError, match="unseen during fit"):
        check_task_ids(["y3"], 1, cols)


@pytest.mark.parametrize(
    "ids,known,match",
    [
        (
            [3, 5],
            [3, 7],
            r"1 task id\(s\) unseen during fit \(first: \[5\]\); the "
            r"model knows 2 tasks \(\[3, 7\]\)",
        ),
        ([99, 1], [3, 7], r"2 task id\(s\) unseen during fit \(first: \[1, 99\]\)"),
        (["c"], ["a", "b"], r"unseen during fit \(first: \['c'\]\)"),
        ([0], ["a", "b"], "unseen during fit"),
        ([0], list(range(1, 8)), r"knows 7 tasks \(\[1, 2, 3, 4, 5\], \.\.\.\)"),
    ],
)
def test_check_task_ids_unseen(ids, known, match):
    with pytest.raises(DataError, match=match):
        check_task_ids(np.array(ids), len(ids), np.array(known))


def test_check_task_ids_shape():
    with pytest.raises(DataError, match=r"task_ids must have shape \(3,\) to match X"):
        check_task_ids([0, 1], 3, np.array([0, 1]))


def test_check_task_ids_non_integral_float_is_unseen():
    with pytest.raises(DataError, match="unseen"):
        check_task_ids(np.array([0.5, 1.0]), 2, np.array([0, 1]))


# --------------------------------------------------------------- check_multitask


def test_check_multitask_long(long_data):
    X, y, t = long_data
    d = check_multitask(X, y, t)
    assert isinstance(d, MultiTaskArrays) and d.layout == "long"
    assert d.n_tasks == 3 and d.n_obs == 12 and d.counts().tolist() == [4, 4, 4]
    np.testing.assert_array_equal(d.X[d.rows], X)
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.tasks[d.task_ids], t)
    # a (n, 1) target is accepted as 1-D
    np.testing.assert_array_equal(check_multitask(X, y[:, None], t).y, y)


def test_check_multitask_wide_with_missing_and_dataframe(rng):
    X = rng.normal(size=(5, 2))
    Y = pd.DataFrame({"b": [1, 2, 3, np.nan, 5.0], "a": [np.nan, 1, 2, 3, 4.0]})
    d = check_multitask(X, Y)
    assert d.layout == "wide" and d.tasks.tolist() == ["b", "a"]
    # task-major, rows ascending within each task
    assert d.task_ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert d.rows.tolist() == [0, 1, 2, 4, 1, 2, 3, 4]
    np.testing.assert_array_equal(d.y, [1, 2, 3, 5, 1, 2, 3, 4])
    assert d.X is not None and d.X.shape == (5, 2)  # X stored once, not per task
    d2 = check_multitask(X, Y.to_numpy())
    assert d2.tasks.tolist() == [0, 1]
    np.testing.assert_array_equal(d2.y, d.y)


def test_check_multitask_errors(long_data):
    X, y, t = long_data
    cases = [
        (dict(X=X, y=None, task_ids=t), r"y is required"),
        (dict(X=X, y=y, task_ids=None), r"task_ids is required when y is 1-D"),
        (
            dict(X=X, y=y[:-1], task_ids=t),
            r"y must have shape \(12,\) to match X; "
            r"got \(11,\)",
        ),
        (dict(X=X, y=y, task_ids=t[:-1]), r"task_ids must have shape \(12,\)"),
        (
            dict(X=X, y=np.ones((11, 3)), task_ids=None),
            r"Y must have one row per row "
            r"of X \(12\); got shape \(11, 3\)",
        ),
        (dict(X=X, y=np.ones((12, 2)), task_ids=t), r"y must be a 1-D array"),
        (dict(X=X[:, 0], y=y, task_ids=t), r"X must be a 2-D array"),
    ]
    for kwargs, match in cases:
        with pytest.raises(DataError, match=match):
            check_multitask(kwargs["X"], kwargs["y"], kwargs["task_ids"])


def test_check_multitask_too_few_samples(long_data):
    X, y, t = long_data
    t = t.copy()
    t[0] = 9  # task 9 now has a single sample
    with pytest.raises(
        DataError,
        match=r"at least 2 observed samples; task .*9.* has "
        r"1\. Drop such tasks",
    ):
        check_multitask(X, y, t)
    assert check_multitask(X, y, t, min_samples=1, check_constant=False).n_tasks == 4
    Y = np.full((12, 2), np.nan)
    Y[:, 0] = y  # task 1 entirely unobserved
    with pytest.raises(DataError, match=r"task .*1.* has 0"):
        check_multitask(X, Y)


def test_check_multitask_constant_target(long_data):
    X, y, t = long_data
    y = y.copy()
    y[t == 1] = 4.2
    with pytest.raises(
        DataError,
        match=r"The target of task .*1.* is constant "
        r"\(value 4\.2\).*Drop the task",
    ):
        check_multitask(X, y, t)
    assert check_multitask(X, y, t, check_constant=False).n_tasks == 3
    # a large offset with genuine variation is not constant
    y[t == 1] = 1e6 + np.arange(4)
    check_multitask(X, y, t)


def test_task_label_in_message_is_plain(long_data):
    X, y, t = long_data
    y = y.copy()
    y[t == 1] = 4.2
    with pytest.raises(DataError, match=r"The target of task 1 is constant"):
        check_multitask(X, y, t)


def test_check_multitask_nan_in_x_and_y(long_data):
    X, y, t = long_data
    X = X.copy()
    X[3, 1] = np.nan
    with pytest.raises(DataError, match=r"X contains 1 non-finite .*row 3, column 1"):
        check_multitask(X, y, t)
    assert np.isnan(check_multitask(X, y, t, allow_nan_X=True).X[3, 1])
    y = y.copy()
    y[5] = np.inf
    with pytest.raises(DataError, match=r"y contains 1 non-finite .*index 5"):
        check_multitask(long_data[0], y, t)


# ---------------------------------------------------------- long <-> wide layout


def test_long_to_wide_and_back(long_data):
    X, y, t = long_data
    Xw, Y = long_to_wide(X, y, t)
    np.testing.assert_array_equal(Xw, X)
    assert Y.shape == (12, 3)
    assert (~np.isnan(Y)).sum(axis=1).tolist() == [1] * 12
    np.testing.assert_array_equal(Y[np.arange(12), t], y)
    Xl, yl, tl = wide_to_long(Xw, Y)
    # wide_to_long is task-major: compare after the same stable ordering
    order = np.argsort(t, kind="stable")
    np.testing.assert_array_equal(Xl, X[order])
    np.testing.assert_array_equal(yl, y[order])
    np.testing.assert_array_equal(tl, t[order])


def test_wide_to_long_repeats_shared_rows(rng):
    X = rng.normal(size=(3, 2))
    Y = np.array([[1.0, 4.0], [2.0, np.nan], [3.0, 6.0]])
    Xl, yl, tl = wide_to_long(X, Y)
    np.testing.assert_array_equal(Xl, X[[0, 1, 2, 0, 2]])
    np.testing.assert_array_equal(yl, [1, 2, 3, 4, 6])
    np.testing.assert_array_equal(tl, [0, 0, 0, 1, 1])


# ------------------------------------------------- labels at the edges of int64


def test_float_task_ids_beyond_int64_stay_distinct_and_exact():
    from identrep.utils.validation import encode_task_ids

    ids = np.array([2.0**63, 2.0**63 + 2**11, 2.0**64 - 2**12, 5.0])
    codes, labels = encode_task_ids(ids[[0, 1, 2, 3, 3, 0]], 6)
    assert len(labels) == 4  # none collapse into one task
    assert [int(v) for v in labels] == [5, 2**63, 2**63 + 2**11, 2**64 - 2**12]
    np.testing.assert_array_equal(codes, [1, 2, 3, 0, 0, 1])
    huge = encode_task_ids(np.array([-1.0, 2.0**70]), 2)[1]
    assert [int(v) for v in huge] == [-1, 2**70]


def test_wide_targets_with_duplicate_column_names_are_refused():
    Y = pd.DataFrame(np.arange(12.0).reshape(4, 3) ** 2, columns=list("abb"))
    with pytest.raises(DataError, match=r"duplicate column names \['b'\]"):
        check_multitask(np.ones((4, 2)), Y)


@pytest.mark.parametrize("unit", [1e-300, 1e-20, 1.0, 1e20, 1e300])
def test_the_constant_target_check_does_not_depend_on_units(unit):
    rng = np.random.default_rng(0)
    X, t = rng.standard_normal((40, 2)), np.repeat([0, 1], 20)
    y = rng.standard_normal(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way
        data = check_multitask(X, y * unit, t)
    assert data.n_tasks == 2
    flat = np.where(t == 1, 3.0, y) * unit  # task 1 constant at any scale
    with pytest.raises(DataError, match="The target of task 1 is constant"):
        check_multitask(X, flat, t)
