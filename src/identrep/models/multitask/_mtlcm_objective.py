"""MTLCM's profiled objective and its hand-derived gradient, batched for scale.

The same function of A as :func:`mtlcm_latent_statistics` + the optimal indicators +
:func:`mtlcm_latent_nll` (summed over tasks), arranged so that the work on the
(T, p, p) statistics is three large matrix products and the per-task work is on
d x d matrices only:

    F(A) = 1/2 sum_t [ n_t (k + log det A^T A + log det H_t) + tr(H_t^{-1} P_t) ]
           + E / (2 s^2),
    P_t = A^+ N_t A^{+T},  H_t = V_t + s^2 G,  G = (A^T A)^{-1},  A^+ = G A^T,
    E = tr((I - A A^+) sum_t S_xx,t)     (the scatter outside span A; 0 if p = d),

with N_t = S_xx - s_xy s_xy^T / s_yy and k = p log 2 pi + (p - d) log s^2. With the
indicators at their optimum (Danskin), and K_t = H_t^{-1}, Y_t = A^+ N_t:

    dF/dA^+ = sum_t K_t Y_t - A^T S / (2 s^2)            (S = sum_t S_xx,t)
    dF/dG   = s^2/2 sum_t (n_t K_t - K_t P_t K_t) + (dF/dA^+) A
    dF/dA   = (sum_t n_t) A G - S A^{+T} / (2 s^2) + (dF/dA^+)^T G
              - A G (Om + Om^T) G,       Om = dF/dG.

One evaluation costs 2 T d p^2 + 4 T d^2 p for the products plus the indicator
solve's few d x d factorisations per task (:func:`solve_indicators`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["ProfiledObjective", "solve_indicators"]


def _chol_inv(H: Tensor):
    """Cholesky factor, log-determinant and inverse of a batch of SPD matrices."""
    L, info = torch.linalg.cholesky_ex(H)
    if bool((info != 0).any()):
        raise torch.linalg.LinAlgError("H is not positive definite")
    logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return logdet, torch.cholesky_inverse(L)


def solve_indicators(
    n: Tensor,
    P: Tensor,
    G: Tensor,
    lo: float,
    s2: float,
    v0: Tensor | None = None,
    *,
    max_iter: int = 50,
    rtol: float = 1e-14,
):
    """Latent variances v_t in [lo, 1]^d minimising n log det H + tr(H^{-1} P),
    H = diag(v) + s2 G, by projected Newton steps vectorised over tasks.

    Returns ``v, logdet H, K = H^{-1}, K P K`` at the solution (the last three are
    what the objective and its gradient need, so they are not recomputed).
    """
    if v0 is None:
        Pd = torch.diagonal(P, dim1=-2, dim2=-1)
        v0 = (Pd / n[:, None] - s2 * torch.diagonal(G)).clamp(lo, 1.0)
    v = v0.clone()
    eye = torch.eye(G.shape[0], dtype=G.dtype, device=G.device)
    logdet, K = _chol_inv(torch.diag_embed(v) + s2 * G)
    KP = K @ P
    f = n * logdet + torch.diagonal(KP, dim1=-2, dim2=-1).sum(-1)
    KPK = KP @ K
    active = torch.arange(len(n), device=n.device)
    for _ in range(max_iter):
        va, Ka, KPKa, na, fa = v[active], K[active], KPK[active], n[active], f[active]
        Kd = torch.diagonal(Ka, dim1=-2, dim2=-1)
        g = na[:, None] * Kd - torch.diagonal(KPKa, dim1=-2, dim2=-1)
        free = ~(((va <= lo) & (g > 0)) | ((va >= 1.0) & (g < 0)))
        Hs = 2.0 * Ka * KPKa - na[:, None, None] * Ka * Ka
        mask = free[:, :, None] & free[:, None, :]
        Lh, info = torch.linalg.cholesky_ex(torch.where(mask, Hs, eye))
        gf = torch.where(free, g, torch.zeros_like(g))
        step = torch.cholesky_solve(gf[:, :, None], Lh)[..., 0]
        bad = info != 0
        if bool(bad.any()):  # not convex on the free block: a scaled gradient step
            h = torch.diagonal(Hs, dim1=-2, dim2=-1)
            h = h.clamp_min(1e-3 * na[:, None] * Kd**2)
            step = torch.where(bad[:, None], gf / h, step)
        step = torch.where(free, step, torch.zeros_like(step))
        # Newton decrement at the rounding level of f's terms: converged
        scale = (na * logdet[active].abs() + fa.abs()).clamp_min(1.0)
        going = (g * step).sum(-1) > rtol * scale
        active, va, step, na, fa = (
            active[going],
            va[going],
            step[going],
            na[going],
            fa[going],
        )
        if len(active) == 0:
            break
        # backtracking on the tasks whose trial has not yet decreased f only;
        # a task that cannot decrease f in 20 halvings is at rounding level: done
        t = torch.ones_like(na)
        todo = torch.arange(len(active), device=n.device)
        for _ in range(20):
            idx = active[todo]
            v_new = (va[todo] - t[todo, None] * step[todo]).clamp(lo, 1.0)
            ld_new, K_new = _chol_inv(torch.diag_embed(v_new) + s2 * G)
            KP_new = K_new @ P[idx]
            f_new = na[todo] * ld_new + torch.diagonal(KP_new, dim1=-2, dim2=-1).sum(-1)
            ok = f_new <= fa[todo]
            done = idx[ok]
            v[done], logdet[done], K[done], f[done] = (
                v_new[ok],
                ld_new[ok],
                K_new[ok],
                f_new[ok],
            )
            KPK[done] = KP_new[ok] @ K_new[ok]
            todo = todo[~ok]
            if len(todo) == 0:
                break
            t[todo] = 0.5 * t[todo]
        # tasks whose line search failed stop here
        failed = torch.zeros(len(n), dtype=torch.bool, device=n.device)
        failed[active[todo]] = True
        active = active[~failed[active]]
        if len(active) == 0:
            break
    return v, logdet, K, KPK


class ProfiledObjective:
    """F(A) / n_total and its gradient for the statistics of every task.

    Parameters
    ----------
    n, Sxx, sxy, syy : Tensor
        Per-task statistics (float64, on the fit's device).
    sigma_s, sigma_obs : float
    """

    def __init__(self, n, Sxx, sxy, syy, sigma_s: float, sigma_obs: float):
        T, p, _ = Sxx.shape
        self.n, self.T, self.p = n, T, p
        self.N = (Sxx - sxy[:, :, None] * sxy[:, None, :] / syy[:, None, None]).reshape(
            T * p, p
        )
        self.S = Sxx.sum(0)
        self.lo, self.s2 = sigma_s**2, sigma_obs**2
        self.n_total = float(n.sum())
        self.v = None  # warm start of the indicator solve

    def __call__(self, A: Tensor, *, grad: bool = True):
        """Mean NLL per sample at A, its gradient (p, d) and the variances v."""
        T, p, d = self.T, self.p, A.shape[1]
        n, s2 = self.n, self.s2
        Lg = torch.linalg.cholesky(A.T @ A)
        G = torch.cholesky_inverse(Lg)
        Ap = G @ A.T  # (d, p)
        # Z_t = N_t A^{+T} as one product; P_t = A^+ Z_t as another
        Z = (self.N @ Ap.T).view(T, p, d).permute(1, 0, 2).reshape(p, T * d)
        P = (Ap @ Z).view(d, T, d).permute(1, 0, 2)
        P = 0.5 * (P + P.transpose(1, 2))
        v, logdetH, K, KPK = solve_indicators(n, P, G, self.lo, s2, self.v)
        self.v = v
        logdet_AtA = 2.0 * torch.log(torch.diagonal(Lg)).sum()
        k = p * math.log(2 * math.pi) + (p - d) * math.log(s2)
        quad = (K * P).sum()
        SA = self.S @ A  # (p, d)
        E = torch.trace(self.S) - (Ap.T * SA).sum()
        f = 0.5 * ((n * (k + logdet_AtA + logdetH)).sum() + quad + E / s2)
        if not grad:
            return float(f) / self.n_total, None, v
        # dF/dA^+ = sum_t K_t Y_t - A^T S / (2 s^2); Y_t = Z_t^T
        dAp = (Z @ K.reshape(T * d, d)).T - SA.T / (2.0 * s2)
        Om = 0.5 * s2 * (n[:, None, None] * K - KPK).sum(0) + dAp @ A
        dA = (
            self.n_total * (A @ G)
            - (self.S @ Ap.T) / (2.0 * s2)
            + dAp.T @ G
            - A @ G @ (Om + Om.T) @ G
        )
        return float(f) / self.n_total, dA / self.n_total, v
