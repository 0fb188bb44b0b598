"""MTLCM with bounded slopes m = (1 - c) gamma, |gamma| <= B
(models/multitask/_mtlcm_bounded.py).

Oracles: the exact likelihood ``mtlcm_nll`` (itself tested against
``torch.distributions.MultivariateNormal``) at the objective's own (c, m); a brute
force grid for the inner solve; the free objective for a loose bound; central
finite differences for the gradient.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.models.multitask._likelihoods import mtlcm_nll
from identrep.models.multitask._mtlcm_bounded import BoundedObjective, solve_bounded
from identrep.models.multitask._mtlcm_objective import ProfiledObjective
from identrep.models.multitask._mtlcm_solver import stats_to_torch
from identrep.models.multitask._stats import data_units, task_statistics
from identrep.utils.validation import check_multitask

F64 = torch.float64
SIGMA_S, SIGMA_OBS = 0.1, 0.01


def _problem(p, d, seed=0, n_tasks=12):
    data = ir.datasets.make_linear_tasks(
        n_tasks=n_tasks, n_samples=40, n_latents=d, n_causal=1, random_state=seed
    )
    X = data.X
    if p > d:  # extra observed dimensions: a (p, d) mixing
        rng = np.random.default_rng(seed)
        X = data.Z @ rng.standard_normal((p, d)).T
        X = X + 0.01 * rng.standard_normal(X.shape)
    md = check_multitask(X, data.y, data.task_ids, min_samples=2)
    stats = data_units(task_statistics(md, x_unit=None, y_unit=None))
    tens = stats_to_torch(stats, torch.device("cpu"))
    A = torch.as_tensor(
        np.random.default_rng(seed + 1).standard_normal((p, d)), dtype=F64
    )
    return tens, A


@pytest.mark.parametrize("p, d", [(4, 4), (6, 3)])
@pytest.mark.parametrize("bound", [0.3, 1.5])
def test_value_is_the_exact_likelihood_at_its_own_parameters(p, d, bound):
    tens, A = _problem(p, d)
    obj = BoundedObjective(*tens, SIGMA_S, SIGMA_OBS, bound)
    f, _, v = obj(A, grad=False)
    c = (v - SIGMA_S**2) / (1 - SIGMA_S**2)
    exact = mtlcm_nll(A, c, obj.m, *tens, sigma_s=SIGMA_S, sigma_obs=SIGMA_OBS)
    assert f == pytest.approx(float(exact.sum()) / float(tens[0].sum()), rel=1e-10)


@pytest.mark.parametrize("bound", [0.2, 1.0])
def test_slopes_respect_the_bound(bound):
    tens, A = _problem(5, 5)
    obj = BoundedObjective(*tens, SIGMA_S, SIGMA_OBS, bound)
    _, _, v = obj(A, grad=False)
    c = (v - SIGMA_S**2) / (1 - SIGMA_S**2)
    assert torch.all(obj.m.abs() <= bound * (1 - c) + 1e-12)
    assert torch.all(obj.m[c >= 1.0 - 1e-12] == 0)
    # a tight bound binds somewhere on this data (else the test tests nothing)
    if bound == 0.2:
        assert bool((obj.m.abs() >= bound * (1 - c) - 1e-12).any())


def test_inner_solve_beats_a_brute_force_grid():
    gen = torch.Generator().manual_seed(0)
    T, d, lo, beta = 6, 4, SIGMA_S**2, 1.2
    n = torch.full((T,), 50.0, dtype=F64)
    Pd = torch.rand(T, d, generator=gen, dtype=F64) * 60
    mhat = torch.randn(T, d, generator=gen, dtype=F64)
    syy = torch.full((T,), 40.0, dtype=F64)
    h0 = torch.full((d,), 1e-4, dtype=F64)
    v, m = solve_bounded(n, Pd, h0, mhat, syy, lo, beta)

    def value(v, m):  # the separable inner objective, slopes given
        h = v + h0
        return n[:, None] * torch.log(h) + (Pd + syy[:, None] * (m - mhat) ** 2) / h

    ours = value(v, m)
    # brute force: a fine grid in v, the feasible slope closest to m_hat
    grid = torch.linspace(lo, 1.0, 20001, dtype=F64)
    vg = grid.expand(T, d, -1)
    cap = beta * (1 - vg)
    mg = torch.maximum(torch.minimum(mhat[..., None], cap), -cap)
    h = vg + h0[None, :, None]
    brute = (
        n[:, None, None] * torch.log(h)
        + (Pd[..., None] + syy[:, None, None] * (mg - mhat[..., None]) ** 2) / h
    )
    assert torch.all(ours <= brute.min(-1).values + 1e-9 * ours.abs())


def test_loose_bound_equals_the_free_objective():
    tens, A = _problem(5, 5)
    free, _, v_free = ProfiledObjective(*tens, SIGMA_S, SIGMA_OBS)(A, grad=False)
    loose = BoundedObjective(*tens, SIGMA_S, SIGMA_OBS, 1e6)
    f, _, v = loose(A, grad=False)
    # the inner solve uses the diagonal of H = V + s^2 G (s^2 = 1e-4; G up to
    # ~1e2 for this random A): measured relative difference 3.2e-6
    assert f == pytest.approx(free, rel=2e-5)
    assert f >= free - 1e-12 * abs(free)  # the free optimum is never beaten
    assert torch.allclose(v, v_free, atol=1e-3)


@pytest.mark.parametrize("p, d", [(4, 4), (6, 3)])
def test_gradient_matches_finite_differences(p, d):
    tens, A = _problem(p, d, seed=3)
    obj = BoundedObjective(*tens, SIGMA_S, SIGMA_OBS, 1.0)
    _, g, _ = obj(A)
    E = torch.randn(A.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    h = 1e-6
    fp, _, _ = obj(A + h * E, grad=False)
    fm, _, _ = obj(A - h * E, grad=False)
    fd = (fp - fm) / (2 * h)
    # Danskin's gradient at the inner solution: exact up to the inner solve's
    # diagonal approximation (relative error of order s^2 = 1e-4)
    assert float((g * E).sum()) == pytest.approx(fd, rel=1e-3, abs=1e-8)


def test_fitted_causal_latents_do_not_move_with_y():
    data = ir.datasets.make_linear_tasks(
        n_tasks=50, n_samples=100, n_latents=5, n_causal=2, random_state=0
    )
    m = ir.MTLCM(gamma_bound=1.5, random_state=0).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    # measured 0.99986 (the free model: the same to 5 decimals); margin 0.01
    assert ir.metrics.mcc(data.Z, m.transform(data.X)) >= 0.99
    c = m.causal_indicators_
    slopes = m.target_slopes_ * m.y_scale_  # latent units per pooled RMS of y
    assert np.all(np.abs(slopes) <= 1.5 * (1 - c) + 1e-9)
    # 1.5 is the bound; gamma = m / (1 - c) is bounded where c < 1
    assert np.all(np.abs(m.spurious_coefs_[c < 0.99] * m.y_scale_) <= 1.5 + 1e-6)
