"""Pure likelihood functions (torch tensors in, tensors out; no state, no RNG)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "mtlcm_latent_nll",
    "mtlcm_latent_statistics",
    "mtlcm_moments",
    "mtlcm_nll",
    "mtlcm_optimal_indicators",
    "mtlcm_optimal_slopes",
    "mtlcm_profile_nll",
]


def mtlcm_moments(
    A: Tensor, c: Tensor, m: Tensor, sigma_s: float, sigma_obs: float
) -> tuple[Tensor, Tensor]:
    """Per-task mean direction and covariance of the MTLCM marginal x | y, t.

    With causal indicators c_t in [0, 1]^d, target slopes m_t = (1 - c_t) * gamma_t
    and V_t = diag(c_t + (1 - c_t) sigma_s^2), the marginal is

        x | y, t ~ N(A m_t y, Sigma_t = A V_t A^T + sigma_obs^2 I).

    Parameters
    ----------
    A : Tensor of shape (p, d)
        Mixing matrix.
    c : Tensor of shape (T, d)
        Causal indicators in [0, 1].
    m : Tensor of shape (T, d)
        Slopes of the latents' conditional means on y.
    sigma_s, sigma_obs : float
        Spurious-noise and observation-noise standard deviations.

    Returns
    -------
    mu : Tensor of shape (T, p)
        A m_t.
    Sigma : Tensor of shape (T, p, p)
    """
    v = c + (1.0 - c) * sigma_s**2
    mu = m @ A.T
    Sigma = (A * v[:, None, :]) @ A.T
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    return mu, Sigma + sigma_obs**2 * eye


def mtlcm_nll(
    A: Tensor,
    c: Tensor,
    m: Tensor,
    n: Tensor,
    Sxx: Tensor,
    sxy: Tensor,
    syy: Tensor,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
) -> Tensor:
    """Exact MTLCM negative log-likelihood of every task from sufficient statistics.

    For data centred within each task the log-likelihood of task t is

        -2 log L_t = n_t (p log 2 pi + log det Sigma_t) + tr(Sigma_t^{-1} M_t),
        M_t = S_xx - mu_t s_xy^T - s_xy mu_t^T + s_yy mu_t mu_t^T,

    which equals the sum over the task's samples of -2 log N(x_i; mu_t y_i, Sigma_t).
    One Cholesky factorisation per task: O(T p^3) whatever the sample size.

    Parameters
    ----------
    A : Tensor of shape (p, d)
    c, m : Tensor of shape (T, d)
        Causal indicators and target slopes (see :func:`mtlcm_moments`).
    n : Tensor of shape (T,)
        Samples per task.
    Sxx : Tensor of shape (T, p, p)
    sxy : Tensor of shape (T, p)
    syy : Tensor of shape (T,)
        Centred scatter statistics of each task.
    sigma_s, sigma_obs : float

    Returns
    -------
    Tensor of shape (T,)
        Negative log-likelihood of each task (summed over its samples).
    """
    p = A.shape[0]
    mu, Sigma = mtlcm_moments(A, c, m, sigma_s, sigma_obs)
    cross = mu[:, :, None] * sxy[:, None, :]
    M = (
        Sxx
        - cross
        - cross.transpose(1, 2)
        + syy[:, None, None] * (mu[:, :, None] * mu[:, None, :])
    )
    L = torch.linalg.cholesky(Sigma)
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    quad = torch.diagonal(torch.cholesky_solve(M, L), dim1=-2, dim2=-1).sum(-1)
    return 0.5 * (n * (p * math.log(2 * math.pi) + logdet) + quad)


def mtlcm_optimal_slopes(
    A: Tensor,
    c: Tensor,
    sxy: Tensor,
    syy: Tensor,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
) -> Tensor:
    """Slopes m_t maximising the likelihood for fixed (A, c): generalised least squares.

    The likelihood is quadratic in m_t with minimiser
    m_t = (A^T Sigma_t^{-1} A)^{-1} A^T Sigma_t^{-1} s_xy / s_yy, so the slopes (and
    with them the spurious coefficients gamma_t = m_t / (1 - c_t)) can be profiled out.

    Returns
    -------
    Tensor of shape (T, d)
    """
    zero = torch.zeros_like(c)
    _, Sigma = mtlcm_moments(A, c, zero, sigma_s, sigma_obs)
    L = torch.linalg.cholesky(Sigma)
    Q = torch.linalg.solve_triangular(L, A.expand(L.shape[0], *A.shape), upper=False)
    r = torch.linalg.solve_triangular(L, sxy[:, :, None], upper=False)
    G = Q.transpose(1, 2) @ Q
    m = torch.linalg.solve(G, Q.transpose(1, 2) @ r)[..., 0]
    return m / syy[:, None]


def mtlcm_profile_nll(
    A: Tensor,
    c: Tensor,
    n: Tensor,
    Sxx: Tensor,
    sxy: Tensor,
    syy: Tensor,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
) -> Tensor:
    """MTLCM negative log-likelihood with the slopes m_t profiled out (exact).

    Equals ``mtlcm_nll(A, c, mtlcm_optimal_slopes(A, c, ...), ...)``, computed with a
    single Cholesky factor per task: with Sigma_t = L L^T, Q = L^{-1} A and
    r = L^{-1} s_xy,

        -2 log L_t = n_t (p log 2 pi + log det Sigma_t) + tr(Sigma_t^{-1} S_xx)
                     - r^T Q (Q^T Q)^{-1} Q^T r / s_yy.

    Differentiable in (A, c); by the envelope theorem its gradient is the partial
    gradient of the full likelihood at the optimal slopes.

    Returns
    -------
    Tensor of shape (T,)
    """
    p = A.shape[0]
    zero = torch.zeros_like(c)
    _, Sigma = mtlcm_moments(A, c, zero, sigma_s, sigma_obs)
    L = torch.linalg.cholesky(Sigma)
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    tr = torch.diagonal(torch.cholesky_solve(Sxx, L), dim1=-2, dim2=-1).sum(-1)
    r = torch.linalg.solve_triangular(L, sxy[:, :, None], upper=False)
    Q = torch.linalg.solve_triangular(L, A.expand(L.shape[0], *A.shape), upper=False)
    Qr = Q.transpose(1, 2) @ r
    explained = (Qr * torch.linalg.solve(Q.transpose(1, 2) @ Q, Qr)).sum((-2, -1))
    return 0.5 * (n * (p * math.log(2 * math.pi) + logdet) + tr - explained / syy)


def mtlcm_latent_statistics(A: Tensor, Sxx: Tensor, sxy: Tensor, syy: Tensor):
    """Reduce per-task statistics to the latent space of A (exact; p >= d).

    With A^+ the pseudo-inverse, N_t = S_xx - s_xy s_xy^T / s_yy the residual scatter
    after regressing x on y, and P_t = A^+ N_t A^{+T}, the profiled MTLCM likelihood
    depends on the data only through P_t and e_t = tr(S_xx) - tr(A A^+ S_xx) (the
    scatter outside the column space of A, zero when p = d).

    Returns
    -------
    P : Tensor of shape (T, d, d)
    extra : Tensor of shape (T,)
    logdet_AtA : Tensor (scalar)
    G : Tensor of shape (d, d)
        (A^T A)^{-1}.
    """
    AtA = A.T @ A
    Lg = torch.linalg.cholesky(AtA)
    G = torch.cholesky_inverse(Lg)
    Ap = G @ A.T  # pseudo-inverse (d, p)
    N = Sxx - sxy[:, :, None] * sxy[:, None, :] / syy[:, None, None]
    P = Ap @ N @ Ap.T
    inside = torch.diagonal(Ap @ Sxx @ A, dim1=-2, dim2=-1).sum(-1)
    extra = torch.diagonal(Sxx, dim1=-2, dim2=-1).sum(-1) - inside
    logdet = 2.0 * torch.log(torch.diagonal(Lg)).sum()
    return P, extra, logdet, G


def mtlcm_latent_nll(
    c: Tensor,
    n: Tensor,
    P: Tensor,
    extra: Tensor,
    logdet_AtA: Tensor,
    G: Tensor,
    p: int,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
) -> Tensor:
    """Profiled MTLCM NLL per task from latent-space statistics (exact, d x d only).

    Writing A = Q R (thin QR), Sigma_t = Q R (V_t + s^2 G) R^T Q^T + s^2 (I - Q Q^T)
    with s = sigma_obs and G = (A^T A)^{-1}, so

        -2 log L_t = n_t [p log 2 pi + (p - d) log s^2 + log det A^T A
                          + log det(V_t + s^2 G)]
                     + tr((V_t + s^2 G)^{-1} P_t) + e_t / s^2,

    which equals :func:`mtlcm_profile_nll`. Cost O(T d^3) instead of O(T p^3).

    Returns
    -------
    Tensor of shape (T,)
    """
    d = G.shape[0]
    v = c + (1.0 - c) * sigma_s**2
    H = torch.diag_embed(v) + sigma_obs**2 * G
    L = torch.linalg.cholesky(H)
    logdetH = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    quad = torch.diagonal(torch.cholesky_solve(P, L), dim1=-2, dim2=-1).sum(-1)
    const = p * math.log(2 * math.pi) + (p - d) * math.log(sigma_obs**2) + logdet_AtA
    return 0.5 * (n * (const + logdetH) + quad + extra / sigma_obs**2)


def mtlcm_optimal_indicators(
    n: Tensor,
    P: Tensor,
    G: Tensor,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
    *,
    c0: Tensor | None = None,
    max_iter: int = 100,
    rtol: float = 1e-15,
) -> Tensor:
    """Causal indicators c_t in [0, 1]^d maximising the likelihood for a fixed A.

    Each task's problem is min over v in [sigma_s^2, 1]^d of
    n log det(V + s^2 G) + tr((V + s^2 G)^{-1} P) (s = sigma_obs), solved by
    projected Newton steps (Bertsekas) on the free coordinates with backtracking,
    vectorised over tasks. It converges to machine precision in a handful of steps
    from the noiseless solution
    v = clip(diag(P)/n - s^2 diag(G), sigma_s^2, 1) or from a warm start ``c0``.

    Returns
    -------
    Tensor of shape (T, d)
    """
    lo, s2 = sigma_s**2, sigma_obs**2
    if c0 is None:
        Pd = torch.diagonal(P, dim1=-2, dim2=-1)
        v = (Pd / n[:, None] - s2 * torch.diagonal(G)).clamp(lo, 1.0)
    else:
        v = c0 + (1.0 - c0) * lo

    def objective(v, P):
        H = torch.diag_embed(v) + s2 * G
        L = torch.linalg.cholesky(H)
        logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        K = torch.cholesky_inverse(L)
        return logdet, K, (K * P).sum((-2, -1))

    logdet, K, tr = objective(v, P)
    f = n * logdet + tr
    active = torch.arange(len(n), device=n.device)
    for _ in range(max_iter):
        # work on the tasks still improving only: most converge in one or two steps
        va, Ka, Pa, na, fa = v[active], K[active], P[active], n[active], f[active]
        KPK = Ka @ Pa @ Ka
        Kd = torch.diagonal(Ka, dim1=-2, dim2=-1)
        g = na[:, None] * Kd - torch.diagonal(KPK, dim1=-2, dim2=-1)
        # no move where a bound is active and the gradient points outwards
        free = ~(((va <= lo) & (g > 0)) | ((va >= 1.0) & (g < 0)))
        step = _projected_newton_step(g, Ka, KPK, na, free)
        # Newton decrement: stop a task once the predicted gain is at rounding level
        going = (g * step).sum(-1) > rtol * fa.abs().clamp_min(1.0)
        active, va, step, Pa, na, fa = (
            active[going],
            va[going],
            step[going],
            Pa[going],
            na[going],
            fa[going],
        )
        if len(active) == 0:
            break
        t = torch.ones_like(na)
        for _ in range(20):
            v_new = (va - t[:, None] * step).clamp(lo, 1.0)
            logdet_new, K_new, tr_new = objective(v_new, Pa)
            f_new = na * logdet_new + tr_new
            ok = f_new <= fa
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        # a failed line search means no further progress is possible for that task
        active, v_new, K_new, f_new = active[ok], v_new[ok], K_new[ok], f_new[ok]
        v[active], K[active], f[active] = v_new, K_new, f_new
        if len(active) == 0:
            break
    return (v - lo) / (1.0 - lo)


def _projected_newton_step(g: Tensor, K: Tensor, KPK: Tensor, n: Tensor, free: Tensor):
    """Newton direction on the free coordinates of every task (zero elsewhere).

    The Hessian of n log det H + tr(H^{-1} P) in v (H = V + s^2 G) is
    2 K o (K P K) - n K o K with K = H^{-1}; where it is not positive definite on
    the free block the diagonal, floored, is used instead.
    """
    Hs = 2.0 * K * KPK - n[:, None, None] * K * K
    mask = free[:, :, None] & free[:, None, :]
    eye = torch.eye(g.shape[1], dtype=g.dtype, device=g.device)
    Hf = torch.where(mask, Hs, eye)
    gf = torch.where(free, g, torch.zeros_like(g))
    L, info = torch.linalg.cholesky_ex(Hf)
    step = torch.cholesky_solve(gf[:, :, None], L)[..., 0]
    bad = info != 0
    if bool(bad.any()):
        Kd = torch.diagonal(K, dim1=-2, dim2=-1)
        h = torch.diagonal(Hs, dim1=-2, dim2=-1).clamp_min(1e-3 * n[:, None] * Kd**2)
        step = torch.where(bad[:, None], gf / h, step)
    return torch.where(free, step, torch.zeros_like(step))
