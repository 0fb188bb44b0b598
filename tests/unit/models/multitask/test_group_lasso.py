"""Group-lasso heads (models/multitask/heads/group_lasso.py): closed forms, agreement
with scikit-learn's Lasso, and implicit gradients against finite differences and the
unrolled solver (float64, relative error < 1e-4)."""

from __future__ import annotations

import pytest
import torch
from sklearn.linear_model import Lasso

from identrep.models.multitask.heads import (
    fit_group_lasso_heads,
    group_lasso_heads,
    group_lasso_multinomial,
    group_lasso_quadratic,
    task_moments,
)
from identrep.models.multitask.heads.group_lasso import (
    QuadraticLoss,
    block_soft_threshold,
    lambda_max_multinomial,
    lambda_max_quadratic,
    support_solve,
)

F64 = torch.float64
TIGHT = dict(tol=1e-14, max_iter=100_000)


def _regression(seed, T=4, n=50, d=6, k=1, corr=0.8):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(T, n, d, generator=g, dtype=F64)
    F[..., 1] += corr * F[..., 0]
    keep = (torch.rand(T, d, 1, generator=g) < 0.5).to(F64)
    W = torch.randn(T, d, k, generator=g, dtype=F64) * keep
    Y = F @ W + 0.1 * torch.randn(T, n, k, generator=g, dtype=F64)
    Fc, Yc = F - F.mean(1, keepdim=True), Y - Y.mean(1, keepdim=True)
    return Fc.transpose(1, 2) @ Fc / n, Fc.transpose(1, 2) @ Yc / n


def _classification(seed, T=3, n=60, d=5, K=3):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(T, n, d, generator=g, dtype=F64)
    logits = F @ torch.randn(T, d, K, generator=g, dtype=F64)
    labels = torch.distributions.Categorical(logits=logits).sample()
    Fa = torch.cat([F, torch.ones(T, n, 1, dtype=F64)], -1)
    Y = torch.nn.functional.one_hot(labels, K).to(F64)
    return Fa, Y, torch.ones(T, n, dtype=F64)


def _rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


# ------------------------------------------------------------------- closed forms
def test_block_soft_threshold_shrinks_rows_and_spares_unpenalised_ones():
    Z = torch.tensor([[[3.0, 4.0], [0.3, 0.4], [1.0, 0.0]]], dtype=F64)
    out = block_soft_threshold(Z, torch.tensor([1.0], dtype=F64))
    torch.testing.assert_close(out[0, 0], torch.tensor([2.4, 3.2], dtype=F64))
    assert out[0, 1].abs().sum() == 0 and out[0, 2].abs().sum() == 0
    pen = torch.tensor([True, True, False])
    out = block_soft_threshold(Z, torch.tensor([1.0], dtype=F64), pen)
    torch.testing.assert_close(out[0, 2], Z[0, 2])
    # k = 1: plain soft-thresholding
    z = torch.tensor([[[2.0], [-0.5], [-3.0]]], dtype=F64)
    out = block_soft_threshold(z, torch.tensor([1.0], dtype=F64))
    assert out.flatten().tolist() == [1.0, 0.0, -2.0]


def test_orthonormal_design_gives_the_block_soft_thresholded_correlations():
    C = torch.randn(2, 4, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    G = torch.eye(4, dtype=F64).expand(2, 4, 4)
    lam = 0.5 * lambda_max_quadratic(C)
    W, info = group_lasso_quadratic(G, C, lam, tol=1e-12)
    assert info.converged
    torch.testing.assert_close(W, block_soft_threshold(C, lam))


@pytest.mark.parametrize("k", [1, 2])
def test_lambda_max_is_the_smallest_penalty_with_a_zero_solution(seed, k):
    G, C = _regression(seed, k=k)
    lmax = lambda_max_quadratic(C)
    W, _ = group_lasso_quadratic(G, C, lmax * (1 + 1e-9), tol=1e-12)
    assert W.abs().max() == 0
    W, _ = group_lasso_quadratic(G, C, lmax * 0.95, tol=1e-12)
    assert (W.norm(dim=-1).amax(-1) > 0).all()


def test_multinomial_lambda_max_is_exact(seed):
    F, Y, om = _classification(seed)
    lmax = lambda_max_multinomial(F, Y, om)
    W, _ = group_lasso_multinomial(F, Y, om, lmax * (1 + 1e-6), tol=1e-12)
    assert W[:, :-1].abs().max() < 1e-12  # only the intercept is fitted
    W, _ = group_lasso_multinomial(F, Y, om, lmax * 0.95, tol=1e-12)
    assert (W[:, :-1].norm(dim=-1).amax(-1) > 0).all()


def test_lasso_heads_match_sklearn_lasso_with_intercept(seed):
    g = torch.Generator().manual_seed(seed)
    n, d, T = 80, 5, 3
    F = torch.randn(n * T, d, generator=g, dtype=F64) + 2.0
    t = torch.arange(n * T) // n
    Wt = torch.randn(T, d, generator=g, dtype=F64) * (
        torch.rand(T, d, generator=g) < 0.6
    )
    y = (F * Wt[t]).sum(1) + 1.5 + 0.2 * torch.randn(n * T, generator=g, dtype=F64)
    W, b, info = fit_group_lasso_heads(F, y, t, T, l1_reg=0.2, tol=1e-12)
    assert info.converged
    for k in range(T):
        Fk, yk = F[t == k].numpy(), y[t == k].numpy()
        yc = yk - yk.mean()
        lam = 0.2 * abs((Fk - Fk.mean(0)).T @ yc).max() / n
        ref = Lasso(alpha=lam, tol=1e-14, max_iter=100_000).fit(Fk, yk)
        torch.testing.assert_close(W[k], torch.as_tensor(ref.coef_), atol=1e-7, rtol=0)
        assert abs(float(b[k]) - ref.intercept_) < 1e-7


def test_absent_tasks_get_zero_heads_and_warm_start_saves_iterations():
    g = torch.Generator().manual_seed(0)
    F = torch.randn(90, 4, generator=g, dtype=F64)
    t = torch.arange(90) % 2  # task 2 absent
    y = F[:, 0] - 2 * F[:, 2] + 0.1 * torch.randn(90, generator=g, dtype=F64)
    m = task_moments(F, y, t, 3)
    W, b, cold = group_lasso_heads(m, 0.1, tol=1e-10)
    assert W[2].abs().sum() == 0 and b[2] == 0
    _, _, warm = group_lasso_heads(m, 0.1, W0=W, tol=1e-10)
    assert warm.n_iter < cold.n_iter


def test_bad_solver_options_are_refused():
    G, C = _regression(0)
    lam = lambda_max_quadratic(C)
    with pytest.raises(ValueError, match="diff must be 'implicit' or 'unrolled'"):
        group_lasso_quadratic(G, C, lam, diff="backprop")
    with pytest.raises(ValueError, match="solve must be 'cg' or 'dense'"):
        group_lasso_quadratic(G, C, lam, solve="lu")


# ---------------------------------------------------------------------- gradients
def _directional_fd(fun, inputs, directions, eps=1e-6):
    plus = fun(*[x + eps * v for x, v in zip(inputs, directions, strict=True)])
    minus = fun(*[x - eps * v for x, v in zip(inputs, directions, strict=True)])
    return float((plus - minus).sum() / (2 * eps))


def _analytic(fun, inputs, directions, **kw):
    xs = [x.clone().requires_grad_() for x in inputs]
    fun(*xs, **kw).sum().backward()
    return float(sum((x.grad * v).sum() for x, v in zip(xs, directions, strict=True)))


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("solve", ["cg", "dense"])
def test_implicit_gradient_of_quadratic_heads_matches_finite_differences(
    seed, k, solve
):
    G, C = _regression(seed, k=k)
    lam = 0.3 * lambda_max_quadratic(C)
    g = torch.Generator().manual_seed(seed + 100)
    V = torch.randn(C.shape, generator=g, dtype=F64)
    dG = torch.randn(G.shape, generator=g, dtype=F64)
    dG = dG + dG.transpose(1, 2)
    dC = torch.randn(C.shape, generator=g, dtype=F64)

    def out(G_, C_, **kw):
        return group_lasso_quadratic(G_, C_, lam, **TIGHT, **kw)[0] * V

    fd = _directional_fd(out, (G, C), (dG, dC))
    implicit = _analytic(out, (G, C), (dG, dC), solve=solve)
    unrolled = _analytic(out, (G, C), (dG, dC), diff="unrolled")
    assert _rel(implicit, fd) < 1e-4, (implicit, fd)
    assert _rel(implicit, unrolled) < 1e-4, (implicit, unrolled)


def test_implicit_gradient_of_multinomial_heads_matches_finite_differences(seed):
    F, Y, om = _classification(seed)
    lam = 0.3 * lambda_max_multinomial(F, Y, om)
    g = torch.Generator().manual_seed(seed + 100)
    V = torch.randn(F.shape[0], F.shape[2], Y.shape[2], generator=g, dtype=F64)
    dF = torch.randn(F.shape, generator=g, dtype=F64)
    dF[..., -1] = 0  # the intercept column stays ones

    def out(F_, **kw):
        return group_lasso_multinomial(F_, Y, om, lam, **TIGHT, **kw)[0] * V

    fd = _directional_fd(out, (F,), (dF,))
    implicit = _analytic(out, (F,), (dF,))
    unrolled = _analytic(out, (F,), (dF,), diff="unrolled")
    assert _rel(implicit, fd) < 1e-4, (implicit, fd)
    assert _rel(implicit, unrolled) < 1e-4, (implicit, unrolled)


def test_support_restricted_cg_equals_the_dense_solve_and_is_zero_off_support(seed):
    G, C = _regression(seed, T=5, d=8, k=2)
    lam = 0.4 * lambda_max_quadratic(C)
    W, _ = group_lasso_quadratic(G, C, lam, **TIGHT)
    V = torch.randn(W.shape, dtype=F64, generator=torch.Generator().manual_seed(seed))
    cg = support_solve(QuadraticLoss, W, lam, None, (G, C), V, method="cg")
    dense = support_solve(QuadraticLoss, W, lam, None, (G, C), V, method="dense")
    torch.testing.assert_close(cg, dense, rtol=1e-8, atol=1e-10)
    off = W.norm(dim=-1) == 0
    assert off.any() and cg[off].abs().max() == 0


def test_gradients_reach_features_and_targets_through_the_heads(seed):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(120, 4, generator=g, dtype=F64, requires_grad=True)
    y = torch.randn(120, generator=g, dtype=F64, requires_grad=True)
    t = torch.arange(120) % 3
    W, b, _ = group_lasso_heads(task_moments(F, y, t, 3), 0.1)
    ((F * W[t]).sum(1) + b[t] - y).square().mean().backward()
    assert F.grad.abs().sum() > 0 and y.grad.abs().sum() > 0
