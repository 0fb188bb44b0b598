"""Closed-form checks of the shared numerical rules (utils/numerics.py)."""

import numpy as np
import pytest

from identrep.utils.numerics import causal_mask, r2_per_task, safe_scale


def test_safe_scale_keeps_real_spread_and_replaces_round_off():
    sd = np.array([2.0, 0.0, 1e-9, 1e-3])
    mean = np.array([0.0, 5.0, 1e6, 1e6])
    # 1e-9 <= 1e-12 * 1e6 = 1e-6 counts as zero; 1e-3 does not
    np.testing.assert_array_equal(safe_scale(sd, mean), [2.0, 1.0, 1.0, 1e-3])


def test_r2_per_task_matches_the_definition_and_flags_degenerate_tasks():
    y = np.array([1.0, 2.0, 3.0, 5.0, 5.0, 7.0])
    pred = np.array([1.0, 2.5, 2.5, 5.0, 5.0, 6.0])
    t = np.array([0, 0, 0, 1, 1, 2])
    r2 = r2_per_task(y, pred, t, 3)
    # task 0: SS_res = 0 + 0.25 + 0.25, SS_tot = 1 + 0 + 1
    assert r2[0] == pytest.approx(1 - 0.5 / 2.0)
    assert np.isnan(r2[1])  # constant target
    assert np.isnan(r2[2])  # one observation


def test_causal_mask_counts_the_threshold_itself_as_causal():
    np.testing.assert_array_equal(
        causal_mask(np.array([0.49, 0.5, 0.51])), [False, True, True]
    )


@pytest.mark.parametrize("unit", [1e-300, 1e-20, 1.0, 1e20, 1e300])
def test_column_and_task_moments_hold_for_any_magnitude(unit, rng):
    from identrep.utils.numerics import column_moments, task_moments

    X = rng.normal(size=(500, 3)) + [0.0, 5.0, 1e8]
    X[:, 0] = 2.0  # a constant column
    mean, scale = column_moments(X)
    np.testing.assert_allclose(mean, X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(scale[1:], X[:, 1:].std(0), rtol=1e-6)
    m_u, s_u = column_moments(X * unit)  # 500 values near 1e308: no overflow
    np.testing.assert_allclose(m_u, mean * unit, rtol=1e-12)
    np.testing.assert_allclose(s_u, scale * unit, rtol=1e-6)
    assert s_u[0] == pytest.approx(2.0 * unit)  # constant: its own magnitude

    t = np.repeat(np.arange(4), 125)
    y = X[:, 1] * (1 + t)
    tm, ts = task_moments(y * unit, t, 4)
    for k in range(4):
        np.testing.assert_allclose(tm[k], y[t == k].mean() * unit, rtol=1e-12)
        np.testing.assert_allclose(ts[k], y[t == k].std() * unit, rtol=1e-6)
