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
from scipy.linalg import lapack

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
    """K = (diag(v) + s2G)^{-1} into ``out`` (d, d); returns log det H."""
    np.copyto(out, s2G)
    out.reshape(-1)[:: out.shape[0] + 1] += v
    # the transposed view is Fortran-ordered: LAPACK works in place on the upper
    # triangle of the C-ordered matrix, which is then copied to the lower one
    c, info = lapack.dpotrf(out.T, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        raise torch.linalg.LinAlgError("H is not positive definite")
    logdet = 2.0 * float(np.log(c.diagonal()).sum())
    lapack.dpotri(c, lower=1, overwrite_c=1)
    np.copyto(out, out.T, where=lower)
    return logdet


def solve_indicators_np(n, P, G, lo, s2, v0, C, work, max_iter=50, rtol=1e-14):
    """numpy version of ``solve_indicators`` (arrays in, arrays out).

    In the factor form (``C`` given, P_t = C_t C_t^T) ``P`` may be None.
    ``work`` holds reusable buffers between calls: the K, K P K (and K C) returned
    are views into it, valid until the next call. Returns ``v, logdet H, K, K P K,
    K C`` and tr(K P) per task; with ``C`` K P K is None (sum (K C)(K C)^T over
    tasks instead), without ``C`` K C is None.
    """
    B, d = len(n), G.shape[0]
    s2G = s2 * G
    lower = _strict_lower(d, work)
    if v0 is None:
        Pd = np.einsum("tii->ti", P) if C is None else np.einsum("tij,tij->ti", C, C)
        v = np.clip(Pd / n[:, None] - s2 * np.diagonal(G), lo, 1.0)
    else:
        v = np.array(v0, dtype=float)
    K = _buffer(work, "K", (B, d, d))
    KPK = _buffer(work, "KPK", (B, d, d))
    Hs = _buffer(work, "Hs", (B, d, d))  # Newton matrices, then their factors
    KC = None if C is None else _buffer(work, "KC", (B, d, C.shape[2]))
    kc = None if C is None else _buffer(work, "kc", (1, d, C.shape[2]))[0]
    w = _buffer(work, "w", (2, d, d))
    logdet, tkp = np.empty(B), np.empty(B)
    kd, kpkd = np.empty((B, d)), np.empty((B, d))  # diagonals of K, K P K

    # in the factor form P = C C^T is never formed: tr(K P) = <K C, C>, K P K =
    # (K C)(K C)^T only for a Newton matrix (its diagonal, for the gradient, is the
    # row norms of K C; the caller sums it over tasks as one product of K C)
    kpk_ok = np.zeros(B, dtype=bool)

    def trace_kp(Kt, i, kc_out):
        if C is None:
            return float(np.vdot(Kt, P[i]))
        np.matmul(Kt, C[i], out=kc_out)
        return float(np.vdot(kc_out, C[i]))

    def products(i):  # K[i] (and, in the factor form, KC[i]) are set
        kd[i] = K[i].diagonal()
        if C is None:
            np.matmul(K[i], P[i], out=w[0])
            np.matmul(w[0], K[i], out=KPK[i])
            kpkd[i] = KPK[i].diagonal()
        else:
            np.einsum("ij,ij->i", KC[i], KC[i], out=kpkd[i])
            kpk_ok[i] = False

    def kpk(i):
        if C is not None and not kpk_ok[i]:
            np.matmul(KC[i], KC[i].T, out=KPK[i])
            kpk_ok[i] = True
        return KPK[i]

    for i in range(B):
        logdet[i] = _inverse(K[i], s2G, v[i], lower)
        tkp[i] = trace_kp(K[i], i, None if C is None else KC[i])
        products(i)
    f = n * logdet + tkp
    # a task's factor in Hs is usable for the decrement estimate (see module doc)
    # while its free set is unchanged and its last step was small
    has_factor = np.zeros(B, dtype=bool)
    free_prev = np.zeros((B, d), dtype=bool)
    small_step = np.zeros(B, dtype=bool)
    active = np.arange(B)
    for _ in range(max_iter):
        na, va = n[active], v[active]
        g = na[:, None] * kd[active] - kpkd[active]
        free = ~(((va <= lo) & (g > 0)) | ((va >= 1.0) & (g < 0)))
        gf = g * free
        # Newton decrement at the rounding level of f's terms: converged
        scale = np.maximum(na * np.abs(logdet[active]) + np.abs(f[active]), 1.0)
        tol = rtol * scale
        step = np.empty_like(g)
        dec = np.empty(len(active))
        all_free = free.all(1)
        reuse = has_factor[active] & small_step[active]
        reuse &= (free == free_prev[active]).all(1)
        for j, i in enumerate(active):
            fj = free[j]
            # the Newton system on the free block only (the identity elsewhere:
            # no step there); its factor is kept in the first m^2 entries of Hs[i]
            idx = None if all_free[j] else fj.nonzero()[0]
            m = d if idx is None else len(idx)
            gs = gf[j] if idx is None else gf[j][idx]
            h = Hs[i].reshape(-1)[: m * m].reshape(m, m)
            if reuse[j]:
                x, info = lapack.dpotrs(h.T, gs, lower=1)
                if info == 0 and gs @ x <= 0.1 * tol[j]:
                    step[j], dec[j] = 0.0, 0.0  # at the rounding level: stop here
                    continue
            if m == 0:  # every variance at a bound it is pushed against
                step[j], dec[j], has_factor[i] = 0.0, 0.0, False
                continue
            if idx is None:
                Kf = K[i]
                np.multiply(kpk(i), 2.0, out=h)
            else:
                Kf = K[i].take(idx, 0).take(idx, 1)
                if C is None:
                    np.multiply(KPK[i].take(idx, 0).take(idx, 1), 2.0, out=h)
                else:  # K P K on the free block from the free rows of K C
                    KCf = KC[i].take(idx, 0)
                    np.matmul(KCf, KCf.T, out=h)
                    h *= 2.0
            np.multiply(Kf, na[j], out=w[0][:m, :m])
            h -= w[0][:m, :m]
            h *= Kf
            hd = h.diagonal().copy()
            _, xs, info = lapack.dposv(h.T, gs, lower=1, overwrite_a=1)
            if info != 0:  # not convex on the free block: a scaled gradient step
                kf = kd[i] if idx is None else kd[i][idx]
                xs = gs / np.maximum(hd, 1e-3 * na[j] * kf**2)
                has_factor[i] = False
            else:
                has_factor[i] = True
                free_prev[i] = fj
            if idx is None:
                step[j] = xs
            else:
                step[j] = 0.0
                step[j][idx] = xs
            dec[j] = g[j] @ step[j]
        going = dec > tol
        small_step[active] = dec <= math.sqrt(rtol) * scale
        active, step = active[going], step[going]
        if len(active) == 0:
            break
        # backtracking line search per task; a task that cannot decrease f in 20
        # halvings is at rounding level: it stops
        keep = np.ones(len(active), dtype=bool)
        for j, i in enumerate(active):
            t = 1.0
            for _ in range(20):
                v_new = np.minimum(np.maximum(v[i] - t * step[j], lo), 1.0)
                ld = _inverse(w[1], s2G, v_new, lower)
                tk = trace_kp(w[1], i, kc)
                f_new = n[i] * ld + tk
                if f_new <= f[i]:
                    v[i], logdet[i], tkp[i], f[i] = v_new, ld, tk, f_new
                    np.copyto(K[i], w[1])
                    if C is not None:
                        np.copyto(KC[i], kc)
                    products(i)
                    break
                t *= 0.5
            else:
                keep[j] = False
        active = active[keep]
        if len(active) == 0:
            break
    return v, logdet, K, (KPK if C is None else None), KC, tkp
