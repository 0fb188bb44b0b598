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

    dF/dA^+ = sum_t K_t Y_t,
    dF/dG   = s^2/2 sum_t (n_t K_t - K_t P_t K_t) + (dF/dA^+) A
    dF/dA   = (sum_t n_t) A G + (dF/dA^+)^T G - A G (Om + Om^T) G
              - Q Q^T S A^{+T} / s^2,       Om = dF/dG,

where the last term is dE/dA / (2 s^2), S = sum_t S_xx,t and Q an orthonormal
basis of the complement of span A (E and its gradient are computed from Q: written
as tr S - tr(A^+ S A) they cancel to the rounding of tr S / s^2, which made F noisy
at 1e-8 relative and stalled L-BFGS's line search; for p = d both are 0).

One evaluation costs 2 T d p^2 + 4 T d^2 p for the products plus the indicator
solve's few d x d factorisations per task (:func:`solve_indicators`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg import lapack
from torch import Tensor

from identrep.models.multitask._indicators_cpu import solve_indicators_np

__all__ = ["ProfiledObjective", "solve_indicators"]

# tasks per block of the indicator solve: about this many d x d matrix entries
_BLOCK_ELEMENTS = 2**20


# On the CPU the d x d factorisations run through scipy's LAPACK one matrix at a
# time: torch's CPU LAPACK here is MKL, whose batched Cholesky and inverse run at
# about half the rate of scipy's OpenBLAS on this project's AMD machines (docs/
# notes.md, branch wt-scale2). Below _LOOP_MIN_D the per-matrix calls cost more than
# the arithmetic (torch's batched kernels were faster at d = 10); other devices
# always use torch's batched kernels. From _TASK_LOOP_MIN_D the whole indicator
# solve runs task by task in numpy (:mod:`_indicators_cpu`): batched elementwise
# passes over (block, d, d) temporaries then cost as much as the factorisations,
# while its per-task calls (about 80 us per task and evaluation) are small next to
# the arithmetic; at d = 20 they were not (branch wt-scale3: 10,000 x 20, d = 20
# slower than the batched solve with per-matrix LAPACK).
_LOOP_MIN_D = 16
_TASK_LOOP_MIN_D = 64


def _on_cpu(x: Tensor) -> bool:
    return x.device.type == "cpu" and x.shape[-1] >= _LOOP_MIN_D


def _task_loop(G: Tensor) -> bool:
    return G.device.type == "cpu" and G.shape[-1] >= _TASK_LOOP_MIN_D


def _mm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product (numpy's BLAS on the CPU)."""
    if _on_cpu(a):
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def _chol_inv(v: Tensor, s2G: Tensor):
    """Log-determinant and inverse of H = diag(v) + s2G for a batch of v (T, d)."""
    H = s2G.repeat(len(v), 1, 1)
    H.diagonal(dim1=1, dim2=2).add_(v)
    if not _on_cpu(H):
        L, info = torch.linalg.cholesky_ex(H)
        if bool((info != 0).any()):
            raise torch.linalg.LinAlgError("H is not positive definite")
        logdet = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        return logdet, torch.cholesky_inverse(L)
    Hn = H.numpy()
    diag = np.empty(Hn.shape[:2])
    for i in range(len(Hn)):
        # the transposed view is Fortran-ordered: LAPACK works in place, on the
        # upper triangle of the C-ordered matrix
        c, info = lapack.dpotrf(Hn[i].T, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            raise torch.linalg.LinAlgError("H is not positive definite")
        diag[i] = c.diagonal()
        lapack.dpotri(c, lower=1, overwrite_c=1)
    logdet = torch.from_numpy(2.0 * np.log(diag).sum(-1))
    upper = torch.ones(H.shape[1:], dtype=torch.bool).triu()
    return logdet, torch.where(upper, H, H.transpose(1, 2))


def _newton_solve(Hs: Tensor, g: Tensor):
    """Solutions of Hs x = g for a batch of symmetric systems and a mask of the
    systems that are not positive definite (their x is meaningless)."""
    if not _on_cpu(Hs):
        Lh, info = torch.linalg.cholesky_ex(Hs)
        return torch.cholesky_solve(g[:, :, None], Lh)[..., 0], info != 0
    Hn, x = Hs.numpy(), g.clone()
    xn, bad = x.numpy(), np.zeros(len(Hn), dtype=bool)
    for i in range(len(Hn)):
        _, _, info = lapack.dposv(Hn[i].T, xn[i], lower=1, overwrite_a=1, overwrite_b=1)
        bad[i] = info != 0
    return x, torch.from_numpy(bad)


def _kpk(K: Tensor, P: Tensor, C: Tensor | None):
    """K P K and, in the factor form P = C C^T, K C (else None)."""
    if C is None:
        return _mm(_mm(K, P), K), None
    KC = _mm(K, C)
    return _mm(KC, KC.transpose(1, 2)), KC


def solve_indicators(
    n: Tensor,
    P: Tensor,
    G: Tensor,
    lo: float,
    s2: float,
    v0: Tensor | None = None,
    *,
    C: Tensor | None = None,
    max_iter: int = 50,
    rtol: float = 1e-14,
    work: dict | None = None,
):
    """Latent variances v_t in [lo, 1]^d minimising n log det H + tr(H^{-1} P),
    H = diag(v) + s2 G, by projected Newton steps vectorised over tasks.

    With ``C`` (T, d, r) such that P = C C^T, K P K is formed as (K C)(K C)^T.
    Returns ``v, logdet H, K = H^{-1}, K P K``, ``K C`` (None without ``C``) and
    tr(K P) per task at the solution (what the objective and its gradient need: not
    recomputed). On the CPU (d >= ``_TASK_LOOP_MIN_D``) the solve runs task by task
    (:func:`solve_indicators_np`); ``work`` then keeps its buffers between calls and
    the K, K P K, K C returned are views into them, valid until the next call.
    """
    if _task_loop(G):
        out = solve_indicators_np(
            *(None if a is None else a.numpy() for a in (n, P, G)),
            lo,
            s2,
            None if v0 is None else v0.numpy(),
            None if C is None else C.numpy(),
            {} if work is None else work,
            max_iter=max_iter,
            rtol=rtol,
        )
        return tuple(None if a is None else torch.from_numpy(a) for a in out)
    if v0 is None:
        Pd = torch.diagonal(P, dim1=-2, dim2=-1)
        v0 = (Pd / n[:, None] - s2 * torch.diagonal(G)).clamp(lo, 1.0)
    v = v0.clone()
    s2G = s2 * G
    logdet, K = _chol_inv(v, s2G)
    # tr(K P) from the entries (K, P symmetric): O(d^2), so a trial point costs one
    # factorisation; K P K (two products) only where a trial is accepted
    f = n * logdet + (K * P).sum((1, 2))
    KPK, KC = _kpk(K, P, C)
    T = len(n)
    active = torch.arange(T, device=n.device)
    for _ in range(max_iter):
        if len(active) == T:  # no copies while every task is still going
            va, Ka, KPKa, na, fa = v, K, KPK, n, f
        else:
            va, Ka, KPKa = v[active], K[active], KPK[active]
            na, fa = n[active], f[active]
        Kd = torch.diagonal(Ka, dim1=-2, dim2=-1)
        g = na[:, None] * Kd - torch.diagonal(KPKa, dim1=-2, dim2=-1)
        free = ~(((va <= lo) & (g > 0)) | ((va >= 1.0) & (g < 0)))
        Hs = Ka * (2.0 * KPKa - na[:, None, None] * Ka)
        h = torch.diagonal(Hs, dim1=-2, dim2=-1).clone()
        # the Newton system on the free block, the identity elsewhere
        freef = free.to(Hs.dtype)
        Hs.mul_(freef[:, :, None]).mul_(freef[:, None, :])
        Hs.diagonal(dim1=1, dim2=2).add_(1.0 - freef)
        gf = g * freef
        step, bad = _newton_solve(Hs, gf)
        if bool(bad.any()):  # not convex on the free block: a scaled gradient step
            h = h.clamp_min(1e-3 * na[:, None] * Kd**2)
            step = torch.where(bad[:, None], gf / h, step)
        step = step * freef
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
            ld_new, K_new = _chol_inv(v_new, s2G)
            P_new = P if len(idx) == T else P[idx]
            C_new = C if C is None or len(idx) == T else C[idx]
            f_new = na[todo] * ld_new + (K_new * P_new).sum((1, 2))
            ok = f_new <= fa[todo]
            if len(idx) == T and bool(ok.all()):  # every task accepted: no copies
                v, logdet, K, f = v_new, ld_new, K_new, f_new
                KPK, KC = _kpk(K, P, C)
                todo = todo[:0]
                break
            done = idx[ok]
            v[done], logdet[done], f[done] = v_new[ok], ld_new[ok], f_new[ok]
            K_ok = K_new[ok]
            K[done] = K_ok
            KPK[done], KC_ok = _kpk(K_ok, P_new[ok], None if C is None else C_new[ok])
            if C is not None:
                KC[done] = KC_ok
            todo = todo[~ok]
            if len(todo) == 0:
                break
            t[todo] = 0.5 * t[todo]
        # tasks whose line search failed stop here
        failed = torch.zeros(T, dtype=torch.bool, device=n.device)
        failed[active[todo]] = True
        active = active[~failed[active]]
        if len(active) == 0:
            break
    return v, logdet, K, KPK, KC, (K * P).sum((1, 2))


# the indicator solve's relative tolerance (rounding level) and, with
# ``adaptive_tol``, its loosest value and the factor on the outer progress
_INNER_RTOL = 1e-14
_INNER_RTOL_MAX = 1e-8
_ADAPT_FACTOR = 1.0

# pivots of N_t below this fraction of its largest diagonal entry are rounding
_RANK_TOL = 1e-13


def _low_rank_factors(N: Tensor, d: int):
    """``(U, r)``: U of shape (p, T r) with N_t = U_t U_t^T (columns t r ... t r + r,
    zero-padded), by pivoted Cholesky (LAPACK's dpstrf, stopped where the largest
    remaining pivot is below ``_RANK_TOL`` max_i (N_t)_ii: the rounding of
    S_xx - s_xy s_xy^T / s_yy, whose null space holds 1e-16 ... 1e-14 of it);
    ``(None, p)``
    where some rank reaches d (the dense form is then no dearer) or N_t is not
    positive semi-definite."""
    T, p, _ = N.shape
    Nn = N.cpu().numpy()
    factors, r = [], 0
    for t in range(T):
        peak = max(np.abs(np.diagonal(Nn[t])).max(), 1e-300)
        c, piv, rank, info = lapack.dpstrf(Nn[t], tol=_RANK_TOL * peak, lower=1)
        if info < 0:
            raise ValueError(f"dpstrf: illegal argument {-info}")
        Ut = np.zeros((p, rank))
        Ut[piv - 1] = np.tril(c)[:, :rank]
        # what is left must be rounding; an indefinite N_t (statistics that are
        # not one sample's) stops the factor early: the dense form then
        if not np.abs(Nn[t] - Ut @ Ut.T).max() <= 1e-10 * peak:
            return None, p
        factors.append(Ut)
        r = max(r, rank)
        if r >= d:
            return None, p
    U = np.zeros((p, T, max(r, 1)))
    for t, Ut in enumerate(factors):
        U[:, t, : Ut.shape[1]] = Ut
    U = torch.from_numpy(U.reshape(p, -1)).to(dtype=N.dtype, device=N.device)
    return U, max(r, 1)


class ProfiledObjective:
    """F(A) / n_total and its gradient for the statistics of every task.

    Parameters
    ----------
    n, Sxx, sxy, syy : Tensor
        Per-task statistics (float64, on the fit's device).
    sigma_s, sigma_obs : float
    adaptive_tol : bool
        Solve the indicators (CPU task loop only) to a tolerance tied to the outer
        progress, exact in the final evaluations (:meth:`inner_rtol`); ``refine``
        uses it. Default: always at the rounding level.
    """

    def __init__(
        self,
        n,
        Sxx,
        sxy,
        syy,
        sigma_s: float,
        sigma_obs: float,
        d: int | None = None,
        *,
        adaptive_tol: bool = False,
    ):
        T, p, _ = Sxx.shape
        self.n, self.T, self.p = n, T, p
        N = Sxx - sxy[:, :, None] * sxy[:, None, :] / syy[:, None, None]
        # factor form N_t = U_t U_t^T (rank r) where every rank is below d: then
        # P_t = C_t C_t^T with C_t = A^+ U_t, and the products cost O(T d p r), not
        # O(T d p^2) (a task of n_t samples has rank n_t - 2 at most)
        self.U, self.r = _low_rank_factors(N, p if d is None else d)
        self.N = N.reshape(T * p, p) if self.U is None else None
        self.S = Sxx.sum(0)
        self.lo, self.s2 = sigma_s**2, sigma_obs**2
        self.n_total = float(n.sum())
        self.v = None  # warm start of the indicator solve
        self._work = {}  # the CPU indicator solve's buffers, reused between calls
        # adaptive_tol: the CPU task loop's inner tolerance follows the outer
        # progress (:meth:`inner_rtol`); the batched solve always uses _INNER_RTOL
        self.adaptive_tol = adaptive_tol
        self._best = None  # the lowest value so far and its last relative gain
        self._gain = None

    def inner_rtol(self) -> float:
        """The indicator solve's relative tolerance for the next evaluation.

        Exact (``_INNER_RTOL``, the rounding level) unless ``adaptive_tol``. Then
        it is ``_ADAPT_FACTOR`` times the last relative decrease of the lowest
        value seen (L-BFGS's progress), squared, within [_INNER_RTOL,
        _INNER_RTOL_MAX]: the value is then off by at most about that tolerance
        and the gradient by about its square root (the indicators' distance from
        their optimum), both small next to the outer step. In the final
        evaluations the gain is below 1e-7 and the solve is exact.
        """
        if not self.adaptive_tol:
            return _INNER_RTOL
        if self._gain is None:  # no progress measured yet: far from the optimum
            return _INNER_RTOL_MAX
        rtol = (_ADAPT_FACTOR * self._gain) ** 2
        return min(max(rtol, _INNER_RTOL), _INNER_RTOL_MAX)

    def _record(self, f: float) -> None:
        if self._best is None:
            self._best = f
        elif f < self._best:
            self._gain = (self._best - f) / max(abs(f), 1.0)
            self._best = f

    def __call__(self, A: Tensor, *, grad: bool = True):
        """Mean NLL per sample at A, its gradient (p, d) and the variances v."""
        T, p, d = self.T, self.p, A.shape[1]
        n, s2 = self.n, self.s2
        Lg = torch.linalg.cholesky(A.T @ A)
        G = torch.cholesky_inverse(Lg)
        Ap = G @ A.T  # (d, p)
        r, C = self.r, None
        if self.U is None:
            # Z_t = N_t A^{+T} as one product; P_t = A^+ Z_t as another
            Z = (self.N @ Ap.T).view(T, p, d).permute(1, 0, 2).reshape(p, T * d)
            P = (Ap @ Z).view(d, T, d).permute(1, 0, 2)
            P = 0.5 * (P + P.transpose(1, 2))
        else:  # C_t = A^+ U_t as one product, P_t = C_t C_t^T
            C = _mm(Ap, self.U).view(d, T, r).permute(1, 0, 2).contiguous()
            # the CPU solve works on C alone (tr(K P) = <K C, C>): no (T, d, d) P
            P = None if _task_loop(G) else _mm(C, C.transpose(1, 2))
        # the indicator solve and its gradient terms in blocks of tasks: the d x d
        # temporaries of the Newton steps stay O(block d^2), not O(T d^2)
        block = max(1, _BLOCK_ELEMENTS // (d * d))
        rtol = self.inner_rtol() if _task_loop(G) else _INNER_RTOL
        v = torch.empty(T, d, dtype=A.dtype, device=A.device)
        logdetH = torch.empty(T, dtype=A.dtype, device=A.device)
        quad = A.new_zeros(())
        ZK = A.new_zeros(p, d)  # sum_t Z_t K_t
        Om = A.new_zeros(d, d)  # sum_t (n_t K_t - K_t P_t K_t)
        for a in range(0, T, block):
            b = slice(a, min(a + block, T))
            v0 = None if self.v is None else self.v[b]
            Cb = None if C is None else C[b]
            Pb = None if P is None else P[b]
            v[b], logdetH[b], K, KPK, KC, tkp = solve_indicators(
                n[b], Pb, G, self.lo, s2, v0, C=Cb, work=self._work, rtol=rtol
            )
            quad = quad + tkp.sum()
            # contractions over the block: no (block, d, d) temporaries
            if grad and C is None:
                ZK += Z[:, a * d : b.stop * d] @ K.reshape(-1, d)
                Om += torch.tensordot(n[b], K, 1) - KPK.sum(0)
            elif grad:  # Z_t K_t = U_t (K_t C_t)^T, sum_t K_t P_t K_t = KCt^T KCt
                KCt = KC.transpose(1, 2).reshape(-1, d)
                ZK += _mm(self.U[:, a * r : b.stop * r], KCt)
                nK = torch.tensordot(n[b], K, 1)
                if _task_loop(G):  # the loop sets K's upper triangle only
                    nK = nK.triu() + nK.triu(1).T
                Om += nK - KCt.T @ KCt
            del K, KPK, KC
        self.v = v
        logdet_AtA = 2.0 * torch.log(torch.diagonal(Lg)).sum()
        k = p * math.log(2 * math.pi) + (p - d) * math.log(s2)
        # the scatter outside span A from an orthonormal basis Q of its complement,
        # E = tr(Q^T S Q): no cancellation (tr S - tr(A^+ S A) loses the digits of
        # tr S, amplified by 1 / s^2), and exactly 0 when p = d
        if p > d:
            Qc = torch.linalg.qr(A, mode="complete")[0][:, d:]  # (p, p - d)
            SQ = self.S @ Qc
            E = (Qc * SQ).sum()
        else:
            E = A.new_zeros(())
        f = 0.5 * ((n * (k + logdet_AtA + logdetH)).sum() + quad + E / s2)
        value = float(f) / self.n_total
        if self.adaptive_tol:
            self._record(value)
        if not grad:
            return value, None, v
        # dF/dA^+ = sum_t K_t Y_t (Y_t = Z_t^T) and dE/dA = -2 Q Q^T S A^{+T}
        dAp = ZK.T
        Om = 0.5 * s2 * Om + dAp @ A
        dA = self.n_total * (A @ G) + dAp.T @ G - A @ G @ (Om + Om.T) @ G
        if p > d:
            dA = dA - Qc @ (SQ.T @ Ap.T) / s2
        return value, dA / self.n_total, v
