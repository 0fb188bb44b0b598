"""MTRN's streamed input: no full copy of X, memmaps, streaming moments."""

import tracemalloc

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.exceptions import DataError
from identrep.models.multitask import _mtrn_stream
from identrep.models.multitask._mtrn_batches import _refit_joint_heads
from identrep.models.multitask._mtrn_stream import (
    HostRows,
    StreamedRidgeRefit,
    streaming_column_moments,
)
from identrep.models.nn.mlp import MLP
from identrep.utils.numerics import column_moments
from identrep.utils.validation import check_array


def _long_data(n, p, n_tasks=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 3, size=p) + rng.normal(size=p)
    tasks = rng.integers(0, n_tasks, size=n)
    W = rng.normal(size=(n_tasks, p))
    y = np.einsum("ij,ij->i", X, W[tasks]) + 0.1 * rng.normal(size=n)
    return X, y, tasks


@pytest.mark.parametrize("chunk", [None, 128])
def test_memmap_fit_equals_in_memory_fit(tmp_path, monkeypatch, chunk):
    if chunk is not None:  # several chunks: the streamed moments and head refit
        monkeypatch.setattr(_mtrn_stream, "STREAM_CHUNK", chunk)
    X, y, tasks = _long_data(600, 6)
    mm = np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    ro = np.memmap(tmp_path / "X.f64", dtype=np.float64, mode="r", shape=X.shape)
    kw = dict(n_latents=3, max_epochs=3, batch_size=64, random_state=0)
    a = ir.MTRN(**kw).fit(X, y, task_ids=tasks)
    b = ir.MTRN(**kw).fit(ro, y, task_ids=tasks)
    # same seed, same values: bit-identical whatever the storage
    np.testing.assert_array_equal(a.transform(X), b.transform(ro))
    np.testing.assert_array_equal(a.head_weights_, b.head_weights_)
    np.testing.assert_array_equal(a.head_bias_, b.head_bias_)


def test_fit_never_converts_all_of_X(monkeypatch):
    """Every array handed to torch during fit has fewer rows than X (5000 rows;
    training batches of 256, streamed chunks of 1000, inference chunks of 4096).
    Fails on the former path, which copied X into one tensor."""
    n, p = 5000, 4
    X, y, tasks = _long_data(n, p)
    monkeypatch.setattr(_mtrn_stream, "STREAM_CHUNK", 1000)
    seen = []
    for name in ("tensor", "as_tensor", "from_numpy"):
        orig = getattr(torch, name)

        def spy(a, *args, _orig=orig, **kwargs):
            arr = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a
            if isinstance(arr, np.ndarray) and arr.ndim == 2 and arr.shape[1] == p:
                seen.append(arr.shape[0])
            return _orig(a, *args, **kwargs)

        monkeypatch.setattr(torch, name, spy)
    ir.MTRN(n_latents=2, max_epochs=2, batch_size=256, random_state=0).fit(
        X, y, task_ids=tasks
    )
    assert seen, "the spy saw no input rows at all"
    assert max(seen) <= 4096 < n


def _peak_numpy_bytes(n, p):
    X, y, tasks = _long_data(n, p)
    m = ir.MTRN(n_latents=2, hidden_sizes=(8,), max_epochs=1, batch_size=512)
    tracemalloc.start()
    tracemalloc.reset_peak()
    m.set_params(random_state=0).fit(X, y, task_ids=tasks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_fit_memory_beyond_x_grows_far_less_than_x(monkeypatch):
    """numpy's traced peak during fit grows by much less than the input's own size
    between 4,000 and 16,000 rows of 100 features (X grows by 9.6 MB). The former
    path made two full float64 copies in the input moments alone (measured growth
    2.04 times X's); what remains is O(N) per observation (targets, codes,
    split, features), measured 0.04 times X's growth here, so the bound 0.5
    leaves room on both sides."""
    monkeypatch.setattr(_mtrn_stream, "STREAM_CHUNK", 2048)
    p = 100
    _peak_numpy_bytes(500, p)  # one-time allocations (lazy imports) out of the way
    small, large = _peak_numpy_bytes(4000, p), _peak_numpy_bytes(16000, p)
    x_growth = (16000 - 4000) * p * 8
    assert large - small < 0.5 * x_growth


def test_streaming_moments_match_column_moments():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1003, 7)) * 1e150 + 3e150
    X[:, 3] = 0.0  # an all-zero column keeps its unit 1
    m1, s1 = column_moments(X)
    m2, s2 = streaming_column_moments(X, chunk_size=100)
    np.testing.assert_allclose(m2, m1, rtol=1e-12)
    np.testing.assert_allclose(s2, s1, rtol=1e-12)
    # one chunk: exactly column_moments
    m3, s3 = streaming_column_moments(X, chunk_size=5000)
    np.testing.assert_array_equal(m3, m1)
    np.testing.assert_array_equal(s3, s1)


def test_host_rows_gather_and_chunked_features():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(250, 5))
    rows = HostRows(X, torch.float64, "cpu", chunk_size=64)
    idx = torch.tensor([3, 0, 249, 3])
    np.testing.assert_array_equal(rows[idx].numpy(), X[[3, 0, 249, 3]])
    assert rows[idx].dtype == torch.float64 and len(rows) == 250

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = MLP(5, (6,), 2).double()

        def features(self, x):
            return self.mlp(x)

    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        full = net.features(torch.from_numpy(X))
        chunked = rows.features(net)
    # row-wise network: chunks change only float64 summation order
    np.testing.assert_allclose(chunked.numpy(), full.numpy(), rtol=1e-12, atol=1e-14)


def test_finite_check_finds_inf_past_the_first_chunk():
    X = np.zeros((70000, 2))
    X[69999, 1] = np.inf
    with pytest.raises(DataError, match="non-finite"):
        check_array(X)
    X[69999, 1] = np.nan
    with pytest.raises(DataError, match="infinite"):
        check_array(np.where(X == 0, np.nan, np.inf), allow_nan=True)
    check_array(np.where(X == 0, np.nan, 1.0), allow_nan=True)


def test_streamed_refit_matches_the_in_memory_refit():
    """The same normal equations summed per chunk: equal heads to float64
    rounding (1e-9 relative leaves room for the solve's conditioning)."""
    X, y, tasks = _long_data(700, 5, n_tasks=4)
    m = ir.MTRN(n_latents=3, max_epochs=1, random_state=0).fit(X, y, task_ids=tasks)
    net = m.module_
    rng = np.random.default_rng(3)
    train = np.sort(rng.choice(700, size=600, replace=False))
    ys = (y - y.mean()) / y.std()
    with torch.no_grad():
        _refit_joint_heads(
            net,
            X=torch.from_numpy(X),
            rows=torch.as_tensor(train),
            y=torch.as_tensor(ys[train]),
            task_ids=torch.as_tensor(tasks[train]),
            alpha=1e-3,
        )
        W1, b1 = net.heads.weight.clone().numpy(), net.heads.bias.clone().numpy()
        net.heads.weight.zero_()
        rows = HostRows(X, torch.float64, "cpu", chunk_size=128)
        refit = StreamedRidgeRefit(
            rows,
            train[::-1].copy(),
            ys[train][::-1],
            tasks[train][::-1],
            4,
            1e-3,
            sub_size=50,
        )
        refit(net)
    W2, b2 = net.heads.weight.detach().numpy(), net.heads.bias.detach().numpy()
    # heads are float32: 1e-5 relative is float32 rounding with room to spare
    np.testing.assert_allclose(W2, W1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b2, b1, rtol=1e-5, atol=1e-6)
    assert np.abs(W1).max() > 0.01  # a non-trivial solution was compared
