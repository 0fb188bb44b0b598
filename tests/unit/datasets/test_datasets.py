"""Tests of the synthetic generators (datasets/synthetic.py) and TaskData."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from identrep.datasets import (
    TaskData,
    make_linear_tasks,
    make_mixing,
    make_task_latents,
)
from identrep.utils.validation import check_multitask, wide_to_long

T, N, D, K = 8, 50, 5, 2


@pytest.fixture
def data(seed) -> TaskData:
    return make_linear_tasks(
        n_tasks=T, n_samples=N, n_latents=D, n_causal=K, n_observed=7, random_state=seed
    )


def _per_task(a: np.ndarray) -> np.ndarray:
    """(T * N, ...) -> (T, N, ...): samples are task-major."""
    return a.reshape(T, N, *a.shape[1:])


# ---------------------------------------------------------------- shapes/content


def test_shapes_and_dtypes(data):
    assert data.X.shape == (T * N, 7) and data.y.shape == (T * N,)
    assert data.Z.shape == (T * N, D)
    assert data.causal.shape == data.gammas.shape == data.weights.shape == (T, D)
    assert data.mixing.shape == (7, D) and data.noise_std.shape == (T,)
    assert (data.n_tasks, data.n_latents, data.n_samples) == (T, D, T * N)
    np.testing.assert_array_equal(data.task_ids, np.repeat(np.arange(T), N))
    assert np.issubdtype(data.task_ids.dtype, np.integer)
    assert data.params["n_observed"] == 7 and data.params["mixing"] == "random"
    assert "n_samples=400" in repr(data) and "mixing=array(7, 5)" in repr(data)


def test_exactly_n_causal_per_task(data):
    assert set(np.unique(data.causal)) <= {0.0, 1.0}
    np.testing.assert_array_equal(data.causal.sum(axis=1), K)
    is_c = data.causal.astype(bool)
    assert np.all(data.gammas[is_c] == 0) and np.all(data.gammas[~is_c] != 0)
    assert np.all(np.abs(data.gammas) <= 1)
    assert np.all(data.weights[~is_c] == 0) and np.all(data.weights[is_c] != 0)
    assert np.all((data.noise_std >= 2) & (data.noise_std <= 3))


def test_causal_sets_vary_across_tasks():
    data = make_linear_tasks(n_tasks=40, n_samples=10, n_latents=6, random_state=0)
    patterns = {tuple(row) for row in data.causal.astype(int)}
    assert len(patterns) > 5
    assert np.all(data.causal.sum(axis=0) > 0)  # every latent is causal somewhere


def test_latents_standardised_per_task(data):
    Z = _per_task(data.Z)
    np.testing.assert_allclose(Z.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z.std(axis=1), 1.0, rtol=1e-12)  # ddof=0


def test_unstandardised_latents(seed):
    Z, *_ = make_task_latents(4, 400, 3, 1, standardize=False, random_state=seed)
    Z = Z.reshape(4, 400, 3)
    assert np.abs(Z.mean(axis=1)).max() > 1e-3  # not centred exactly
    assert not np.allclose(Z.std(axis=1), 1.0, rtol=1e-6)


def test_target_is_linear_in_causal_latents_plus_noise(data):
    """Regressing y on the task's causal latents leaves residuals of std noise_std."""
    Z, y = _per_task(data.Z), _per_task(data.y)
    for t in range(T):
        causal = np.flatnonzero(data.causal[t])
        design = np.c_[np.ones(N), Z[t][:, causal]]
        resid = y[t] - design @ np.linalg.lstsq(design, y[t], rcond=None)[0]
        # sampling error of a std with N=50 and 3 fitted parameters: ~15%
        np.testing.assert_allclose(resid.std(), data.noise_std[t], rtol=0.35)


def test_spurious_latents_follow_y_causal_do_not(data):
    Z, y = _per_task(data.Z), _per_task(data.y)
    for t in range(T):
        r = np.array([np.corrcoef(Z[t][:, j], y[t])[0, 1] for j in range(D)])
        for j in range(D):
            if data.causal[t, j]:
                # y = w z + noise with noise std >= 2: z is far from a function of y
                assert abs(r[j]) < 0.95
            elif abs(data.gammas[t, j]) > 0.2:
                # z = gamma y + N(0, 0.1^2) with var(y) >= 4: corr^2 >= 0.16 / 0.17
                assert abs(r[j]) > 0.9 and np.sign(r[j]) == np.sign(data.gammas[t, j])


def test_spurious_residual_is_small():
    """After regressing a spurious latent on y, the raw residual std is 0.1."""
    Z, y, t, causal, gammas, *_ = make_task_latents(
        3, 2000, 4, 1, standardize=False, random_state=1
    )
    for k in range(3):
        for j in np.flatnonzero(causal[k] == 0):
            zk, yk = Z[t == k, j], y[t == k]
            slope = np.polyfit(yk, zk, 1)[0]
            np.testing.assert_allclose(slope, gammas[k, j], atol=0.01)
            np.testing.assert_allclose((zk - slope * yk).std(), 0.1, rtol=0.1)


# ------------------------------------------------------------------------ mixing


def test_identity_mixing():
    data = make_linear_tasks(
        n_tasks=3,
        n_samples=20,
        n_latents=4,
        mixing="identity",
        obs_noise=0.0,
        random_state=0,
    )
    np.testing.assert_array_equal(data.mixing, np.eye(4))
    np.testing.assert_allclose(data.X, data.Z, atol=1e-15)


@pytest.mark.parametrize("p", [4, 9])
def test_orthogonal_mixing_has_orthonormal_columns(rng, p):
    A = make_mixing(p, 4, "orthogonal", rng)
    assert A.shape == (p, 4)
    np.testing.assert_allclose(A.T @ A, np.eye(4), atol=1e-12)
    assert not np.allclose(A, np.eye(p, 4))


def test_random_mixing_is_gaussian_not_normalised():
    A = make_mixing(60, 50, "random", np.random.default_rng(0))
    assert A.shape == (60, 50)
    assert abs(A.mean()) < 0.05 and abs(A.std() - 1) < 0.05
    assert np.linalg.matrix_rank(A) == 50


def test_observations_are_mixed_latents_plus_noise(data):
    resid = data.X - data.Z @ data.mixing.T
    # obs_noise = 0.01 by default; 2800 draws estimate the std within ~3%
    np.testing.assert_allclose(resid.std(), 0.01, rtol=0.1)
    np.testing.assert_allclose(resid.mean(), 0.0, atol=2e-3)
    quiet = make_linear_tasks(
        n_tasks=T,
        n_samples=N,
        n_latents=D,
        n_causal=K,
        n_observed=7,
        obs_noise=0.0,
        random_state=3,
    )
    np.testing.assert_allclose(quiet.X, quiet.Z @ quiet.mixing.T, atol=1e-12)


# ------------------------------------------------------------ reproducibility


def test_same_seed_same_data_different_seed_different(seed):
    kwargs = dict(n_tasks=5, n_samples=20, n_latents=3, n_causal=1)
    a = make_linear_tasks(**kwargs, random_state=seed)
    b = make_linear_tasks(**kwargs, random_state=seed)
    c = make_linear_tasks(**kwargs, random_state=seed + 1)
    for name in ("X", "y", "Z", "causal", "gammas", "weights", "mixing", "noise_std"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("X", "y", "Z", "gammas", "mixing", "noise_std"):
        assert not np.array_equal(getattr(a, name), getattr(c, name))


def test_generator_random_state_is_consumed():
    g = np.random.default_rng(0)
    a = make_linear_tasks(n_tasks=3, n_samples=10, n_latents=2, random_state=g)
    b = make_linear_tasks(n_tasks=3, n_samples=10, n_latents=2, random_state=g)
    assert not np.array_equal(a.X, b.X)
    c = make_linear_tasks(
        n_tasks=3, n_samples=10, n_latents=2, random_state=np.random.default_rng(0)
    )
    np.testing.assert_array_equal(a.X, c.X)


def test_global_numpy_rng_untouched():
    state = np.random.get_state()[1].copy()
    make_linear_tasks(n_tasks=3, n_samples=10, n_latents=2, random_state=0)
    np.testing.assert_array_equal(np.random.get_state()[1], state)


# ------------------------------------------------------------------ bad arguments


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            dict(n_tasks=0),
            r"'n_tasks' parameter of make_linear_tasks\(\)"
            r" must be an int in the range \[1, inf\); got 0\.",
        ),
        (
            dict(n_tasks=2.0),
            r"'n_tasks' parameter .*"
            r" must be an int in the range \[1, inf\); got 2\.0\.",
        ),
        (
            dict(n_samples=1),
            r"'n_samples' parameter .* must be an int in the range \[2, inf\); got 1\.",
        ),
        (
            dict(n_latents=0, n_observed=4),
            r"'n_latents' parameter .* must be an int in the range \[1, inf\); got 0\.",
        ),
        (
            dict(n_causal=-1),
            r"'n_causal' parameter .* must be an int in the range \[0, inf\); got -1\.",
        ),
        (dict(n_latents=3, n_causal=4), r"n_causal must be <= n_latents \(3\); got 4"),
        (
            dict(mixing="foo"),
            r"'mixing' parameter .* must be a str among .*'random'.*; got 'foo'\.",
        ),
        (
            dict(mixing="identity", n_observed=6),
            r"mixing='identity' needs "
            r"n_observed == n_latents; got n_observed=6, n_latents=4",
        ),
        (
            dict(n_observed=0),
            r"'n_observed' parameter .*"
            r" must be an int in the range \[1, inf\) or None; got 0\.",
        ),
        (
            dict(obs_noise=-0.1),
            r"'obs_noise' parameter .*"
            r" must be a float in the range \[0, inf\); got -0\.1\.",
        ),
        (
            dict(noise_range=(3.0, 2.0)),
            r"noise_range"
            r" must be \(low, high\) with 0 <= low <= high; got \(3\.0, 2\.0\)",
        ),
        (
            dict(noise_range=(-1.0, 2.0)),
            r"'noise_range' parameter .*"
            r" must be a sequence of a float in the range \[0, inf\);"
            r" got \(-1\.0, 2\.0\)",
        ),
    ],
)
def test_bad_arguments(kwargs, match):
    base = dict(n_tasks=2, n_samples=5, n_latents=4, n_causal=2, random_state=0)
    with pytest.raises(ValueError, match=match):
        make_linear_tasks(**{**base, **kwargs})


def test_bad_n_latents_message_names_n_latents():
    with pytest.raises(ValueError, match="'n_latents' parameter of make_linear_tasks"):
        make_linear_tasks(n_tasks=2, n_samples=5, n_latents=0, n_causal=0)


def test_bad_random_state_type():
    with pytest.raises(TypeError, match="'random_state' parameter .* must be None, a"):
        make_linear_tasks(n_tasks=2, n_samples=5, n_latents=2, random_state="0")


def test_zero_causal_and_all_causal():
    none = make_linear_tasks(
        n_tasks=3, n_samples=10, n_latents=3, n_causal=0, random_state=0
    )
    assert none.causal.sum() == 0 and np.all(none.weights == 0)
    allc = make_linear_tasks(
        n_tasks=3, n_samples=10, n_latents=3, n_causal=3, random_state=0
    )
    assert np.all(allc.causal == 1) and np.all(allc.gammas == 0)


# ---------------------------------------------------------------------- TaskData


def test_taskdata_is_frozen(data):
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.X = np.zeros(3)


@pytest.mark.parametrize(
    "name", ["X", "y", "task_ids", "Z", "causal", "gammas", "weights"]
)
def test_taskdata_arrays_read_only(data, name):
    arr = getattr(data, name)
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = 0


@pytest.mark.parametrize("name", ["mixing", "noise_std"])
def test_taskdata_ground_truth_read_only(data, name):
    with pytest.raises(ValueError, match="read-only"):
        getattr(data, name)[0] = 0


def test_task_mask(data):
    mask = data.task(3)
    assert mask.dtype == bool and mask.sum() == N
    np.testing.assert_array_equal(np.flatnonzero(mask), np.arange(3 * N, 4 * N))


def test_to_wide_round_trip(data):
    X, Y = data.to_wide()
    assert Y.shape == (T * N, T)
    np.testing.assert_array_equal((~np.isnan(Y)).sum(axis=1), 1)
    np.testing.assert_array_equal(Y[np.arange(T * N), data.task_ids], data.y)
    Xl, yl, tl = wide_to_long(X, Y)  # samples are task-major: order is unchanged
    np.testing.assert_array_equal(Xl, data.X)
    np.testing.assert_array_equal(yl, data.y)
    np.testing.assert_array_equal(tl, data.task_ids)
    wide = check_multitask(X, Y)
    np.testing.assert_array_equal(wide.rows, np.arange(T * N))
