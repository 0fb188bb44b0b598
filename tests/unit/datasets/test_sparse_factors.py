"""The Sparse VAE's synthetic process (Moran et al. 2022, Section 2.2)."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import make_sparse_factors
from identrep.datasets.sparse_factors import SPARSE_FACTOR_SUPPORT
from identrep.exceptions import InvalidParameterError


def test_features_follow_eq9_and_the_support(seed):
    data = make_sparse_factors(500, rho=0.4, noise_std=0.0, random_state=seed)
    z1, z2 = data.Z.T
    expect = np.column_stack(
        [z1, 2 * z1, 3 * z1**2, 4 * z2, 5 * z2, 6 * np.sin(z2), 7 * z1 * z2]
    )
    np.testing.assert_allclose(data.X, expect)
    np.testing.assert_array_equal(data.support, SPARSE_FACTOR_SUPPORT)
    assert data.params["rho"] == 0.4


def test_correlation_noise_and_reproducibility(seed):
    data = make_sparse_factors(20000, rho=0.6, random_state=seed)
    assert np.corrcoef(data.Z.T)[0, 1] == pytest.approx(0.6, abs=0.03)
    clean = make_sparse_factors(20000, rho=0.6, noise_std=0.0, random_state=seed)
    np.testing.assert_array_equal(clean.Z, data.Z)  # factors drawn before noise
    assert (data.X - clean.X).std() == pytest.approx(0.5, rel=0.03)
    again = make_sparse_factors(20000, rho=0.6, random_state=seed)
    np.testing.assert_array_equal(again.X, data.X)
    assert not data.X.flags.writeable


def test_declared_constraints():
    with pytest.raises(InvalidParameterError, match="'rho' parameter"):
        make_sparse_factors(10, rho=1.0)
    with pytest.raises(InvalidParameterError, match="'noise_std' parameter"):
        make_sparse_factors(10, noise_std=-1.0)
