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
