"""The indicator solve of MTLCM's profiled objective on the CPU, one task at a time.

The same problem, steps and stopping rule as :func:`_mtlcm_objective.solve_indicators`
(projected Newton on v_t in [lo, 1]^d minimising n log det H + tr(H^{-1} P),
H = diag(v) + s2 G), in numpy and scipy's LAPACK with every d x d operation of a
task done while its matrices are in cache, in preallocated buffers:

* on this project's CPUs a batch of d x d elementwise passes over (T, d, d) arrays
  costs more than the arithmetic (fresh 8 MB temporaries are page-faulted and
  streamed from memory: forming the Newton matrix K o (2 K P K - n K) for a block
  of tasks cost as much as its Cholesky factorisation);
* the per-matrix LAPACK calls (OpenBLAS dpotrf/dpotri/dposv) run about twice as
  fast as torch's batched MKL kernels here (docs/notes.md, branch wt-scale2).

The Newton system is solved on the free block only (the variances not held at a
bound), gathered into an m x m matrix: at the optimum of the Table 1 process about
half of the d variances sit at a bound (sigma_s^2 or 1), so forming and factorising
it costs about an eighth of the full d x d system (the old code zeroed the bound
rows and columns and factorised all of d x d; the solution is the same).

One more saving: once a task has taken a Newton step, its decrement at the new
point is first estimated with the previous Newton matrix's Cholesky factor (two
triangular solves, O(d^2)); if that estimate is already below the rounding level
the task stops there, without forming and factorising a fresh Newton matrix. The
estimate is used only after a step whose own decrement was small (below
``sqrt(rtol)`` of f's terms), where the Newton matrix changes by a relative
O(step) and the estimate is the decrement to within a small factor; it is never
used to take a step.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg import blas, lapack

__all__ = ["solve_indicators_np"]


def _buffer(work: dict, name: str, shape: tuple) -> np.ndarray:
    """A reusable workspace array of at least ``shape`` (first axis sliced)."""
    buf = work.get(name)
    if buf is None or buf.shape[0] < shape[0] or buf.shape[1:] != shape[1:]:
        buf = np.empty(shape)
        work[name] = buf
    return buf[: shape[0]]


def _strict_lower(d: int, work: dict) -> np.ndarray:
    mask = work.get("lower")
    if mask is None or mask.shape[0] != d:
        mask = np.tril(np.ones((d, d), dtype=bool), -1)
        work["lower"] = mask
    return mask


def _inverse(out: np.ndarray, s2G: np.ndarray, v: np.ndarray, lower) -> float:
    """K = (diag(v) + s2G)^{-1} into ``out`` (d, d); returns log det H.

    With ``lower`` None only the upper triangle of ``out`` holds K (the strict
    lower one keeps s2G): the factor form reads K through that triangle only."""
    np.copyto(out, s2G)
    out.reshape(-1)[:: out.shape[0] + 1] += v
    # the transposed view is Fortran-ordered: LAPACK works in place on the upper
    # triangle of the C-ordered matrix, which is then copied to the lower one
    c, info = lapack.dpotrf(out.T, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        raise torch.linalg.LinAlgError("H is not positive definite")
    logdet = 2.0 * float(np.log(c.diagonal()).sum())
    lapack.dpotri(c, lower=1, overwrite_c=1)
    if lower is not None:
        np.copyto(out, out.T, where=lower)
    return logdet


def solve_indicators_np(n, P, G, lo, s2, v0, C, work, max_iter=50, rtol=1e-14):
    """numpy version of ``solve_indicators`` (arrays in, arrays out).

    In the factor form (``C`` given, P_t = C_t C_t^T) ``P`` may be None.
    ``work`` holds reusable buffers between calls: the K, K P K (and K C) returned
    are views into it, valid until the next call. In the factor form only the upper
    triangle of each K is set (the caller symmetrises what it sums): copying the
    triangle cost about a tenth of a factorisation and inverse at d = 100, and the
    solve itself reads K through that triangle only (K C by ``dsymm``; the Newton
    system's factorisation reads the upper triangle of K o (...)). Returns
    ``v, logdet H, K, K P K, K C`` and tr(K P) per task; with ``C`` K P K is None
    (sum (K C)(K C)^T over tasks instead), without ``C`` K C is None.

    Each task is solved to the end before the next one starts, so that its d x d
    matrices (K, K P K, the Newton matrix, the trial inverse: 5 d^2 numbers) stay
    in the core's cache: the tasks are independent, so the steps and results are
    those of a solve that advances all tasks one Newton step at a time.
    """
    B, d = len(n), G.shape[0]
    s2G = s2 * G
    lower = _strict_lower(d, work) if C is None else None
    if v0 is None:
        Pd = np.einsum("tii->ti", P) if C is None else np.einsum("tij,tij->ti", C, C)
        v = np.clip(Pd / n[:, None] - s2 * np.diagonal(G), lo, 1.0)
    else:
        v = np.array(v0, dtype=float)
    K = _buffer(work, "K", (B, d, d))
    KPK = _buffer(work, "KPK", (B, d, d)) if C is None else None
    KC = None if C is None else _buffer(work, "KC", (B, d, C.shape[2]))
    # one task's workspace: trial inverse, K P K (factor form), Newton matrix
    # and its factor, a temporary; trial K C
    w = _buffer(work, "w", (4, d, d))
    kc = None if C is None else _buffer(work, "kc", (1, d, C.shape[2]))[0]
    logdet, tkp = np.empty(B), np.empty(B)
    for i in range(B):
        logdet[i], tkp[i] = _solve_task(
            v[i],
            float(n[i]),
            None if C is None else C[i],
            None if P is None else P[i],
            K[i],
            None if C is None else KC[i],
            KPK[i] if C is None else None,
            s2G,
            lo,
            lower,
            w,
            kc,
            max_iter,
            rtol,
        )
    return v, logdet, K, KPK, KC, tkp


def _solve_task(v, n, C, P, K, KC, KPK, s2G, lo, lower, w, kc, max_iter, rtol):
    """Projected Newton for one task, in place: v (d,) from its start to the
    optimum, K = H^{-1} and K C (factor form) or K P K (dense form) there.
    Returns log det H and tr(K P)."""
    d = len(v)
    Kt, kpk_buf, Hs, tmp = w[0], w[1], w[2], w[3]
    flat = Hs.reshape(-1)

    # in the factor form P = C C^T is never formed: tr(K P) = <K C, C>, K P K =
    # (K C)(K C)^T only for a Newton matrix (its diagonal, for the gradient, is the
    # row norms of K C; the caller sums it over tasks as one product of K C)
    def trace_kp(Kx, kc_out):
        if C is None:
            return float(np.vdot(Kx, P))
        # (K C)^T = C^T K with K's upper triangle: the transposed views are
        # Fortran-ordered, so dsymm reads and writes in place
        blas.dsymm(1.0, Kx.T, C.T, c=kc_out.T, side=1, lower=1, overwrite_c=1)
        return float(np.vdot(kc_out, C))

    def diagonals():  # of K and K P K, with K (and K C) set
        if C is None:
            np.matmul(K, P, out=tmp)
            np.matmul(tmp, K, out=KPK)
            return K.diagonal().copy(), KPK.diagonal().copy()
        return K.diagonal().copy(), np.einsum("ij,ij->i", KC, KC)

    logdet = _inverse(K, s2G, v, lower)
    tkp = trace_kp(K, KC)
    f = n * logdet + tkp
    kd, kpkd = diagonals()
    # the factor in Hs is usable for the decrement estimate (see module doc) while
    # the free set is unchanged and the last step was small
    has_factor, small_step, free_prev = False, False, None
    for _ in range(max_iter):
        g = n * kd - kpkd
        free = ~(((v <= lo) & (g > 0)) | ((v >= 1.0) & (g < 0)))
        gf = g * free
        # Newton decrement at the rounding level of f's terms: converged
        scale = max(n * abs(logdet) + abs(f), 1.0)
        tol = rtol * scale
        # the Newton system on the free block only (the identity elsewhere: no
        # step there); its factor is kept in the first m^2 entries of Hs
        all_free = free.all()
        idx = None if all_free else free.nonzero()[0]
        m = d if idx is None else len(idx)
        gs = gf if idx is None else gf[idx]
        h = flat[: m * m].reshape(m, m)
        if has_factor and small_step and (free == free_prev).all():
            x, info = lapack.dpotrs(h.T, gs, lower=1)
            if info == 0 and gs @ x <= 0.1 * tol:
                break  # at the rounding level: stop here
        if m == 0:  # every variance at a bound it is pushed against
            break
        if idx is None:
            Kf = K
            if C is None:
                np.multiply(KPK, 2.0, out=h)
            else:
                np.matmul(KC, KC.T, out=kpk_buf)
                np.multiply(kpk_buf, 2.0, out=h)
        else:
            Kf = K.take(idx, 0).take(idx, 1)
            if C is None:
                np.multiply(KPK.take(idx, 0).take(idx, 1), 2.0, out=h)
            else:  # K P K on the free block from the free rows of K C
                KCf = KC.take(idx, 0)
                np.matmul(KCf, KCf.T, out=h)
                h *= 2.0
        np.multiply(Kf, n, out=tmp[:m, :m])
        h -= tmp[:m, :m]
        h *= Kf
        hd = h.diagonal().copy()
        _, xs, info = lapack.dposv(h.T, gs, lower=1, overwrite_a=1)
        if info != 0:  # not convex on the free block: a scaled gradient step
            kf = kd if idx is None else kd[idx]
            xs = gs / np.maximum(hd, 1e-3 * n * kf**2)
            has_factor = False
        else:
            has_factor, free_prev = True, free
        if idx is None:
            step = xs
        else:
            step = np.zeros(d)
            step[idx] = xs
        dec = g @ step
        if not dec > tol:
            break
        small_step = dec <= math.sqrt(rtol) * scale
        # backtracking line search; a task that cannot decrease f in 20 halvings
        # is at rounding level: it stops
        t = 1.0
        for _ in range(20):
            v_new = np.minimum(np.maximum(v - t * step, lo), 1.0)
            ld = _inverse(Kt, s2G, v_new, lower)
            tk = trace_kp(Kt, kc)
            f_new = n * ld + tk
            if f_new <= f:
                v[:], logdet, tkp, f = v_new, ld, tk, f_new
                np.copyto(K, Kt)
                if C is not None:
                    np.copyto(KC, kc)
                kd, kpkd = diagonals()
                break
            t *= 0.5
        else:
            break
    return logdet, tkp
