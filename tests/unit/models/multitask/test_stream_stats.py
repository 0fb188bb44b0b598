"""MTLCM statistics from chunks, files and Dask equal the in-memory statistics."""

from __future__ import annotations

import numpy as np
import pytest

import identrep as ir
from identrep.models.multitask._stats import task_statistics
from identrep.models.multitask._stream_stats import (
    StatisticsAccumulator,
    dask_task_statistics,
    table_chunks,
)
from identrep.utils.validation import check_multitask

FIELDS = ("n", "x_mean", "y_mean", "Sxx", "sxy", "syy")


@pytest.fixture(scope="module")
def data(seed):
    d = ir.datasets.make_linear_tasks(
        n_tasks=12, n_samples=30, n_latents=4, n_causal=2, random_state=seed
    )
    order = np.random.default_rng(seed).permutation(len(d.y))  # tasks interleaved
    return d.X[order] * 3.0 + 50.0, d.y[order], d.task_ids[order] * 7 + 100


def _reference(X, y, t):
    return task_statistics(check_multitask(X, y, t), x_unit=None, y_unit=None)


def _assert_equal(got, ref, rtol):
    for f in FIELDS:
        a = getattr(got, f) * (got.x_unit if f in ("x_mean",) else 1.0)
        b = getattr(ref, f) * (ref.x_unit if f in ("x_mean",) else 1.0)
        scale = np.abs(b).max()
        assert np.abs(a - b).max() <= rtol * scale, f


def test_chunks_in_any_order_equal_in_memory(data):
    X, y, t = data
    ref = _reference(X, y, t)
    acc = StatisticsAccumulator(ref.x_unit, ref.y_unit)
    for idx in np.array_split(np.arange(len(y)), 7):  # tasks spread over chunks
        acc.update(X[idx], y[idx], t[idx])
    stats, labels = acc.result()
    np.testing.assert_array_equal(labels, np.unique(t))
    # Chan's merges versus one pass per task: rounding only (observed 2e-15)
    _assert_equal(stats, ref, 1e-12)


def test_merging_accumulators_equals_one_pass(data):
    X, y, t = data
    half = len(y) // 2
    a = StatisticsAccumulator(1.0, 1.0).update(X[:half], y[:half], t[:half])
    b = StatisticsAccumulator(1.0, 1.0).update(X[half:], y[half:], t[half:])
    one = StatisticsAccumulator(1.0, 1.0).update(X, y, t).result()[0]
    _assert_equal(a.merge(b).result()[0], one, 1e-12)


def test_dask_statistics_equal_in_memory(data):
    """On a local cluster over loopback, threads only (no processes): fast."""
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    X, y, t = data
    ref = _reference(X, y, t)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        stats, labels = dask_task_statistics(
            da.from_array(X, chunks=(50, -1)),
            da.from_array(y, chunks=50),
            da.from_array(t, chunks=50),
        )
    np.testing.assert_array_equal(labels, np.unique(t))
    _assert_equal(stats, ref, 1e-12)  # the bar: 1e-12 relative


def test_mtlcm_fit_on_dask_and_chunks_equals_in_memory(data):
    da = pytest.importorskip("dask.array")
    X, y, t = data
    ref = ir.MTLCM(random_state=0).fit(X, y, task_ids=t)
    dk = ir.MTLCM(random_state=0).fit(
        da.from_array(X, chunks=(64, -1)), da.from_array(y, chunks=64),
        task_ids=da.from_array(t, chunks=64),
    )  # fmt: skip
    ck = ir.MTLCM(random_state=0).fit_chunks(
        (X[i], y[i], t[i]) for i in np.array_split(np.arange(len(y)), 5)
    )
    for m in (dk, ck):
        np.testing.assert_array_equal(m.tasks_, ref.tasks_)
        assert m.causal_sets() == ref.causal_sets()
        # statistics equal to rounding; L-BFGS stops within its tolerance
        np.testing.assert_allclose(
            m.mixing_, ref.mixing_, atol=1e-4 * np.abs(ref.mixing_).max()
        )
        assert m.log_likelihood_ == pytest.approx(ref.log_likelihood_, abs=1e-7)


def test_parquet_and_csv_row_groups(data, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    X, y, t = data
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    df["target"], df["task"] = y, t
    df.to_parquet(tmp_path / "t.parquet", row_group_size=64)
    df.to_csv(tmp_path / "t.csv", index=False, float_format="%.17g")
    cols = list(df.columns[:-2])
    ref = _reference(X, y, t)
    for name in ("t.parquet", "t.csv"):
        acc = StatisticsAccumulator(ref.x_unit, ref.y_unit)
        n_chunks = 0
        for chunk in table_chunks(tmp_path / name, cols, "target", "task", rows=64):
            acc.update(*chunk)
            n_chunks += 1
        assert n_chunks == -(-len(y) // 64)
        _assert_equal(acc.result()[0], ref, 1e-12)


def test_streamed_input_errors():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    t = np.array([0] * 9 + [1])
    with pytest.raises(ir.exceptions.DataError, match="at least 2 observed samples"):
        ir.MTLCM().fit_chunks([(X, y, t)])
    with pytest.raises(ir.exceptions.DataError, match="constant"):
        ir.MTLCM().fit_chunks([(X, np.full(10, 4.0), np.zeros(10))])
    with pytest.raises(ir.exceptions.DataError, match="non-finite"):
        ir.MTLCM().fit_chunks([(X * np.nan, y, t)])
    with pytest.raises(ir.exceptions.DataError, match="same number of features"):
        ir.MTLCM().fit_chunks([(X, y, t), (X[:, :2], y, t)])


@pytest.fixture(scope="module")
def wide(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(150, 5)) * 4.0 + 20.0
    Y = X[:, :3] @ rng.normal(size=(3, 6)) + rng.normal(size=(150, 6))
    Y[rng.random(Y.shape) < 0.3] = np.nan  # each task observed on its own rows
    Y[:40, 2] = np.nan
    return X, Y


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 65536])
def test_wide_statistics_equal_the_per_observation_path(wide, chunk_rows):
    from identrep.models.multitask._stream_stats import wide_statistics

    X, Y = wide
    got, tasks = wide_statistics(X, Y, chunk_rows=chunk_rows)
    ref = _reference(X, Y, None)
    assert got.x_unit == ref.x_unit and got.y_unit == ref.y_unit
    _assert_equal(got, ref, 1e-12)
    np.testing.assert_array_equal(tasks, np.arange(6))


def test_wide_statistics_keep_the_column_order_and_check_the_input(wide):
    import pandas as pd

    from identrep.exceptions import DataError
    from identrep.models.multitask._stream_stats import wide_statistics

    X, Y = wide
    cols = ["mu", "alpha", "homo", "lumo", "gap", "r2"]  # not in sorted order
    got, tasks = wide_statistics(X, pd.DataFrame(Y, columns=cols))
    assert tasks.tolist() == cols
    _assert_equal(got, _reference(X, Y, None), 1e-12)
    with pytest.raises(DataError, match="duplicate column names"):
        wide_statistics(X, pd.DataFrame(Y, columns=cols[:5] + ["mu"]))
    Y0 = Y.copy()
    Y0[:, 4] = np.nan
    with pytest.raises(DataError, match="task 4 has 0"):
        wide_statistics(X, Y0)
    with pytest.raises(DataError, match="one row per row of X"):
        wide_statistics(X, Y[:-1])
    Yi = Y.copy()
    Yi[3, 1] = np.inf
    with pytest.raises(DataError, match="Y"):
        wide_statistics(X, Yi)
    with pytest.raises(DataError, match="no observed entry"):
        wide_statistics(X, np.full_like(Y, np.nan))


def test_mtlcm_wide_fit_equals_the_long_fit(wide):
    X, Y = wide
    rows, tids = np.nonzero(~np.isnan(Y))
    wide_fit = ir.MTLCM(n_latents=3, random_state=0).fit(X, Y)
    long_fit = ir.MTLCM(n_latents=3, random_state=0).fit(
        X[rows], Y[rows, tids], task_ids=tids
    )
    assert wide_fit.log_likelihood_ == pytest.approx(long_fit.log_likelihood_, rel=1e-9)
    np.testing.assert_allclose(wide_fit.transform(X), long_fit.transform(X), atol=1e-7)
