"""Score matching: exact Hessian diagonal, Hyvarinen and sliced objectives."""

from __future__ import annotations

import pytest
import torch

from identrep.models.vae._score_matching import (
    hyvarinen_score_matching,
    score_and_hessian_diagonal,
    score_matching_loss,
    sliced_score_matching,
)


def coupled_log_density(z):
    """A smooth non-factorised log-density: quadratic + tanh/sin cross terms."""
    P = torch.tensor(
        [[2.0, 0.7, -0.3], [0.7, 1.5, 0.4], [-0.3, 0.4, 1.0]], dtype=z.dtype
    )
    quad = -0.5 * ((z @ P) * z).sum(-1)
    return (
        quad
        + torch.tanh(z[:, 0] * z[:, 1])
        + 0.3 * torch.sin(z[:, 1] + 2 * z[:, 2]) * z[:, 0]
        + 0.1 * z[:, 2] ** 3
    )


def test_hessian_diagonal_matches_full_autograd_hessian(rng):
    z = torch.as_tensor(rng.standard_normal((5, 3)))
    log_p, score, hdiag = score_and_hessian_diagonal(coupled_log_density, z)
    for b in range(z.shape[0]):
        H = torch.autograd.functional.hessian(
            lambda v: coupled_log_density(v[None])[0], z[b]
        )
        torch.testing.assert_close(hdiag[b], torch.diagonal(H), atol=1e-5, rtol=0)
        # the coupling is real: row sums differ from the diagonal
        assert (H.sum(1) - torch.diagonal(H)).abs().max() > 1e-2
    g = torch.autograd.functional.jacobian(lambda v: coupled_log_density(v).sum(), z)
    torch.testing.assert_close(score, g, atol=1e-10, rtol=0)
    torch.testing.assert_close(log_p, coupled_log_density(z))


def test_hessian_diagonal_works_without_grad_and_for_linear_densities():
    z = torch.randn(4, 2, dtype=torch.float64)
    with torch.no_grad():
        _, s, h = score_and_hessian_diagonal(
            lambda v: v @ torch.tensor([1.0, -2.0], dtype=v.dtype), z
        )
    assert torch.equal(h, torch.zeros_like(h))
    torch.testing.assert_close(s, torch.tensor([[1.0, -2.0]] * 4, dtype=z.dtype))


def test_hyvarinen_objective_gaussian_closed_form():
    # log N(z; 0, P^-1): score = -P z, H = -P; J = -tr P + 0.5 |P z|^2
    P = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    z = torch.tensor([[1.0, -1.0], [0.3, 2.0]], dtype=torch.float64)
    _, s, h = score_and_hessian_diagonal(lambda v: -0.5 * ((v @ P) * v).sum(-1), z)
    want = -torch.trace(P) + 0.5 * (z @ P).square().sum(-1)
    torch.testing.assert_close(hyvarinen_score_matching(s, h), want)


def test_sliced_equals_exact_for_scaled_basis_projections():
    # v uniform over {sqrt(n) e_k}: E[v v^T] = I and the average over the n
    # projections is exactly tr(H) (and |s|^2), so sliced == exact.
    z = torch.randn(
        6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    _, s, h = score_and_hessian_diagonal(coupled_log_density, z)
    exact = hyvarinen_score_matching(s, h)
    basis = 3**0.5 * torch.eye(3, dtype=z.dtype)[:, None, :].expand(3, 6, 3)
    for vr in (True, False):
        est = sliced_score_matching(
            coupled_log_density, z, basis, variance_reduction=vr
        )
        torch.testing.assert_close(est, exact, atol=1e-10, rtol=0)


def test_sliced_is_unbiased_for_the_exact_objective():
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    _, s, h = score_and_hessian_diagonal(coupled_log_density, z)
    exact = hyvarinen_score_matching(s, h)
    v = torch.randn(20000, 6, 3, dtype=torch.float64, generator=gen)
    est = sliced_score_matching(coupled_log_density, z, v, create_graph=False)
    # Monte-Carlo standard error of the trace estimate here is ~0.01-0.02
    torch.testing.assert_close(est, exact, atol=0.08, rtol=0)
    # with a single projection the estimate is noisy: not exact
    one = sliced_score_matching(coupled_log_density, z, v[0], create_graph=False)
    assert (one - exact).abs().max() > 1e-3


def test_bad_shapes_raise():
    z = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="one value per sample"):
        score_and_hessian_diagonal(lambda v: v, z)
    with pytest.raises(ValueError, match="shape \\(batch, n_latents\\)"):
        score_and_hessian_diagonal(lambda v: v.sum(-1), torch.zeros(4))
    with pytest.raises(ValueError, match="projections must have shape"):
        sliced_score_matching(lambda v: v.sum(-1), z, torch.zeros(3, 2))
    with pytest.raises(ValueError, match="needs projections"):
        score_matching_loss(lambda v: v.sum(-1), z, method="sliced")
    with pytest.raises(ValueError, match="'exact' or 'sliced'"):
        score_matching_loss(lambda v: v.sum(-1), z, method="denoising")


def _fit_gaussian_precisions(method, seed, n_steps=120):
    """Score matching alone: fit per-environment Gaussian log-densities
    -0.5 z^T P_e z + b_e^T z (P_e symmetric) to samples; return (fit, truth).

    The objective is a convex quadratic in (P_e, b_e), minimised by the inverse
    sample covariance (Hyvarinen, 2005, section 2.3)."""
    gen = torch.Generator().manual_seed(seed)
    dt = torch.float64
    covs = torch.tensor(
        [
            [[1.0, 0.6], [0.6, 1.0]],
            [[1.5, -0.5], [-0.5, 1.0]],
            [[0.8, 0.3], [0.3, 1.2]],
        ],
        dtype=dt,
    )
    means = torch.tensor([[0.0, 0.5], [-0.5, 0.0], [0.5, -0.5]], dtype=dt)
    n_env, n = covs.shape[0], 6000
    Z = torch.cat(
        [
            means[e]
            + torch.randn(n, 2, dtype=dt, generator=gen)
            @ torch.linalg.cholesky(covs[e]).T
            for e in range(n_env)
        ]
    )
    env = torch.arange(n_env).repeat_interleave(n)
    S = torch.eye(2, dtype=dt).repeat(n_env, 1, 1).requires_grad_(True)
    b = torch.zeros(n_env, 2, dtype=dt, requires_grad=True)

    def log_density(z):
        P = 0.5 * (S + S.transpose(1, 2))
        return -0.5 * torch.einsum("bi,bij,bj->b", z, P[env], z) + (b[env] * z).sum(-1)

    opt = torch.optim.Adam([S, b], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, n_steps)
    for _ in range(n_steps):
        opt.zero_grad()
        v = None
        if method == "sliced":
            v = torch.randn(2, *Z.shape, dtype=dt, generator=gen)
        loss = score_matching_loss(log_density, Z, method=method, projections=v)
        loss.backward()
        opt.step()
        sched.step()
    P_hat = 0.5 * (S + S.transpose(1, 2)).detach()
    return P_hat, torch.linalg.inv(covs)


@pytest.mark.parametrize("method", ["exact", "sliced"])
def test_score_matching_recovers_precision_matrices(method, seed):
    P_hat, P = _fit_gaussian_precisions(method, seed)
    # observed max |error| over seeds 0-9 (6000 samples per environment; the
    # sampling error of the inverse covariance dominates): exact 0.025-0.073,
    # sliced 0.027-0.073
    assert (P_hat - P).abs().max() < 0.1
