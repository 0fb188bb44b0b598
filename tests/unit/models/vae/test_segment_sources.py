"""The segment process of iVAE (datasets/segments.py), which the VAE family's
tests and recovery runs use: variance-modulated sources, per-segment std factors,
well-conditioned mixing layers."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import make_segment_sources


def test_segment_sources_process(seed):
    d = make_segment_sources(
        n_segments=8, n_per_segment=3000, n_latents=3, n_observed=5, random_state=seed
    )
    assert d.X.shape == (24000, 5) and d.Z.shape == (24000, 3) and d.n_tasks == 8
    np.testing.assert_array_equal(d.task_ids, np.repeat(np.arange(8), 3000))
    std = d.params["std_factors"]
    assert std.shape == (8, 3) and np.all((std >= 0.5) & (std <= 3.0))
    # per-segment source std follows the factors
    emp = np.stack([d.Z[d.task_ids == s].std(0) for s in range(8)])
    np.testing.assert_allclose(emp, std, rtol=0.06)
    # one layer: linear, unit-norm columns, well conditioned
    A = d.mixing
    np.testing.assert_allclose(d.X, d.Z @ A.T)
    np.testing.assert_allclose(np.linalg.norm(A, axis=0), 1.0)
    assert np.linalg.cond(A) < 10
    assert np.all(d.causal == 1) and np.all(d.gammas == 0)
    r = d.y - np.einsum("nd,nd->n", d.Z, d.weights[d.task_ids])
    assert abs(r.std() - 0.5) < 0.02
    assert not d.X.flags.writeable
    same = make_segment_sources(
        n_segments=8, n_per_segment=3000, n_latents=3, n_observed=5, random_state=seed
    )
    np.testing.assert_array_equal(same.X, d.X)


def test_segment_sources_multilayer():
    d = make_segment_sources(
        n_segments=4,
        n_per_segment=50,
        n_latents=2,
        n_observed=3,
        n_layers=3,
        random_state=0,
    )
    assert d.mixing is None
    A1, A2, A3 = d.params["mixing_layers"]
    assert A1.shape == (3, 2) and A2.shape == A3.shape == (3, 3)

    def lrelu(h):
        return np.where(h > 0, h, 0.2 * h)

    np.testing.assert_allclose(d.X, lrelu(lrelu(d.Z @ A1.T) @ A2.T) @ A3.T)
    x = make_segment_sources(
        n_segments=4,
        n_per_segment=50,
        n_latents=2,
        n_layers=2,
        activation="xtanh",
        random_state=0,
    )
    B1, B2 = x.params["mixing_layers"]
    H = x.Z @ B1.T
    np.testing.assert_allclose(x.X, (np.tanh(H) + 0.1 * H) @ B2.T)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_segments": 0}, "n_segments must be an integer >= 1"),
        ({"n_layers": 0}, "n_layers must be an integer >= 1"),
        ({"n_observed": 1}, r"n_observed must be an integer >= n_latents \(3\)"),
        ({"activation": "relu"}, "activation must be one of"),
        ({"std_range": (0.0, 1.0)}, "std_range must satisfy 0 < low <= high"),
        ({"obs_noise": -1.0}, "obs_noise must be a finite number >= 0"),
    ],
)
def test_segment_sources_invalid(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_segment_sources(**{"n_latents": 3, **kwargs})
