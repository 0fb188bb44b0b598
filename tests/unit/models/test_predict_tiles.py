"""Inference runs in tiles of one fixed size (``TorchEstimatorMixin._predict_chunks``).

The kernels of a product may depend on its number of rows: on stop 52's AVX-512
machine torch's float32 linear layers gave other last bits to calls of fewer than
16 rows, so a model's output for a row depended on how many rows came with it and
scikit-learn's ``check_methods_subset_invariance`` (one row at a time against the
whole set) failed there for VSC, RidgeICA and TaskIdentifiable. Every call now
sees the same number of rows, the last tile padded with copies of its last row.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identrep.models import VAE
from identrep.models._base import _ROW_TILE


@pytest.mark.parametrize("n", [1, _ROW_TILE, 300])
def test_every_call_sees_one_tile_of_rows(n):
    est = VAE(n_latents=2, max_epochs=1, random_state=0)
    est.device_, est.dtype_ = torch.device("cpu"), torch.float64
    rng = np.random.default_rng(0)
    X, codes = rng.normal(size=(n, 3)), np.arange(n)
    seen = []

    def fn(x, c):
        seen.append((x.shape[0], c.shape[0]))
        return x.sum(1), c * 2

    out_x, out_c = est._predict_chunks(fn, [X, codes], dtypes=[None, torch.int64])
    assert set(seen) == {(_ROW_TILE, _ROW_TILE)}
    assert len(seen) == -(-n // _ROW_TILE)
    # the padding rows are dropped and the rows keep their order
    np.testing.assert_allclose(out_x, X.sum(1))
    np.testing.assert_array_equal(out_c, 2 * codes)


def test_transform_of_single_rows_equals_the_whole_set_bitwise():
    """One row at a time gives the rows of the whole set to the bit (float32)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 5))
    est = VAE(n_latents=2, hidden_sizes=(8,), max_epochs=2, random_state=0).fit(X)
    whole = est.transform(X)
    one_by_one = np.vstack([est.transform(X[i : i + 1]) for i in range(len(X))])
    np.testing.assert_array_equal(one_by_one, whole)
