"""Closed-form tests of the pure MTLCM likelihoods (models/multitask/_likelihoods.py).

Everything is checked against an independent computation: the per-sample
``torch.distributions.MultivariateNormal`` log-density, the envelope/KKT conditions
of the profiled parameters, and ``torch.autograd.gradcheck``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.distributions import MultivariateNormal

from identrep.models.multitask._likelihoods import (
    mtlcm_latent_nll,
    mtlcm_latent_statistics,
    mtlcm_moments,
    mtlcm_nll,
    mtlcm_optimal_indicators,
    mtlcm_optimal_slopes,
    mtlcm_profile_nll,
)
from identrep.models.multitask._stats import task_statistics
from identrep.utils.validation import check_multitask

F64 = torch.float64
SIZES = [(5, 3), (4, 4)]  # (p, d): p > d and p == d
COUNTS = (7, 11, 9, 14)  # T = 4 tasks of unequal size


def _random_problem(rng, p, d, counts=COUNTS, *, latent_model=False):
    """Random multi-task data (long layout, tasks interleaved), its statistics, and
    the generating mixing (None for unstructured data).

    With ``latent_model`` the data come from an MTLCM-like process (x = A z + noise,
    some latents driven by y) so that bounds of the indicator problem are active.
    """
    T = len(counts)
    task_ids = rng.permutation(np.repeat(np.arange(T), counts))
    n = len(task_ids)
    y = rng.normal(size=n) * rng.uniform(0.5, 2.0, size=T)[task_ids] + 3.0
    A = None
    if latent_model:
        A = rng.normal(size=(p, d))
        # latents alternate spurious (slope on y, variance 0.05^2 below the prior's
        # lower bound sigma_s^2) and causal (variance 1.3^2 above the upper bound 1)
        spurious = (np.arange(T)[:, None] + np.arange(d)[None, :]) % 2 == 0
        g = rng.uniform(0.5, 1.0, size=(T, d)) * spurious
        Z = rng.normal(size=(n, d)) * np.where(spurious[task_ids], 0.05, 1.3)
        Z += g[task_ids] * y[:, None]
        X = Z @ A.T + 0.01 * rng.normal(size=(n, p)) + rng.normal(size=(T, p))[task_ids]
    else:
        X = rng.normal(size=(n, p)) @ rng.normal(size=(p, p)) + rng.normal(size=p)
        X += np.outer(y, rng.normal(size=p)) * 0.3
    data = check_multitask(X, y, task_ids)
    return data, task_statistics(data), A


def _torch_stats(stats):
    f = lambda a: torch.as_tensor(a, dtype=F64)
    return f(stats.n), f(stats.Sxx), f(stats.sxy), f(stats.syy)


def _random_params(rng, p, d, T=None):
    T = len(COUNTS) if T is None else T
    A = torch.as_tensor(rng.normal(size=(p, d)), dtype=F64)
    c = torch.as_tensor(rng.uniform(0.02, 0.98, size=(T, d)), dtype=F64)
    m = torch.as_tensor(rng.normal(size=(T, d)), dtype=F64)
    return A, c, m


def _brute_force_nll(data, A, c, m, sigma_s, sigma_obs):
    """Sum over samples of -log N(x - xbar_t; A m_t (y - ybar_t), Sigma_t), per task."""
    X = torch.as_tensor(data.X[data.rows], dtype=A.dtype)
    y = torch.as_tensor(data.y, dtype=A.dtype)
    out = []
    for t in range(data.n_tasks):
        sel = torch.as_tensor(data.task_ids == t)
        xt, yt = X[sel], y[sel]
        xc, yc = xt - xt.mean(0), yt - yt.mean()
        v = c[t] + (1 - c[t]) * sigma_s**2
        cov = A @ torch.diag(v) @ A.T + sigma_obs**2 * torch.eye(
            A.shape[0], dtype=A.dtype
        )
        loc = yc[:, None] * (A @ m[t])[None, :]
        mvn = MultivariateNormal(loc=loc, covariance_matrix=cov)
        out.append(-mvn.log_prob(xc).sum())
    return torch.stack(out)


# --------------------------------------------------------------------- mtlcm_nll


@pytest.mark.parametrize("p,d", SIZES)
@pytest.mark.parametrize("sigma_s,sigma_obs", [(0.1, 0.01), (0.3, 0.5)])
def test_nll_equals_per_sample_multivariate_normal(rng, p, d, sigma_s, sigma_obs):
    data, stats, _ = _random_problem(rng, p, d)
    A, c, m = _random_params(rng, p, d)
    got = mtlcm_nll(A, c, m, *_torch_stats(stats), sigma_s, sigma_obs)
    want = _brute_force_nll(data, A, c, m, sigma_s, sigma_obs)
    assert got.shape == (len(COUNTS),) and got.dtype == F64
    torch.testing.assert_close(
        got, want, rtol=1e-8, atol=1e-8 * float(want.abs().max())
    )


def test_nll_float32_matches_float64(rng):
    """float32 in gives float32 out, within float32 accuracy of the float64 value."""
    data, stats, _ = _random_problem(rng, 4, 3)
    A, c, m = _random_params(rng, 4, 3)
    args = (0.3, 0.5)
    ref = mtlcm_nll(A, c, m, *_torch_stats(stats), *args)
    f32 = [t.float() for t in (A, c, m, *_torch_stats(stats))]
    got = mtlcm_nll(*f32, *args)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)


def test_moments_match_definition(rng):
    A, c, m = _random_params(rng, 5, 3)
    mu, Sigma = mtlcm_moments(A, c, m, 0.2, 0.05)
    for t in range(c.shape[0]):
        V = torch.diag(c[t] + (1 - c[t]) * 0.04)
        torch.testing.assert_close(
            Sigma[t], A @ V @ A.T + 0.0025 * torch.eye(5, dtype=F64)
        )
        torch.testing.assert_close(mu[t], A @ m[t])


def test_nll_follows_input_device_and_dtype(rng, device, dtype):
    _, stats, _ = _random_problem(rng, 4, 2)
    A, c, m = (t.to(device, dtype) for t in _random_params(rng, 4, 2))
    st = [t.to(device, dtype) for t in _torch_stats(stats)]
    out = mtlcm_nll(A, c, m, *st, 0.3, 0.5)
    assert out.device.type == device.type and out.dtype == dtype
    assert torch.isfinite(out).all()


# -------------------------------------------------------------- profiled slopes


@pytest.mark.parametrize("p,d", SIZES)
def test_profile_nll_equals_nll_at_optimal_slopes(rng, p, d):
    _, stats, _ = _random_problem(rng, p, d)
    A, c, _ = _random_params(rng, p, d)
    n, Sxx, sxy, syy = _torch_stats(stats)
    m_star = mtlcm_optimal_slopes(A, c, sxy, syy, 0.1, 0.01)
    want = mtlcm_nll(A, c, m_star, n, Sxx, sxy, syy, 0.1, 0.01)
    got = mtlcm_profile_nll(A, c, n, Sxx, sxy, syy, 0.1, 0.01)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=0.0)


@pytest.mark.parametrize("p,d", SIZES)
def test_optimal_slopes_zero_gradient_and_minimum(rng, p, d):
    _, stats, _ = _random_problem(rng, p, d)
    A, c, m_rand = _random_params(rng, p, d)
    st = _torch_stats(stats)
    args = (0.2, 0.1)
    m_star = mtlcm_optimal_slopes(A, c, st[2], st[3], *args).requires_grad_()
    (g_star,) = torch.autograd.grad(mtlcm_nll(A, c, m_star, *st, *args).sum(), m_star)
    m_rand.requires_grad_()
    (g_rand,) = torch.autograd.grad(mtlcm_nll(A, c, m_rand, *st, *args).sum(), m_rand)
    assert float(g_rand.abs().max()) > 1.0  # the check below is not vacuous
    assert float(g_star.abs().max()) <= 1e-9 * float(g_rand.abs().max())
    # quadratic in m with a positive-definite Hessian: every perturbation increases it
    with torch.no_grad():
        f_star = mtlcm_nll(A, c, m_star, *st, *args)
        for _ in range(5):
            delta = 1e-3 * torch.as_tensor(rng.normal(size=m_star.shape), dtype=F64)
            assert bool((mtlcm_nll(A, c, m_star + delta, *st, *args) > f_star).all())


@pytest.mark.parametrize("p,d", SIZES)
def test_optimal_slopes_match_a_numerical_minimum(rng, p, d):
    """Independent oracle: minimise the per-sample ``MultivariateNormal`` likelihood
    of every task over its slopes with scipy (derivative-free of our code: BFGS on
    finite differences), and compare with the closed-form GLS slopes."""
    from scipy.optimize import minimize

    data, stats, _ = _random_problem(rng, p, d)
    A, c, _ = _random_params(rng, p, d)
    args = (0.3, 0.5)  # well-conditioned, so the numerical minimum is accurate
    n, Sxx, sxy, syy = _torch_stats(stats)
    m_star = mtlcm_optimal_slopes(A, c, sxy, syy, *args)
    for t in range(len(COUNTS)):

        def f(m_t, t=t):
            m = torch.zeros_like(c)
            m[t] = torch.as_tensor(m_t, dtype=F64)
            return float(_brute_force_nll(data, A, c, m, *args)[t])

        res = minimize(f, np.zeros(d), method="BFGS", options={"gtol": 1e-7})
        assert np.linalg.norm(res.x) > 0.1  # the slopes are not trivially zero
        np.testing.assert_allclose(m_star[t].numpy(), res.x, rtol=1e-4, atol=1e-5)
        # and the closed form is at least as good as the numerical minimum
        assert f(m_star[t].numpy()) <= res.fun + 1e-9 * abs(res.fun)


# ------------------------------------------------------- latent-space reduction


@pytest.mark.parametrize("p,d", SIZES)
@pytest.mark.parametrize("sigma_obs", [0.01, 0.3])
def test_latent_nll_equals_profile_nll(rng, p, d, sigma_obs):
    _, stats, _ = _random_problem(rng, p, d)
    A, c, _ = _random_params(rng, p, d)
    n, Sxx, sxy, syy = _torch_stats(stats)
    P, extra, logdet, G = mtlcm_latent_statistics(A, Sxx, sxy, syy)
    got = mtlcm_latent_nll(c, n, P, extra, logdet, G, p, 0.1, sigma_obs)
    want = mtlcm_profile_nll(A, c, n, Sxx, sxy, syy, 0.1, sigma_obs)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=0.0)


def test_latent_statistics_closed_form(rng):
    p, d = 5, 3
    _, stats, _ = _random_problem(rng, p, d)
    A, _, _ = _random_params(rng, p, d)
    _, Sxx, sxy, syy = _torch_stats(stats)
    P, extra, logdet, G = mtlcm_latent_statistics(A, Sxx, sxy, syy)
    Ap = torch.linalg.pinv(A)
    torch.testing.assert_close(G, torch.linalg.inv(A.T @ A))
    torch.testing.assert_close(logdet, torch.logdet(A.T @ A))
    proj = A @ Ap
    for t in range(len(COUNTS)):
        N = Sxx[t] - torch.outer(sxy[t], sxy[t]) / syy[t]
        torch.testing.assert_close(P[t], Ap @ N @ Ap.T)
        outside = torch.trace((torch.eye(p, dtype=F64) - proj) @ Sxx[t])
        torch.testing.assert_close(extra[t], outside)
    assert bool((extra > 0).all())  # p > d: random data have scatter outside span(A)


# ------------------------------------------------------------ optimal indicators


@pytest.mark.parametrize("latent_model", [False, True])
def test_optimal_indicators_satisfy_box_kkt(rng, latent_model):
    p, d = 5, 3
    _, stats, A_true = _random_problem(
        rng, p, d, counts=(40, 60, 50, 80), latent_model=latent_model
    )
    n, Sxx, sxy, syy = _torch_stats(stats)
    sigma_s, sigma_obs = 0.1, 0.01
    if latent_model:  # near the generating mixing: indicators hit both bounds
        A = torch.as_tensor(A_true + 0.01 * rng.normal(size=A_true.shape), dtype=F64)
    else:  # random mixing scaled so that latent variances are mostly inside the box
        A = torch.as_tensor(rng.normal(size=(p, d)), dtype=F64)
        P = mtlcm_latent_statistics(A, Sxx, sxy, syy)[0]
        var = torch.diagonal(P, dim1=-2, dim2=-1) / n[:, None]
        A = A * (var.median() / 0.2).sqrt()
    P, extra, logdet, G = mtlcm_latent_statistics(A, Sxx, sxy, syy)
    c = mtlcm_optimal_indicators(n, P, G, sigma_s, sigma_obs)
    assert c.shape == (len(n), d)
    assert bool(((c >= 0) & (c <= 1)).all())

    def f(cc):
        return mtlcm_latent_nll(cc, n, P, extra, logdet, G, p, sigma_s, sigma_obs)

    def grad(cc):
        cc = cc.clone().requires_grad_()
        return torch.autograd.grad(f(cc).sum(), cc)[0].numpy()

    g, cn = grad(c), c.numpy()
    # Relative to the gradient at the box centre. The solver stops on the Newton
    # decrement (objective change ~1e-14 relative), which leaves free-coordinate
    # gradients up to ~2e-6 of this scale where the curvature is high (v near
    # sigma_s^2); observed max over seeds 0-9: 1.6e-6.
    tol = 1e-5 * np.abs(grad(torch.full_like(c, 0.5))).max()
    at_lo, at_hi = cn <= 0, cn >= 1
    free = ~(at_lo | at_hi)
    np.testing.assert_allclose(g[free], 0.0, atol=tol)
    assert np.all(g[at_lo] >= -tol) and np.all(g[at_hi] <= tol)
    if latent_model:  # both bounds occur, so the bound checks above are not vacuous
        assert at_lo.any() and at_hi.any()
    else:
        assert free.any()
    # no feasible perturbation decreases any task's objective
    with torch.no_grad():
        f0 = f(c)
        for eps in (1e-2, 1e-4):
            for _ in range(20):
                delta = torch.as_tensor(rng.normal(size=c.shape), dtype=F64)
                c_new = (c + eps * delta).clamp(0.0, 1.0)
                assert bool((f(c_new) >= f0 - 1e-10 * f0.abs()).all())


def test_optimal_indicators_warm_start_agrees(rng):
    """From a warm start anywhere in the box, the same optimum (problem is local)."""
    p, d = 4, 4
    _, stats, _ = _random_problem(rng, p, d, counts=(40, 60, 50, 80), latent_model=True)
    n, Sxx, sxy, syy = _torch_stats(stats)
    A = torch.as_tensor(rng.normal(size=(p, d)), dtype=F64)
    P, extra, logdet, G = mtlcm_latent_statistics(A, Sxx, sxy, syy)
    cold = mtlcm_optimal_indicators(n, P, G, 0.1, 0.01)
    near = (cold + 0.05 * torch.as_tensor(rng.normal(size=cold.shape))).clamp(0, 1)
    warm = mtlcm_optimal_indicators(n, P, G, 0.1, 0.01, c0=near)
    f = lambda cc: mtlcm_latent_nll(cc, n, P, extra, logdet, G, p, 0.1, 0.01)
    torch.testing.assert_close(f(warm), f(cold), rtol=1e-10, atol=0.0)


# ------------------------------------------------------------------- gradcheck


def test_gradcheck_nll(rng):
    p, d, counts = 3, 2, (6, 8)
    _, stats, _ = _random_problem(rng, p, d, counts=counts)
    A, c, m = _random_params(rng, p, d, T=len(counts))
    st = _torch_stats(stats)
    assert torch.autograd.gradcheck(
        lambda A_, c_, m_: mtlcm_nll(A_, c_, m_, *st, 0.3, 0.2),
        (A.requires_grad_(), c.requires_grad_(), m.requires_grad_()),
    )


def test_gradcheck_latent_nll_through_statistics(rng):
    p, d, counts = 4, 2, (6, 8)
    _, stats, _ = _random_problem(rng, p, d, counts=counts)
    A, c, _ = _random_params(rng, p, d, T=len(counts))
    n, Sxx, sxy, syy = _torch_stats(stats)

    def fun(A_, c_):
        P, extra, logdet, G = mtlcm_latent_statistics(A_, Sxx, sxy, syy)
        return mtlcm_latent_nll(c_, n, P, extra, logdet, G, p, 0.3, 0.2)

    assert torch.autograd.gradcheck(fun, (A.requires_grad_(), c.requires_grad_()))


def test_gradcheck_profile_nll(rng):
    p, d, counts = 3, 2, (6, 8)
    _, stats, _ = _random_problem(rng, p, d, counts=counts)
    A, c, _ = _random_params(rng, p, d, T=len(counts))
    st = _torch_stats(stats)
    assert torch.autograd.gradcheck(
        lambda A_, c_: mtlcm_profile_nll(A_, c_, *st, 0.3, 0.2),
        (A.requires_grad_(), c.requires_grad_()),
    )


# ------------------------------------------------- sufficient statistics (_stats)


def _direct_stats(X, y, task_ids, n_tasks):
    """np.cov-style centred scatter of every task, computed the obvious way."""
    out = {k: [] for k in ("n", "x_mean", "y_mean", "Sxx", "sxy", "syy")}
    for t in range(n_tasks):
        xt, yt = X[task_ids == t], y[task_ids == t]
        n = len(yt)
        out["n"].append(n)
        out["x_mean"].append(xt.mean(0))
        out["y_mean"].append(yt.mean())
        out["Sxx"].append(np.cov(xt, rowvar=False, ddof=0) * n)
        out["sxy"].append((xt - xt.mean(0)).T @ (yt - yt.mean()))
        out["syy"].append(np.var(yt) * n)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def _assert_stats_close(stats, want, rtol=1e-10):
    for key, value in want.items():
        np.testing.assert_allclose(getattr(stats, key), value, rtol=rtol, atol=1e-9)


@pytest.mark.parametrize("chunk_size", [3, 65536])
def test_task_statistics_equal_direct_computation(rng, chunk_size):
    data, _, _ = _random_problem(rng, 4, 2)
    X = data.X + 100.0  # an offset: centring must be exact, not naive
    d = check_multitask(X, data.y, data.task_ids)
    stats = task_statistics(d, chunk_size=chunk_size)
    _assert_stats_close(stats, _direct_stats(X, data.y, data.task_ids, d.n_tasks))
    assert stats.n_tasks == len(COUNTS)
    np.testing.assert_array_equal(stats.Sxx, stats.Sxx.transpose(0, 2, 1))


def test_task_statistics_chunked_equals_unchunked(rng):
    data, _, _ = _random_problem(rng, 5, 3, counts=(17, 30, 23, 9))
    a = task_statistics(data, chunk_size=3)
    b = task_statistics(data)
    for key in ("n", "x_mean", "y_mean", "Sxx", "sxy", "syy"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), rtol=1e-12)


def test_task_statistics_long_equals_wide(seed):
    from identrep.datasets import make_linear_tasks

    bundle = make_linear_tasks(n_tasks=6, n_samples=15, n_latents=3, random_state=seed)
    long = task_statistics(check_multitask(bundle.X, bundle.y, bundle.task_ids))
    wide = task_statistics(check_multitask(*bundle.to_wide()), chunk_size=4)
    for key in ("n", "x_mean", "y_mean", "Sxx", "sxy", "syy"):
        np.testing.assert_allclose(getattr(wide, key), getattr(long, key), rtol=1e-11)


def test_task_statistics_wide_shared_rows(rng):
    """Wide data, every task observed on every row (x-statistics shared) and a
    partly observed pair of tasks with the same missingness pattern."""
    n, p = 25, 3
    X = rng.normal(size=(n, p)) + 5.0
    Y = rng.normal(size=(n, 5))
    Y[::3, 3] = np.nan
    Y[::3, 4] = np.nan  # tasks 3 and 4 share their rows, tasks 0-2 share all rows
    stats = task_statistics(check_multitask(X, Y), chunk_size=7)
    for t in range(5):
        obs = ~np.isnan(Y[:, t])
        want = _direct_stats(X[obs], Y[obs, t], np.zeros(obs.sum(), int), 1)
        for key, value in want.items():
            np.testing.assert_allclose(getattr(stats, key)[t], value[0], rtol=1e-10)
    assert stats.n.tolist() == [25, 25, 25, 16, 16]
    # the y-statistics are per task even where the x-statistics are shared
    assert len(np.unique(np.round(stats.syy, 8))) == 5


def test_recentre_equals_direct_computation(rng):
    data, stats, _ = _random_problem(rng, 3, 2)
    xc = rng.normal(size=stats.x_mean.shape)
    yc = rng.normal(size=stats.y_mean.shape)
    moved = stats.recentre(xc, yc)
    X, y, t = data.X[data.rows], data.y, data.task_ids
    for k in range(stats.n_tasks):
        dx, dy = X[t == k] - xc[k], y[t == k] - yc[k]
        np.testing.assert_allclose(moved.Sxx[k], dx.T @ dx, rtol=1e-10)
        np.testing.assert_allclose(moved.sxy[k], dx.T @ dy, rtol=1e-10)
        np.testing.assert_allclose(moved.syy[k], dy @ dy, rtol=1e-10)
    np.testing.assert_array_equal(moved.x_centre, xc)
    np.testing.assert_array_equal(moved.y_centre, yc)
    # the sample means are kept, so the object can be recentred again exactly
    np.testing.assert_array_equal(moved.x_mean, stats.x_mean)
    np.testing.assert_array_equal(moved.y_mean, stats.y_mean)
    np.testing.assert_array_equal(moved.n, stats.n)
    # recentring at the task means changes nothing
    same = stats.recentre(stats.x_mean, stats.y_mean)
    np.testing.assert_allclose(same.Sxx, stats.Sxx, rtol=1e-12)


def test_recentre_twice_equals_recentre_once(rng):
    _, stats, _ = _random_problem(rng, 3, 2)
    c1, c2 = rng.normal(size=(2, *stats.x_mean.shape))
    twice = stats.recentre(c1, np.zeros(stats.n_tasks)).recentre(
        c2, np.zeros(stats.n_tasks)
    )
    once = stats.recentre(c2, np.zeros(stats.n_tasks))
    np.testing.assert_allclose(twice.Sxx, once.Sxx, rtol=1e-9)


def test_residual_covariances_equal_per_task_regression(rng):
    data, stats, _ = _random_problem(rng, 4, 2)
    b, R = stats.residual_covariances()
    X, y, t = data.X[data.rows], data.y, data.task_ids
    for k in range(stats.n_tasks):
        xk, yk = X[t == k] - X[t == k].mean(0), y[t == k] - y[t == k].mean()
        slope = np.linalg.lstsq(yk[:, None], xk, rcond=None)[0][0]
        resid = xk - np.outer(yk, slope)
        np.testing.assert_allclose(b[k], slope, rtol=1e-10)
        np.testing.assert_allclose(
            R[k], resid.T @ resid / len(yk), rtol=1e-9, atol=1e-12
        )
