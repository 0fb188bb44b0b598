"""MTLCM's profiled objective (``_mtlcm_objective``) against the likelihood functions.

The value must equal :func:`mtlcm_profile_nll` at the indicators the objective's
inner solve returns, and its hand-derived gradient must equal autograd of that
likelihood with the indicators held fixed (Danskin: at the inner optimum the
indicators' own derivative does not enter).
"""

import numpy as np
import pytest
import torch

from identrep.models.multitask._likelihoods import mtlcm_profile_nll
from identrep.models.multitask._mtlcm_objective import ProfiledObjective

F64 = torch.float64
SIGMA_S, SIGMA_OBS = 0.1, 0.05


def _problem(T, n, p, d, seed):
    """Per-task centred statistics of x = A z + noise with some latents driven by y."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(p, d))
    stats = []
    for _ in range(T):
        y = rng.normal(size=n)
        c = rng.random(d) < 0.5
        z = np.where(c, rng.normal(size=(n, d)), y[:, None] * rng.normal(size=d))
        z += 0.1 * rng.normal(size=(n, d))
        x = z @ A.T + SIGMA_OBS * rng.normal(size=(n, p))
        x, y = x - x.mean(0), y - y.mean()
        stats.append((float(n), x.T @ x, x.T @ y, float(y @ y)))
    n, Sxx, sxy, syy = (
        torch.tensor(np.array(a), dtype=F64) for a in zip(*stats, strict=True)
    )
    A0 = A + 0.3 * rng.normal(size=(p, d))  # away from the truth: gradient not 0
    return (n, Sxx, sxy, syy), torch.tensor(A0, dtype=F64)


@pytest.mark.parametrize(("p", "d"), [(4, 4), (6, 3), (8, 8)])
def test_value_and_gradient_match_the_likelihood(p, d):
    st, A = _problem(T=5, n=30, p=p, d=d, seed=p + d)
    obj = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS)
    f, g, v = obj(A)
    n_total = float(st[0].sum())
    lo = SIGMA_S**2
    c = ((v - lo) / (1.0 - lo)).clamp(0.0, 1.0)
    Ar = A.clone().requires_grad_(True)
    ref = mtlcm_profile_nll(Ar, c, *st, SIGMA_S, SIGMA_OBS).sum() / n_total
    (g_ref,) = torch.autograd.grad(ref, Ar)
    assert f == pytest.approx(float(ref.detach()), rel=1e-11)
    # the inner optimum is exact to rounding; 1e-7 leaves room for its conditioning
    np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("p", "d"), [(5, 5), (7, 4), (20, 20)])
def test_objective_is_smooth_under_tiny_moves(p, d):
    """A relative move of 1e-9 of A changes F as its gradient says. Measured: the
    change differs from the first-order term by at most 1e-4 of it here; the
    former scatter term tr S - tr(A^+ S A) / s^2, which cancels to the rounding of
    tr S, made it 1.4e-2 at (5, 5) and 4.8e-3 at (20, 20) (and F noisy at 1e-8
    relative at d = 100). The bound 1e-3 sits between."""
    st, A = _problem(T=6, n=40, p=p, d=d, seed=3)
    obj = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS)
    f0, g0, _ = obj(A)
    rng = np.random.default_rng(0)
    D = torch.tensor(rng.normal(size=A.shape), dtype=F64)
    D *= 1e-9 * A.norm() / D.norm()
    f1, _, _ = obj(A + D)
    first_order = float((g0 * D).sum())
    assert abs((f1 - f0) - first_order) < 1e-3 * abs(first_order)


@pytest.mark.parametrize(("p", "d"), [(10, 10), (12, 6)])
def test_low_rank_factor_form_equals_dense_form(p, d):
    """Tasks with fewer samples than latents (rank n - 2 < d): the objective works
    on factors N_t = U_t U_t^T; with ``d=1`` every rank reaches d and it keeps the
    dense (T, p, p) form. Same value and gradient to rounding."""
    st, A = _problem(T=7, n=6, p=p, d=d, seed=5)
    low = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=d)
    dense = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=1)
    assert low.U is not None and low.r == 4 and dense.U is None
    for step in (0.0, 1e-3):  # a cold, then a warm start of the indicator solve
        f1, g1, v1 = low(A + step)
        f2, g2, v2 = dense(A + step)
        assert f1 == pytest.approx(f2, rel=1e-12)
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(v1.numpy(), v2.numpy(), atol=1e-9)


@pytest.mark.parametrize(("n", "d"), [(40, 20), (12, 20)])
def test_cpu_task_loop_equals_batched_solve(monkeypatch, n, d):
    """At d >= _TASK_LOOP_MIN_D (lowered here to 16) the CPU solves the indicators
    task by task in numpy (with the decrement estimated from the previous Newton
    factor); the batched solve (torch, per-matrix LAPACK) must give the same
    optimum: same value to 1e-12, gradient to 1e-8 relative (the two sum the
    gradient terms in a different order), cold and warm starts, dense form
    (n = 40 > d) and factor form (n = 12: rank 10 < d)."""
    from identrep.models.multitask import _mtlcm_objective as mo

    st, A = _problem(T=9, n=n, p=d, d=d, seed=11)
    loop = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=d)
    assert (loop.U is not None) == (n < d)
    results = []
    for min_d in (16, 10**6):
        monkeypatch.setattr(mo, "_TASK_LOOP_MIN_D", min_d)
        obj = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=d)
        results.append([obj(A + step) for step in (0.0, 1e-3, 1e-6)])
    for (f1, g1, v1), (f2, g2, v2) in zip(*results, strict=True):
        assert f1 == pytest.approx(f2, rel=1e-12)
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(v1.numpy(), v2.numpy(), atol=1e-9)
    # the loop's Newton systems are gathered on the free block (variances not at a
    # bound): every task here has variances at a bound, and some have free ones
    v = results[0][0][2]
    at_bound = ((v <= SIGMA_S**2) | (v >= 1.0)).sum(1)
    assert (at_bound > 0).all() and (at_bound < d).any()


def test_adaptive_inner_tolerance_follows_the_outer_progress():
    """``adaptive_tol``: the first evaluation uses the loosest tolerance, later ones
    (factor * the last relative gain of the lowest value)^2 within [1e-14, 1e-8];
    without it the solve is always at the rounding level."""
    from identrep.models.multitask import _mtlcm_objective as mo

    st, A = _problem(T=4, n=30, p=6, d=6, seed=2)
    exact = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS)
    adapt = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, adaptive_tol=True)
    assert exact.inner_rtol() == mo._INNER_RTOL == 1e-14
    assert adapt.inner_rtol() == mo._INNER_RTOL_MAX == 1e-8
    # gains: none yet, 0.1 (rtol capped at 1e-8), 1e-5 (rtol 1e-10)
    for f, want in [(-10.0, 1e-8), (-11.0, 1e-8), (-11.0 - 1.1e-4, 1e-10)]:
        adapt._record(f)
        assert adapt.inner_rtol() == pytest.approx(want, rel=1e-3)
    adapt._record(-10.0)  # a worse value (a line-search trial): no change
    assert adapt.inner_rtol() == pytest.approx(1e-10, rel=1e-3)
    adapt._record((-11.0 - 1.1e-4) * (1 + 1e-8))  # gain below 1e-7: exact again
    assert adapt.inner_rtol() == 1e-14


def test_adaptive_tolerance_leaves_the_batched_solve_unchanged():
    """Below _TASK_LOOP_MIN_D (and on CUDA) the batched solve keeps the rounding-
    level tolerance: the same evaluations give bitwise the same results."""
    st, A = _problem(T=6, n=12, p=10, d=10, seed=4)
    exact = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=10)
    adapt = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=10, adaptive_tol=True)
    for step in (0.0, 0.05, 1e-3, 1e-6):
        (f1, g1, v1), (f2, g2, v2) = exact(A + step), adapt(A + step)
        assert f1 == f2
        assert torch.equal(g1, g2) and torch.equal(v1, v2)


@pytest.mark.parametrize("n", [40, 12])
def test_adaptive_tolerance_in_the_task_loop(monkeypatch, n):
    """In the CPU task loop (lowered to d = 16 here) a loose inner tolerance gives
    a value above the exact one (it is a minimum over the indicators) by at most
    about rtol times the sum of the tasks' scales (n |log det H| + |f|, a few times
    |F|; bound 10 rtol |F|), and a gradient within 1e-3 relative (the indicators'
    distance from their optimum is about sqrt(rtol) = 1e-4); at 1e-14 the two
    objectives agree to rounding."""
    from identrep.models.multitask import _mtlcm_objective as mo

    monkeypatch.setattr(mo, "_TASK_LOOP_MIN_D", 16)
    d = 20
    st, A = _problem(T=8, n=n, p=d, d=d, seed=12)
    exact = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=d)
    adapt = ProfiledObjective(*st, SIGMA_S, SIGMA_OBS, d=d, adaptive_tol=True)
    f1, g1, _ = exact(A)
    f2, g2, _ = adapt(A)  # first call: rtol 1e-8
    assert 0.0 <= f2 - f1 <= 10 * 1e-8 * abs(f1)
    assert float((g2 - g1).abs().max()) <= 1e-3 * float(g1.abs().max())
    monkeypatch.setattr(adapt, "inner_rtol", lambda: 1e-14)
    f1, g1, _ = exact(A + 1e-3)
    f2, g2, _ = adapt(A + 1e-3)
    assert f2 == pytest.approx(f1, rel=1e-12)
    # from different warm starts: the same optimum, the gradient (a small
    # difference of large sums near the optimum) to 1e-8 of its largest entry
    assert float((g2 - g1).abs().max()) <= 1e-8 * float(g1.abs().max())
