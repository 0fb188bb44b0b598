"""make_sparse_tasks: shapes, the latent correlation, independent Bernoulli supports,
the signal-to-noise ratio, an invertible mixing, classification targets, validation."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import make_sparse_tasks
from identrep.exceptions import InvalidParameterError


def test_shapes_correlation_supports_and_noise_ratio(seed):
    data = make_sparse_tasks(
        n_tasks=300, n_samples=40, n_latents=5, correlation=0.7, random_state=seed
    )
    assert data.X.shape == (12000, 16) and data.Z.shape == (12000, 5)
    R = np.corrcoef(data.Z.T)
    assert np.allclose(R[np.triu_indices(5, 1)], 0.7, atol=0.03)
    assert data.causal.sum(1).min() >= 1
    # independent Bernoulli(0.5) per task and latent, conditioned on non-empty
    assert abs(data.causal.mean() - 0.5 / (1 - 0.5**5)) < 0.04
    assert np.array_equal(data.weights != 0, data.causal.astype(bool))
    t0 = data.task_ids == 0
    signal = data.Z[t0] @ data.weights[0]
    assert np.isclose(np.linalg.norm(data.y[t0] - signal), 0.1 * np.linalg.norm(signal))


def test_supports_vary_within_consecutive_tasks(seed):
    """Unlike the authors' sampler, tasks of one batch do not share a support."""
    data = make_sparse_tasks(n_tasks=64, n_samples=5, random_state=seed)
    blocks = data.causal.reshape(8, 8, -1)
    assert all(len({tuple(r) for r in b}) > 1 for b in blocks)


@pytest.mark.parametrize("mixing", ["mlp", "linear"])
def test_mixing_is_injective(seed, mixing):
    data = make_sparse_tasks(
        n_tasks=50, n_samples=20, n_latents=4, mixing=mixing, random_state=seed
    )
    mats = data.params["decoder"]
    assert np.linalg.matrix_rank(mats[0]) == 4
    for A in mats[1:]:
        assert np.linalg.cond(A) < 10
    assert (data.mixing is None) == (mixing == "mlp")
    if mixing == "linear":
        np.testing.assert_allclose(data.X, data.Z @ data.mixing.T)


def test_classification_targets():
    data = make_sparse_tasks(n_tasks=20, n_samples=30, n_classes=3, random_state=0)
    assert set(np.unique(data.y)) <= {0, 1, 2}
    assert data.params["class_weights"].shape == (20, 6, 3)
    off = data.causal == 0
    assert np.all(data.params["class_weights"][off] == 0)


def test_same_seed_same_data_and_errors():
    a = make_sparse_tasks(n_tasks=5, n_samples=4, random_state=3)
    b = make_sparse_tasks(n_tasks=5, n_samples=4, random_state=3)
    np.testing.assert_array_equal(a.X, b.X)
    with pytest.raises(InvalidParameterError, match="n_observed must be >= n_latents"):
        make_sparse_tasks(n_latents=6, n_observed=3)
    with pytest.raises(InvalidParameterError, match="'correlation' parameter"):
        make_sparse_tasks(correlation=1.0)
