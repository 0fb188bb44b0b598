"""Approximate joint diagonalisation (pure numpy/scipy).

Given symmetric positive definite matrices C_1..C_T with weights w_t, find B such that
every B C_t B^T is as diagonal as possible, measured by Pham's (2001) criterion

    f(B) = sum_t w_t [ sum_i log (B C_t B^T)_ii - log det(B C_t B^T) ] >= 0,

which is zero exactly when all B C_t B^T are diagonal and is invariant to the scale of
the rows of B. With g = sum_t w_t:

    df/dB = 2 sum_t w_t diag(1 / (B C_t B^T)_ii) B C_t - 2 g B^{-T}.

It is minimised by L-BFGS over B. In MTLCM the C_t are per-task residual covariances
A V_t A^T + sigma^2 I with diagonal V_t that vary across tasks, so the minimiser is
A^{-1} up to permutation and scale.

References
----------
D.-T. Pham (2001). Joint approximate diagonalization of positive definite Hermitian
matrices. SIAM J. Matrix Anal. Appl. 22(4), 1136-1152.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

__all__ = [
    "ajd_pham",
    "bounded_variance_criterion",
    "minimize_unmixing",
    "pham_criterion",
]


def pham_criterion(
    B: np.ndarray, C: np.ndarray, w: np.ndarray, logdet_C: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """Pham's criterion and its gradient with respect to B.

    Parameters
    ----------
    B : ndarray of shape (d, d)
    C : ndarray of shape (T, d, d)
        Symmetric positive definite matrices.
    w : ndarray of shape (T,)
        Non-negative weights (normalised to sum 1 inside).
    logdet_C : ndarray of shape (T,), optional
        log det C_t, when the caller has it (it does not depend on B).

    Returns
    -------
    value : float
    grad : ndarray of shape (d, d)
    """
    w = w / w.sum()
    BC = np.matmul(B[None], C)
    D = np.einsum("tij,ij->ti", BC, B)
    if np.any(D <= 0):
        return np.inf, np.zeros_like(B)
    sign, logabsdet = np.linalg.slogdet(B)
    if sign == 0:
        return np.inf, np.zeros_like(B)
    if logdet_C is None:
        logdet_C = np.linalg.slogdet(C)[1]
    value = float(w @ (np.log(D).sum(1) - logdet_C)) - 2.0 * logabsdet
    grad = (
        2.0 * np.einsum("t,tij->ij", w, BC / D[:, :, None]) - 2.0 * np.linalg.inv(B).T
    )
    return value, grad


def ajd_pham(
    C: np.ndarray,
    w: np.ndarray | None = None,
    *,
    B0: np.ndarray | None = None,
    max_iter: int = 2000,
    tol: float = 1e-12,
) -> tuple[np.ndarray, dict]:
    """Jointly diagonalise ``C`` by minimising Pham's criterion.

    Parameters
    ----------
    C : ndarray of shape (T, d, d)
        Symmetric positive definite matrices (best pre-whitened by their weighted mean).
    w : ndarray of shape (T,), optional
        Weights (e.g. sample counts); uniform by default.
    B0 : ndarray of shape (d, d), optional
        Starting point (identity by default).
    max_iter : int
        L-BFGS iteration cap.
    tol : float
        Relative function tolerance.

    Returns
    -------
    B : ndarray of shape (d, d)
        Joint diagonaliser with unit-norm rows.
    info : dict
        ``criterion`` (final value), ``n_iter``, ``converged``.
    """
    T, d, _ = C.shape
    w = np.ones(T) if w is None else np.asarray(w, dtype=float)
    B0 = np.eye(d) if B0 is None else np.asarray(B0, dtype=float)
    logdet_C = np.linalg.slogdet(C)[1]
    B, info = minimize_unmixing(
        lambda B: pham_criterion(B, C, w, logdet_C), B0, max_iter=max_iter, tol=tol
    )
    return B / np.linalg.norm(B, axis=1, keepdims=True), info


def _clipped_variance_loss(P: np.ndarray, lo: float, hi: float):
    """h(P) = min over v in [lo, hi] of log v + P / v, and its derivative 1 / v*."""
    v = np.clip(P, lo, hi)
    return np.log(v) + P / v, 1.0 / v


def bounded_variance_criterion(
    B: np.ndarray, C: np.ndarray, w: np.ndarray, lo: float, hi: float
) -> tuple[float, np.ndarray]:
    """Profiled noiseless MTLCM objective of an unmixing B and its gradient.

    In the sigma_obs -> 0 limit with p = d, the MTLCM negative log-likelihood
    (slopes profiled) of residual covariances C_t is, up to constants,

        F(B) = sum_t w_t sum_i min_{v in [lo, hi]} [log v + (B C_t B^T)_ii / v]
               - 2 (sum_t w_t) log |det B|,

    Pham's criterion with each latent variance confined to [sigma_s^2, 1]; the
    inner minimum is attained at v = clip((B C_t B^T)_ii, lo, hi) and the function
    is continuously differentiable. Unlike Pham's criterion it fixes the scale of B.

    Returns
    -------
    value : float
        Divided by sum_t w_t.
    grad : ndarray of shape (d, d)
    """
    w = w / w.sum()
    BC = np.matmul(B[None], C)
    P = np.einsum("tij,ij->ti", BC, B)
    sign, logabsdet = np.linalg.slogdet(B)
    if sign == 0:
        return np.inf, np.zeros_like(B)
    h, dh = _clipped_variance_loss(P, lo, hi)
    value = float(w @ h.sum(1)) - 2.0 * logabsdet
    grad = (
        2.0 * np.einsum("t,tij->ij", w, BC * dh[:, :, None]) - 2.0 * np.linalg.inv(B).T
    )
    return value, grad


def minimize_unmixing(fun, B0: np.ndarray, *, max_iter: int = 2000, tol: float = 1e-12):
    """L-BFGS over a square matrix B for a criterion ``fun(B) -> (value, grad)``."""
    d = B0.shape[0]

    def fg(b):
        v, g = fun(b.reshape(d, d))
        return v, g.ravel()

    res = minimize(
        fg,
        np.asarray(B0, dtype=float).ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-10, "maxcor": 30},
    )
    return res.x.reshape(d, d), {
        "criterion": float(res.fun),
        "n_iter": int(res.nit),
        "converged": bool(res.success),
    }
