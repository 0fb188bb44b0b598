"""MTLCM's fitting maths: the joint-diagonalisation start, the preconditioner and
the L-BFGS refinement of the profiled exact likelihood (stateless functions; the
randomness comes in as a numpy generator, the device as an argument)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import minimize

from identrep.exceptions import DataError
from identrep.models.multitask._ajd import (
    ajd_pham,
    bounded_variance_criterion,
    minimize_unmixing,
)
from identrep.models.multitask._likelihoods import mtlcm_optimal_slopes
from identrep.models.multitask._mtlcm_bounded import BoundedObjective
from identrep.models.multitask._mtlcm_objective import ProfiledObjective
from identrep.models.multitask._stats import TaskStats

__all__ = ["jd_init", "preconditioner", "random_init", "refine", "stats_to_torch"]

# gradient entries (of the mean NLL per sample, in the relative coordinates of
# ``preconditioner``) below which a stalled line search counts as converged: a
# relative change of 1e-3 in A then moves the objective by < 1e-7 nats per sample
_GRAD_NOISE = 1e-4


def stats_to_torch(stats: TaskStats, dev):
    f = lambda a: torch.as_tensor(a, dtype=torch.float64, device=dev)
    return f(stats.n), f(stats.Sxx), f(stats.sxy), f(stats.syy)


# the joint diagonalisation sees at most this many matrices (groups of tasks): its
# cost is O(groups d^3) per iteration whatever the number of tasks
_MAX_AJD_GROUPS = 256


def _task_groups(w: np.ndarray, max_groups: int) -> np.ndarray:
    """Start index of each group of consecutive tasks: at most ``max_groups``
    groups of about equal weight (sample count)."""
    n_tasks = len(w)
    if n_tasks <= max_groups:
        return np.arange(n_tasks)
    cuts = np.linspace(0, w.sum(), max_groups + 1)[1:-1]
    edges = np.minimum(np.searchsorted(np.cumsum(w), cuts) + 1, n_tasks - 1)
    return np.unique(np.concatenate([[0], edges]))


def _shrunk(C: np.ndarray, w: np.ndarray, d: int) -> np.ndarray:
    """Whitened covariances shrunk towards their pooled mean (the identity) where a
    group has too few samples for full rank: (n C + k I) / (n + k), k = d + 2 - n
    (a residual covariance of n samples has rank n - 2 at most). The pooled mean is
    A Vbar A^T, so the shrunk matrices keep their joint diagonaliser; without it a
    rank-deficient C_t makes Pham's criterion unbounded below."""
    k = np.maximum(d + 2.0 - w, 0.0)
    if not k.any():
        return C
    eye = np.eye(C.shape[1])
    return (w[:, None, None] * C + k[:, None, None] * eye) / (w + k)[:, None, None]


def jd_init(R, Rbar, w, d: int, sigma_s: float, rng, restart: int):
    """Initial mixing A from joint diagonalisation of the residual covariances R
    (T, p, p), their pooled mean Rbar and task weights w (sample counts).

    Pham's criterion is minimised over at most ``_MAX_AJD_GROUPS`` pooled groups of
    consecutive tasks (pooling sums diagonal latent covariances, so the groups share
    the tasks' joint diagonaliser); the latents' scales are then set on the
    individual tasks with the most samples (at most as many).
    """
    ev, U = np.linalg.eigh(Rbar)
    ev, U = ev[::-1][:d], U[:, ::-1][:, :d]
    if not ev[-1] > 1e-12 * max(ev[0], 1e-300):
        raise DataError(
            "The pooled within-task residual covariance of X has rank < n_latents "
            f"({d}): features are (nearly) collinear, so the fit is singular. Remove "
            "redundant features or lower n_latents."
        )
    W = (U / np.sqrt(ev)).T  # (d, p): whitening onto the top-d subspace
    w = np.asarray(w, dtype=float)

    def whiten(Rs):
        C = W @ Rs @ W.T
        return 0.5 * (C + C.transpose(0, 2, 1))

    starts = _task_groups(w, _MAX_AJD_GROUPS)
    if len(starts) < len(w):
        wg = np.add.reduceat(w, starts)
        Rg = np.add.reduceat(w[:, None, None] * R, starts) / wg[:, None, None]
    else:
        wg, Rg = w, R
    Cg = _shrunk(whiten(Rg), wg, d)
    B0 = np.eye(d) if restart == 0 else np.linalg.qr(rng.standard_normal((d, d)))[0]
    Bw, _ = ajd_pham(Cg, wg, B0=B0)
    # scales on individual tasks: causal latents have unit variance
    keep = np.sort(np.argsort(-w, kind="stable")[:_MAX_AJD_GROUPS])
    C = _shrunk(whiten(R[keep]), w[keep], d)
    D = np.einsum("ij,tjk,ik->ti", Bw, C, Bw)
    scale2 = np.array([np.median(col[col >= 0.25 * col.max()]) for col in D.T])
    Bw = Bw / np.sqrt(scale2)[:, None]
    # noiseless limit with variances profiled in [sigma_s^2, 1]: fixes the scales
    Bw, _ = minimize_unmixing(
        lambda B: bounded_variance_criterion(B, C, w[keep], sigma_s**2, 1.0), Bw
    )
    return np.linalg.pinv(Bw @ W)


def random_init(p: int, d: int, rng):
    """The reference code's start for A: U(+-1/sqrt(d)) entries."""
    bound = 1.0 / np.sqrt(d)
    return rng.uniform(-bound, bound, size=(p, d))


def preconditioner(A0: np.ndarray, Rbar: np.ndarray) -> np.ndarray:
    """Linear change of variables A = T Theta that makes L-BFGS scale-free.

    T = Rbar^{1/2} [U0, U_perp], with Rbar the pooled residual covariance, U0 the
    whitened starting mixing Rbar^{-1/2} A0 and U_perp an orthonormal basis of its
    complement, so Theta starts at [I; 0]. In these coordinates the problem no
    longer inherits the conditioning of the data or of A (a relative,
    equivariant parameterisation as in ICA).
    """
    p, d = A0.shape
    ev, U = np.linalg.eigh(Rbar)
    ev = np.maximum(ev, 1e-12 * ev.max())
    half = (U * np.sqrt(ev)) @ U.T
    U0 = (U / np.sqrt(ev)) @ U.T @ A0
    if p > d:
        Q, _ = np.linalg.qr(U0, mode="complete")
        U0 = np.concatenate([U0, Q[:, d:]], axis=1)
    return half @ U0


def refine(
    A0, tens, n_total, sigma_s, sigma_obs, max_iter, tol, dev, T=None, gamma_bound=None
):
    """L-BFGS over A on the exact likelihood with c and the slopes profiled out.

    For a fixed A the likelihood separates over tasks; each task's indicators solve a
    small box-constrained problem (:func:`mtlcm_optimal_indicators`) and its slopes a
    least-squares problem, both exactly. By Danskin's theorem the gradient of the
    profiled objective is the partial gradient at those optima. Profiling removes
    the ill-conditioned valley between the scale of a column of A and its
    indicators, where joint L-BFGS over (A, c) crawls for thousands of iterations.
    With ``gamma_bound`` the slopes are bounded by (1 - c) gamma_bound
    (:class:`BoundedObjective`) instead of free.
    """
    p, d = A0.shape
    n, Sxx, sxy, syy = tens
    if T is None:
        T = np.eye(p)
    Tt = torch.as_tensor(T, dtype=torch.float64, device=dev)
    theta0 = np.linalg.solve(T, A0)
    if gamma_bound is None:
        objective = ProfiledObjective(
            n, Sxx, sxy, syy, sigma_s, sigma_obs, d=d, adaptive_tol=True
        )
    else:
        objective = BoundedObjective(
            n, Sxx, sxy, syy, sigma_s, sigma_obs, float(gamma_bound)
        )

    # the last evaluation, kept: L-BFGS-B re-evaluates its start (f_prev below, each
    # restart) and the final point's value and variances are the last evaluation's
    last = {}

    def fg(a):
        key = a.tobytes()
        if last.get("key") == key:
            return last["f"], last["g"].copy()
        theta = torch.as_tensor(a, dtype=torch.float64, device=dev).view(p, d)
        try:
            f, gA, v = objective(Tt @ theta)
        except torch.linalg.LinAlgError:
            return np.inf, np.zeros_like(a)
        g = (Tt.T @ gA).cpu().numpy().ravel()
        last.update(key=key, f=f, g=g.copy(), v=v)
        return f, g

    # L-BFGS-B, restarted with fresh curvature memory when its line search stalls
    # while still improving (rounding noise of the inner solves can stall it)
    x, n_iter = theta0.ravel(), 0
    f_prev = fg(x)[0]
    for _ in range(4):
        res = minimize(
            fg,
            x,
            jac=True,
            method="L-BFGS-B",
            options={
                "maxiter": int(max_iter) - n_iter,
                "ftol": float(tol),
                "gtol": 1e-9,
                "maxcor": 30,
            },
        )
        improved = res.fun < f_prev - float(tol) * max(abs(res.fun), 1.0)
        x, n_iter, f_prev = res.x, n_iter + int(res.nit), float(res.fun)
        if res.success or "ABNORMAL" not in str(res.message) or not improved:
            break
        if n_iter >= max_iter:
            break
    A = Tt @ torch.as_tensor(x, dtype=torch.float64, device=dev).view(p, d)
    if last.get("key") == np.asarray(x, dtype=float).tobytes():
        f, v = last["f"], last["v"]
    else:
        f, _, v = objective(A, grad=False)
    lo = sigma_s**2
    c = ((v - lo) / (1.0 - lo)).clamp(0.0, 1.0)
    if gamma_bound is None:
        m = mtlcm_optimal_slopes(A, c, sxy, syy, sigma_s, sigma_obs)
    else:
        m = objective.m
    return {
        "A": A.cpu().numpy().copy(),
        "c": c.cpu().numpy(),
        "m": m.cpu().numpy(),
        "nll": f,
        "n_iter": n_iter,
        "converged": _converged(res),
        "message": stop_reason(res.message),
        "grad_max": float(np.abs(res.jac).max()),
    }


def stop_reason(message) -> str:
    """scipy's L-BFGS-B message in words (its "ABNORMAL: " says nothing)."""
    text = str(message).strip()
    if text.startswith("ABNORMAL"):
        return "the line search could not decrease the objective any further"
    if "ITERATIONS REACHED LIMIT" in text.upper():
        return "the iteration limit (max_iter) was reached"
    if "FUNCTION EVALUATIONS EXCEEDS LIMIT" in text.upper():
        return "the evaluation limit was reached"
    return text.lower().rstrip(".") or "stopped"


def _converged(res) -> bool:
    """L-BFGS-B success, or a line search that stalled at a stationary point.

    The profiled objective carries rounding noise of the inner solves (~1e-12
    relative); when L-BFGS-B's line search cannot make progress there ("ABNORMAL")
    while the gradient is at noise level, the optimum has been reached.
    """
    if res.success:
        return True
    return "ABNORMAL" in str(res.message) and float(np.abs(res.jac).max()) < _GRAD_NOISE
