"""The within-task independence test on hand-built data with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.exceptions import DataError
from identrep.metrics import conditional_independence_test


def _data(seed=0, n_tasks=20, n=100):
    """Latent 0 independent of y in every task; latent 1 = slope_t y + noise with
    slopes alternating in sign (|slope| 1, correlation ~0.99); latent 2 depends on y
    in even tasks only (correlation ~0.7) and is independent in odd tasks."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.arange(n_tasks), n)
    y = rng.normal(size=t.size)
    sign = np.where(t % 2 == 0, 1.0, -1.0)
    z0 = rng.normal(size=t.size)
    z1 = sign * y + 0.1 * rng.normal(size=t.size)
    z2 = np.where(t % 2 == 0, y, 0.0) + rng.normal(size=t.size)
    truth = np.zeros((n_tasks, 3), dtype=bool)
    truth[:, 1] = True
    truth[::2, 2] = True
    return np.column_stack([z0, z1, z2]), y, t, truth


@pytest.mark.parametrize("method", ["pearson", "spearman"])
@pytest.mark.parametrize("correction", ["bonferroni", "bh"])
def test_known_dependence_recovered(method, correction):
    z, y, t, truth = _data()
    dep, p = conditional_independence_test(
        z, y, t, method=method, correction=correction
    )
    assert dep.shape == p.shape == (20, 3)
    # correlation 0.7 with n = 100 gives |t| ~ 9.7 (p ~ 1e-15): far past any
    # correction over 60 tests; the independent cells reject with probability
    # <= 0.05 family-wise (Bonferroni) -- this seed has no false rejection
    np.testing.assert_array_equal(dep, truth)
    assert np.all((p >= 0) & (p <= 1))


def test_uncorrected_pvalues_uniform_under_null():
    # 400 tasks x 3 independent latents: raw p-values are U(0, 1) under H0, so
    # their mean is 0.5 +- 0.5/sqrt(12 * 1200) ~ 0.004; 0.03 is > 7 standard errors
    rng = np.random.default_rng(1)
    t = np.repeat(np.arange(400), 50)
    z, y = rng.normal(size=(t.size, 3)), rng.normal(size=t.size)
    _, p = conditional_independence_test(z, y, t, correction="none")
    assert abs(p.mean() - 0.5) < 0.03
    # about 5 % rejections at alpha 0.05 (binomial sd ~0.6 %; 2 points is > 3 sd)
    dep, _ = conditional_independence_test(z, y, t, alpha=0.05, correction="none")
    assert abs(dep.mean() - 0.05) < 0.02


def test_corrections_order_and_labels():
    z, y, t, _ = _data()
    _, raw = conditional_independence_test(z, y, t, correction="none")
    _, bh = conditional_independence_test(z, y, t, correction="bh")
    _, bonf = conditional_independence_test(z, y, t, correction="bonferroni")
    # BH adjustments lie between the raw p-values and Bonferroni's
    assert np.all(raw <= bh + 1e-15) and np.all(bh <= bonf + 1e-15)
    np.testing.assert_allclose(bonf, np.minimum(raw * raw.size, 1.0))
    # string labels give rows in sorted label order, same numbers
    labels = np.array([f"task{k:02d}" for k in range(20)])[t]
    _, raw_s = conditional_independence_test(z, y, labels, correction="none")
    np.testing.assert_allclose(raw_s, raw)


def test_constant_latent_is_independent():
    z, y, t, _ = _data()
    z[:, 0] = 3.0
    _, p = conditional_independence_test(z, y, t, correction="none")
    np.testing.assert_array_equal(p[:, 0], 1.0)


def test_bad_input():
    z, y, t, _ = _data()
    with pytest.raises(DataError, match="y must have one entry per row"):
        conditional_independence_test(z, y[:-1], t)
    with pytest.raises(DataError, match="at least 3 samples"):
        conditional_independence_test(z[:2], y[:2], t[:2])
    with pytest.raises(ValueError, match="alpha must lie in"):
        conditional_independence_test(z, y, t, alpha=1.5)
    with pytest.raises(ValueError, match="method must be one of"):
        conditional_independence_test(z, y, t, method="kendall")
    with pytest.raises(ValueError, match="correction must be one of"):
        conditional_independence_test(z, y, t, correction="holm")
    z[0, 0] = np.nan
    with pytest.raises(DataError):
        conditional_independence_test(z, y, t)
