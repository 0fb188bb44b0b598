"""Tests of make_nonlinear_tasks (the Table 2 process)."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import TaskData, make_nonlinear_tasks, make_task_latents

T, N, D, K, P = 6, 40, 4, 2, 9


@pytest.fixture
def data(seed) -> TaskData:
    return make_nonlinear_tasks(
        n_tasks=T, n_samples=N, n_latents=D, n_causal=K, n_observed=P, random_state=seed
    )


def _decode(Z, dec):
    return np.maximum(Z @ dec["W1"].T + dec["b1"], 0.0) @ dec["W2"].T + dec["b2"]


def test_shapes_and_bundle(data):
    assert isinstance(data, TaskData)
    assert data.X.shape == (T * N, P) and data.Z.shape == (T * N, D)
    assert data.y.shape == data.task_ids.shape == (T * N,)
    assert data.causal.shape == data.gammas.shape == data.weights.shape == (T, D)
    assert data.mixing is None and data.noise_std.shape == (T,)
    np.testing.assert_array_equal(data.task_ids, np.repeat(np.arange(T), N))
    np.testing.assert_array_equal(data.causal.sum(axis=1), K)
    assert data.params["n_observed"] == P and data.params["mixing"] == "mlp"
    dec = data.params["decoder"]
    assert dec["W1"].shape == (P, D) and dec["b1"].shape == (P,)
    assert dec["W2"].shape == (P, P) and dec["b2"].shape == (P,)
    assert "mixing=None" in repr(data)


def test_observations_are_the_decoder_applied_to_latents(data):
    np.testing.assert_allclose(data.X, _decode(data.Z, data.params["decoder"]))
    # latents standardised within every task
    Z = data.Z.reshape(T, N, D)
    np.testing.assert_allclose(Z.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(Z.std(axis=1), 1, rtol=1e-12)


def test_decoder_init_range_matches_pytorch_default():
    d, p = 20, 100
    data = make_nonlinear_tasks(
        n_tasks=2, n_samples=5, n_latents=d, n_causal=3, n_observed=p, random_state=1
    )
    dec = data.params["decoder"]
    for name, fan_in in (("W1", d), ("b1", d), ("W2", p), ("b2", p)):
        bound = 1 / np.sqrt(fan_in)
        a = dec[name]
        assert np.all(np.abs(a) <= bound), name
        # uniform on (-bound, bound): extremes reach the bound, mean ~0, var bound^2/3
        assert np.abs(a).max() > 0.9 * bound, name
    W2 = dec["W2"].ravel()
    b = 1 / np.sqrt(p)
    assert abs(W2.mean()) < 0.02 * b and abs(W2.var() / (b**2 / 3) - 1) < 0.05
    assert all(not a.flags.writeable for a in dec.values())


def test_seeding(seed):
    kw = dict(n_tasks=T, n_samples=N, n_latents=D, n_causal=K, n_observed=P)
    a = make_nonlinear_tasks(**kw, random_state=seed)
    b = make_nonlinear_tasks(**kw, random_state=seed)
    c = make_nonlinear_tasks(**kw, random_state=seed + 1)
    g = make_nonlinear_tasks(**kw, random_state=np.random.default_rng(seed))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.X, g.X)
    assert not np.allclose(a.X, c.X)


def test_latents_follow_the_table1_process(seed):
    """The decoder is drawn first, then the Table 1 latents from the same stream."""
    kw = dict(n_tasks=T, n_samples=N, n_latents=D, n_causal=K)
    data = make_nonlinear_tasks(**kw, n_observed=P, random_state=seed)
    rng = np.random.default_rng(seed)
    rng.uniform(size=P * D + P + P * P + P)  # the decoder's draws
    Z, y, t, causal, *_ = make_task_latents(**kw, random_state=rng)
    np.testing.assert_array_equal(data.Z, Z)
    np.testing.assert_array_equal(data.y, y)
    np.testing.assert_array_equal(data.causal, causal)


def test_observation_noise_is_added_last(seed):
    kw = dict(n_tasks=T, n_samples=N, n_latents=D, n_causal=K, n_observed=P)
    clean = make_nonlinear_tasks(**kw, random_state=seed)
    noisy = make_nonlinear_tasks(**kw, obs_noise=0.05, random_state=seed)
    np.testing.assert_array_equal(clean.Z, noisy.Z)
    resid = noisy.X - clean.X
    assert abs(resid.std() / 0.05 - 1) < 0.1 and abs(resid.mean()) < 0.01


def test_defaults_are_the_table2_configuration():
    data = make_nonlinear_tasks(n_tasks=3, n_samples=4, random_state=0)
    assert data.X.shape == (12, 100) and data.Z.shape == (12, 20)
    np.testing.assert_array_equal(data.causal.sum(axis=1), 4)
    assert data.params["obs_noise"] == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"n_observed": 0},
            r"'n_observed' parameter .* an int in the range \[1, inf\); got 0",
        ),
        ({"n_observed": 2.5}, r"'n_observed' parameter .* an int in .*; got 2\.5"),
        ({"obs_noise": -1.0}, r"'obs_noise' parameter .* \[0, inf\); got -1\.0"),
        ({"n_causal": 5}, "n_causal must be <= n_latents"),
        ({"n_samples": 1}, r"'n_samples' parameter .* \[2, inf\); got 1\."),
    ],
)
def test_invalid_arguments(kwargs, match):
    base = dict(n_tasks=2, n_samples=5, n_latents=4, n_causal=2, n_observed=6)
    with pytest.raises(ValueError, match=match):
        make_nonlinear_tasks(**{**base, **kwargs})
