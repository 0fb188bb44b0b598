"""Tests of the task-head solvers (models/multitask/heads/): closed form, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from identrep.models.multitask.heads import (
    JointHeads,
    fit_ridge_heads,
    ridge_heads,
    ridge_heads_masked,
    task_moments,
)

F64 = torch.float64


def _problem(seed, n=60, d=3, T=5, offset=3.0, absent=(4,)):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(n, d, generator=g, dtype=F64) + offset
    W = torch.randn(T, d, generator=g, dtype=F64)
    t = torch.randint(0, T, (n,), generator=g)
    for a in absent:  # make some tasks absent from the batch
        t[t == a] = 0
    y = (F * W[t]).sum(1) + 2.0 + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return F, y, t, T


def _explicit(F, y, t, T, alpha):
    """Per-task ridge with unpenalised intercept via explicit normal equations on
    the uncentred, intercept-augmented design (no centring trick)."""
    d = F.shape[1]
    Ws, bs = [], []
    for k in range(T):
        m = t == k
        n_k = int(m.sum())
        if n_k == 0:
            Ws.append(F.new_zeros(d))
            bs.append(F.new_zeros(()))
            continue
        A = torch.cat([F[m], F.new_ones(n_k, 1)], 1)
        P = torch.diag(torch.cat([F.new_full((d,), alpha * n_k), F.new_zeros(1)]))
        theta = torch.linalg.solve(A.T @ A + P, A.T @ y[m])
        Ws.append(theta[:d])
        bs.append(theta[d])
    return torch.stack(Ws), torch.stack(bs)


def _lstsq(F, y, t, T, alpha):
    """The same heads by least squares on the augmented system
    [F 1; sqrt(n alpha) I 0] theta ~ [y; 0] (torch.linalg.lstsq)."""
    d = F.shape[1]
    Ws, bs = [], []
    for k in range(T):
        m = t == k
        n_k = int(m.sum())
        if n_k == 0:
            Ws.append(F.new_zeros(d))
            bs.append(F.new_zeros(()))
            continue
        top = torch.cat([F[m], F.new_ones(n_k, 1)], 1)
        pen = torch.cat(
            [math.sqrt(alpha * n_k) * torch.eye(d, dtype=F.dtype), F.new_zeros(d, 1)], 1
        )
        A = torch.cat([top, pen])
        rhs = torch.cat([y[m], F.new_zeros(d)])
        theta = torch.linalg.lstsq(A, rhs[:, None]).solution[:, 0]
        Ws.append(theta[:d])
        bs.append(theta[d])
    return torch.stack(Ws), torch.stack(bs)


@pytest.mark.parametrize("alpha", [1e-6, 1e-2, 3.0])
def test_ridge_heads_match_explicit_normal_equations(seed, alpha):
    F, y, t, T = _problem(seed)
    W, b = ridge_heads(F, y, t, T, alpha)
    W0, b0 = _explicit(F, y, t, T, alpha)
    torch.testing.assert_close(W, W0, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(b, b0, rtol=1e-8, atol=1e-9)
    assert torch.all(W[4] == 0) and b[4] == 0  # absent task


def test_ridge_heads_recover_noiseless_weights(seed):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(200, 4, generator=g, dtype=F64)
    t = torch.arange(200) % 2
    w = torch.randn(2, 4, generator=g, dtype=F64)
    y = (F * w[t]).sum(1) + torch.tensor([1.0, -3.0], dtype=F64)[t]
    W, b = ridge_heads(F, y, t, 2, alpha=1e-12)
    torch.testing.assert_close(W, w, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(b, torch.tensor([1.0, -3.0], dtype=F64))


def test_gradient_matches_autograd_through_explicit_lstsq(seed):
    F, y, t, T = _problem(seed, n=40)
    g = torch.Generator().manual_seed(seed + 1)
    probe = torch.randn(40, generator=g, dtype=F64)

    def outer(solver, F, y):
        W, b = solver(F, y, t, T, 0.05)
        pred = (F * W[t]).sum(1) + b[t]
        return 0.5 * (pred - y).square().mean() + (probe * pred).mean()

    grads = []
    for solver in (ridge_heads, _lstsq):
        Fr, yr = F.clone().requires_grad_(), y.clone().requires_grad_()
        grads.append(torch.autograd.grad(outer(solver, Fr, yr), (Fr, yr)))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)


def test_gradcheck_ridge_heads(seed):
    F, y, t, T = _problem(seed, n=18, d=2, T=3, offset=1.0, absent=())
    F.requires_grad_()
    y.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda F, y: ridge_heads(F, y, t, T, 0.1), (F, y), eps=1e-6, atol=1e-6
    )
    Y = torch.zeros(18, T, dtype=F64)
    M = torch.zeros(18, T, dtype=torch.bool)
    M[torch.arange(18), t] = True
    M[::3, 0] = True  # some rows observe two tasks
    assert torch.autograd.gradcheck(
        lambda F, y: ridge_heads_masked(F, Y + y[:, None], M, 0.1),
        (F, y),
        eps=1e-6,
        atol=1e-6,
    )


def test_masked_heads_equal_long_heads_on_the_same_observations(seed):
    """Wide rows observing several tasks == long format with rows repeated."""
    g = torch.Generator().manual_seed(seed)
    n, d, T = 30, 3, 4
    F = torch.randn(n, d, generator=g, dtype=F64) + 2
    Y = torch.randn(n, T, generator=g, dtype=F64)
    M = torch.rand(n, T, generator=g) < 0.6
    M[:, 3] = False  # an unobserved task
    Y_nan = torch.where(M, Y, torch.full_like(Y, float("nan")))
    W, b = ridge_heads_masked(F, Y_nan, M, 0.3)
    rows, tasks = torch.nonzero(M, as_tuple=True)
    W0, b0 = ridge_heads(F[rows], Y[rows, tasks], tasks, T, 0.3)
    torch.testing.assert_close(W, W0)
    torch.testing.assert_close(b, b0)
    assert torch.all(W[3] == 0) and torch.isfinite(W).all()


def test_observation_weights_select_the_fitting_set(seed):
    F, y, t, T = _problem(seed)
    keep = torch.arange(len(y)) % 3 != 0
    W, b = ridge_heads(F, y, t, T, 0.1, weight=keep)
    W0, b0 = ridge_heads(F[keep], y[keep], t[keep], T, 0.1)
    torch.testing.assert_close(W, W0)
    torch.testing.assert_close(b, b0)


def test_fit_ridge_heads_chunked_float64_equals_one_shot(seed):
    F, y, t, T = _problem(seed, n=101)
    W, b = fit_ridge_heads(F.float(), y.float(), t, T, 0.01, chunk_size=17)
    assert W.dtype == F64
    W0, b0 = ridge_heads(F.float().double(), y.float().double(), t, T, 0.01)
    torch.testing.assert_close(W, W0)
    torch.testing.assert_close(b, b0)


def test_fit_ridge_heads_ragged_tasks_use_the_chunked_path(seed):
    """One large task and many singletons: padding would waste memory."""
    g = torch.Generator().manual_seed(seed)
    t = torch.cat([torch.zeros(100, dtype=torch.long), torch.arange(1, 51)])
    F = torch.randn(150, 3, generator=g, dtype=F64)
    y = torch.randn(150, generator=g, dtype=F64)
    W, b = fit_ridge_heads(F, y, t, 52, 0.1, chunk_size=16)
    W0, b0 = ridge_heads(F, y, t, 52, 0.1)
    torch.testing.assert_close(W, W0)
    torch.testing.assert_close(b, b0)
    assert torch.all(W[51] == 0) and b[51] == 0  # absent task


def test_float32_is_accurate_despite_a_large_feature_offset(seed):
    F, y, t, T = _problem(seed, n=400, offset=50.0)
    W64, b64 = ridge_heads(F, y, t, T, 0.01)
    W32, b32 = ridge_heads(F.float(), y.float(), t, T, 0.01)
    torch.testing.assert_close(W32.double(), W64, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(b32.double(), b64, rtol=1e-3, atol=5e-2)


def test_single_sample_task_predicts_its_target():
    F = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]], dtype=F64)
    y = torch.tensor([1.0, 2.0, 9.0], dtype=F64)
    t = torch.tensor([0, 0, 1])
    W, b = ridge_heads(F, y, t, 2, 0.1)
    assert torch.all(W[1] == 0) and b[1] == 9.0
    m = task_moments(F, y, t, 2)
    torch.testing.assert_close(m.count, torch.tensor([2.0, 1.0], dtype=F64))
    torch.testing.assert_close(m.mean_f[0], torch.tensor([2.0, 3.0], dtype=F64))


def test_alpha_must_be_positive():
    F, y, t, T = _problem(0)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        ridge_heads(F, y, t, T, 0.0)


def test_joint_heads(seed):
    torch.manual_seed(seed)
    heads = JointHeads(4, 7)
    assert heads.weight.shape == (7, 4) and heads.bias.shape == (7,)
    bound = 1 / math.sqrt(4)
    assert heads.weight.abs().max() <= bound and heads.bias.abs().max() <= bound
    F = torch.randn(9, 4)
    t = torch.randint(0, 7, (9,))
    P = heads(F)
    assert P.shape == (9, 7)
    torch.testing.assert_close(heads.gather(F, t), P[torch.arange(9), t])
    with pytest.raises(ValueError, match="must be positive"):
        JointHeads(0, 3)


@pytest.mark.parametrize("observed", [0.7, 0.97])  # direct and complement sums
def test_wide_refit_equals_the_long_refit_on_the_same_observations(observed):
    from identrep.models.multitask.heads import fit_ridge_heads, fit_ridge_heads_wide

    g = torch.Generator().manual_seed(0)
    n, T, d = 300, 7, 4
    F = torch.randn(n, d, generator=g, dtype=torch.float64) + 2.0
    Y = torch.randn(n, T, generator=g, dtype=torch.float64)
    mask = torch.rand(n, T, generator=g) < observed
    mask[:5] = False  # rows no task observes
    Y[~mask] = float("nan")  # unobserved entries are never read
    rows, tasks = torch.nonzero(mask, as_tuple=True)
    W_long, b_long = fit_ridge_heads(F[rows], Y[rows, tasks], tasks, T, alpha=1e-3)
    W_wide, b_wide = fit_ridge_heads_wide(F, Y, mask, alpha=1e-3, chunk_size=64)
    torch.testing.assert_close(W_wide, W_long, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(b_wide, b_long, rtol=1e-10, atol=1e-10)
