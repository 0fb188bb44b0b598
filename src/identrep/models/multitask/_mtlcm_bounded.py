"""MTLCM with the paper's coupled slopes m_t = (1 - c_t) gamma_t, |gamma_tj| <= B.

The free objective (:class:`ProfiledObjective`) profiles the slopes m_t of
E[z | y, t] without constraint, so a latent at c = 1 (unit variance, "causal") may
still move with y. Bounding gamma ties the two: |m_tj| <= (1 - c_tj) B, so a causal
latent (c = 1) has m = 0 and is independent of y within its task, as in the paper's
model. In the variances v = c + (1 - c) s_s^2 the constraint reads
|m_j| <= beta (1 - v_j), beta = B / (1 - s_s^2).

For a fixed A, in latent coordinates w = A^+ x (H_t = V_t + s^2 G, G = (A^T A)^{-1}),

    F(A) = 1/2 sum_t [ n_t (k + log det A^T A + log det H_t) + tr(H_t^{-1} P_t)
                       + s_yy,t r_t^T H_t^{-1} r_t ] + E / (2 s^2),
    r_t = m_t - m_hat_t,  m_hat_t = A^+ s_xy,t / s_yy,t,

with P_t, E and k as in :mod:`._mtlcm_objective` (free slopes give r = 0). The inner
problem over (v_t, m_t) is solved per latent on the diagonal of H_t (exact when
s^2 G is diagonal; s^2 is 1e-4 relative to the data or smaller, so the error in F is
of order s^4): for fixed v the best slope is m_hat clipped to +-beta (1 - v), and v
minimises a scalar function on [s_s^2, 1] (a grid, then golden-section search). The
gradient in A is taken by automatic differentiation at that inner solution
(Danskin, up to the same diagonal approximation).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["BoundedObjective", "solve_bounded"]

_GRID = 65  # grid points on [lo, 1] before the golden-section refinement
_GOLDEN = 40  # golden-section iterations (interval shrinks by 0.618^40 ~ 4e-9)


def _phi(v, n, p, h0, mhat2, beta, syy):
    """Per-latent inner objective n log h + (P_jj + s_yy dist^2) / h, h = v + h0."""
    h = v + h0
    dist = (mhat2.sqrt() - beta * (1.0 - v)).clamp_min(0.0)
    return n * torch.log(h) + (p + syy * dist**2) / h


def solve_bounded(n, Pd, h0, mhat, syy, lo: float, beta: float):
    """Variances v (T, d) in [lo, 1] and slopes m (T, d), |m| <= beta (1 - v),
    minimising the separable inner objective (see the module docstring).

    ``Pd`` (T, d): diagonals of P_t; ``h0`` (d,): s^2 diag(G); ``mhat`` (T, d):
    the free slopes; ``n``, ``syy`` (T,).
    """
    n_, syy_ = n[:, None, None], syy[:, None, None]
    args = (n_, Pd[..., None], h0[None, :, None], (mhat**2)[..., None], beta, syy_)
    grid = torch.linspace(lo, 1.0, _GRID, dtype=Pd.dtype, device=Pd.device)
    vals = _phi(grid.expand(*Pd.shape, _GRID), *args)
    best = vals.argmin(-1)
    step = (1.0 - lo) / (_GRID - 1)
    a = (lo + (best - 1).clamp_min(0) * step).to(Pd.dtype)
    b = (lo + (best + 1).clamp_max(_GRID - 1) * step).to(Pd.dtype)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    args = (n[:, None], Pd, h0[None, :], mhat**2, beta, syy[:, None])
    for _ in range(_GOLDEN):
        x1, x2 = b - g * (b - a), a + g * (b - a)
        left = _phi(x1, *args) <= _phi(x2, *args)
        b = torch.where(left, x2, b)
        a = torch.where(left, a, x1)
    v = 0.5 * (a + b)
    # the end points of the box, where the minimum often sits
    for end in (lo, 1.0):
        e = torch.full_like(v, end)
        v = torch.where(_phi(e, *args) <= _phi(v, *args), e, v)
    cap = beta * (1.0 - v)
    m = torch.maximum(torch.minimum(mhat, cap), -cap)
    return v, m


class BoundedObjective:
    """F(A) / n_total and its gradient with the slopes bounded by (1 - c) B.

    Same interface as :class:`ProfiledObjective`; after a call, ``self.m`` holds
    the slopes (T, d) of the inner solution.
    """

    def __init__(self, n, Sxx, sxy, syy, sigma_s, sigma_obs, gamma_bound: float):
        T, p, _ = Sxx.shape
        self.n, self.T, self.p, self.sxy, self.syy = n, T, p, sxy, syy
        self.N = Sxx - sxy[:, :, None] * sxy[:, None, :] / syy[:, None, None]
        self.S = Sxx.sum(0)
        self.lo, self.s2 = sigma_s**2, sigma_obs**2
        self.beta = float(gamma_bound) / (1.0 - self.lo)
        self.n_total = float(n.sum())
        self.m = None

    def _value(self, A: Tensor, v=None, m=None):
        p, d = self.p, A.shape[1]
        n, s2 = self.n, self.s2
        Lg = torch.linalg.cholesky(A.T @ A)
        G = torch.cholesky_inverse(Lg)
        Ap = G @ A.T
        P = Ap @ self.N @ Ap.T  # (T, d, d)
        P = 0.5 * (P + P.transpose(1, 2))
        mhat = (self.sxy @ Ap.T) / self.syy[:, None]
        if v is None:
            with torch.no_grad():
                Pd = torch.diagonal(P, dim1=-2, dim2=-1)
                v, m = solve_bounded(
                    n, Pd, s2 * torch.diagonal(G), mhat, self.syy, self.lo, self.beta
                )
        H = torch.diag_embed(v) + s2 * G
        LH = torch.linalg.cholesky(H)
        logdetH = 2.0 * torch.log(torch.diagonal(LH, dim1=-2, dim2=-1)).sum(-1)
        K = torch.cholesky_inverse(LH)
        r = m - mhat
        quad = (K * P).sum() + (self.syy * torch.einsum("ti,tij,tj->t", r, K, r)).sum()
        logdet_AtA = 2.0 * torch.log(torch.diagonal(Lg)).sum()
        k = p * math.log(2 * math.pi) + (p - d) * math.log(s2)
        E = torch.trace(self.S) - (Ap.T * (self.S @ A)).sum()
        f = 0.5 * ((n * (k + logdet_AtA + logdetH)).sum() + quad + E / s2)
        return f, v, m

    def __call__(self, A: Tensor, *, grad: bool = True):
        """Mean NLL per sample at A, its gradient (p, d) and the variances v."""
        if not grad:
            with torch.no_grad():
                f, v, m = self._value(A)
            self.m = m
            return float(f) / self.n_total, None, v
        with torch.no_grad():
            _, v, m = self._value(A)
        Ag = A.detach().clone().requires_grad_(True)
        f, _, _ = self._value(Ag, v, m)
        (gA,) = torch.autograd.grad(f, Ag)
        self.m = m
        return float(f.detach()) / self.n_total, gA / self.n_total, v
