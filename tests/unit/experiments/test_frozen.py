"""The frozen-representation experiment (experiments/frozen.py)."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.experiments.frozen import (
    frozen_representation_experiment,
    frozen_representation_r2,
    plot_frozen_representation,
)

SMALL = dict(n_features=40, n_tasks=10, n_test=200)


def test_disentangled_lasso_beats_entangled_lasso_on_sparse_tasks(seed):
    """2 useful features of 40, 20 samples a task. Over seeds 0-9 the
    disentangled lasso scored 0.64-0.96 and the entangled one -0.03-0.05 (min gap
    0.66); the thresholds leave a margin of > 0.2 on each side."""
    d = frozen_representation_r2(
        "disentangled", "lasso", 20, 0.05, **SMALL, random_state=seed
    ).mean()
    e = frozen_representation_r2(
        "entangled", "lasso", 20, 0.05, **SMALL, random_state=seed
    ).mean()
    assert d > 0.4 and e < 0.25 and d - e > 0.3


def test_least_squares_is_blind_to_any_invertible_map_with_enough_samples(seed):
    """With n > m the least-squares fit is invariant to an invertible
    reparametrisation, so both representations score the same on the same tasks."""
    kw = dict(n_features=8, n_tasks=3, n_test=50, random_state=seed)
    d = frozen_representation_r2("disentangled", "least_squares", 30, 0.5, **kw)
    e = frozen_representation_r2("entangled", "least_squares", 30, 0.5, **kw)
    np.testing.assert_allclose(d, e, rtol=1e-8, atol=1e-10)


def test_ridge_is_blind_to_a_rotation(seed):
    """Ridge (with its leave-one-out penalty choice) gives the same predictions
    on rotated features, so only the lasso can tell the representations apart
    when the entangling map is orthogonal."""
    from identrep.experiments import frozen

    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((40, 10))
    y = Z[:, 0] - Z[:, 3] + 0.1 * rng.standard_normal(40)
    Q = np.linalg.qr(rng.standard_normal((10, 10)))[0]
    p1 = frozen._fit_predict("ridge", Z[:12], y[:12], Z[12:], 5)
    p2 = frozen._fit_predict("ridge", Z[:12] @ Q.T, y[:12], Z[12:] @ Q.T, 5)
    np.testing.assert_allclose(p1, p2, rtol=1e-8, atol=1e-10)


def test_experiment_frame_and_plot(tmp_path):
    df = frozen_representation_experiment(
        n_train=(10, 40),
        useful_fractions=(0.1, 0.8),
        regressors=("lasso", "least_squares"),
        n_features=10,
        n_tasks=2,
        n_test=30,
    )
    assert list(df.columns) == [
        "representation",
        "regressor",
        "useful_fraction",
        "n_train",
        "task",
        "test_r2",
    ]
    assert len(df) == 2 * 2 * 2 * 2 * 2
    assert set(df["representation"]) == {"disentangled", "entangled"}
    assert np.isfinite(df["test_r2"]).all() and (df["test_r2"] <= 1).all()
    again = frozen_representation_experiment(
        n_train=(10, 40),
        useful_fractions=(0.1, 0.8),
        regressors=("lasso", "least_squares"),
        n_features=10,
        n_tasks=2,
        n_test=30,
    )
    np.testing.assert_array_equal(df["test_r2"], again["test_r2"])
    fig = plot_frozen_representation(df, tmp_path / "frozen.png")
    assert (tmp_path / "frozen.png").stat().st_size > 0
    assert len(fig.axes) == 2


def test_errors():
    with pytest.raises(ValueError, match="representation must be one of"):
        frozen_representation_r2("mixed", "lasso", 10, 0.1)
    with pytest.raises(ValueError, match="regressor must be one of"):
        frozen_representation_r2("entangled", "svm", 10, 0.1)
    with pytest.raises(ValueError, match="mixing must be one of"):
        frozen_representation_r2("entangled", "lasso", 10, 0.1, mixing="mlp")
    with pytest.raises(ValueError, match=r"useful_fraction must lie in \(0, 1\]"):
        frozen_representation_r2("entangled", "lasso", 10, 0.0)
    with pytest.raises(ValueError, match="n_train, n_test and cv must be >= 2"):
        frozen_representation_r2("entangled", "lasso", 1, 0.1)
