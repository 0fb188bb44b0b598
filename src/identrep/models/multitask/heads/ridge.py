r"""Task-head solvers for multi-task regression on shared features.

A multi-task regression network predicts task t's target from shared features
f = h(x) in R^d with a linear head, y_hat = w_t^T f + b_t. The heads are pluggable:

* :class:`~identrep.models.multitask.heads.JointHeads` (``joint.py``): free per-task
  weights and biases, learned jointly with the feature extractor by gradient descent
  (the MTRN of Chen et al., 2024).
* :func:`ridge_heads` (and :func:`ridge_heads_masked` for wide data): the heads are
  the per-task ridge-regression solution on the current minibatch, in closed form,
  and the loss is differentiated *through* the solve. This is the differentiable
  closed-form base learner of MetaOptNet (Lee et al., 2019; Bertinetto et al.,
  2019) and the "inner ridge" relaxation of the bilevel multi-task problem of
  Lachapelle et al. (2023). The extractor is then trained on the profiled loss
  min_W L(theta, W), which removes the slow joint dynamics of features and heads.

Ridge maths. For task t with observations i in I_t (n_t of them, or weights
omega_i >= 0 with n_t = sum omega_i), the head solves

    min_{w, b}  (1 / n_t) sum_i omega_i (y_i - w^T f_i - b)^2 + alpha ||w||^2,

with an unpenalised intercept. Setting the gradient in b to zero gives
b = y_bar - f_bar^T w (per-task means), and substituting it leaves a ridge problem on
task-centred data:

    (S_t + alpha I) w_t = c_t,
    S_t = (1 / n_t) sum_i omega_i (f_i - f_bar)(f_i - f_bar)^T,
    c_t = (1 / n_t) sum_i omega_i (f_i - f_bar)(y_i - y_bar).

``alpha`` is therefore relative to the per-sample loss (equivalently a sum-of-squares
ridge with penalty n_t * alpha), so it means the same for small and large tasks. The
d x d systems of all tasks present in a batch are solved at once with
:func:`torch.linalg.solve` on a (T_present, d, d) batch; gradients flow through the
solve by autograd (implicit differentiation of the normal equations,
dw = (S + alpha I)^{-1} (dc - dS w)). Tasks absent from a batch get w = 0, b = 0 and
must not be scored.

References
----------
K. Lee, S. Maji, A. Ravichandran, S. Soatto (2019). Meta-learning with differentiable
convex optimization (MetaOptNet). CVPR.
L. Bertinetto, J. F. Henriques, P. Torr, A. Vedaldi (2019). Meta-learning with
differentiable closed-form solvers. ICLR.
S. Lachapelle, T. Deleu, D. Mahajan, I. Mitliagkas, Y. Bengio, S. Lacoste-Julien,
Q. Bertrand (2023). Synergies between disentanglement and sparsity: generalization
and identifiability in multi-task learning. ICML.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "TaskMoments",
    "fit_ridge_heads",
    "fit_ridge_heads_wide",
    "ridge_from_moments",
    "ridge_heads",
    "ridge_heads_masked",
    "task_moments",
    "task_moments_masked",
]


class TaskMoments(NamedTuple):
    """Per-task first and second moments of (features, target).

    Attributes
    ----------
    count : Tensor of shape (n_tasks,)
        n_t (sum of observation weights).
    mean_f : Tensor of shape (n_tasks, d)
    mean_y : Tensor of shape (n_tasks,)
    cov_ff : Tensor of shape (n_tasks, d, d)
        S_t, the (population) feature covariance within the task.
    cov_fy : Tensor of shape (n_tasks, d)
        c_t, the feature-target covariance within the task.

    Tasks with no observation have zero moments.
    """

    count: Tensor
    mean_f: Tensor
    mean_y: Tensor
    cov_ff: Tensor
    cov_fy: Tensor


def _sums_long(F, y, task_ids, n_tasks, weight):
    d = F.shape[1]
    w = F.new_ones(F.shape[0]) if weight is None else weight.to(F.dtype)
    Fw = F * w[:, None]
    count = F.new_zeros(n_tasks).index_add(0, task_ids, w)
    sf = F.new_zeros(n_tasks, d).index_add(0, task_ids, Fw)
    sy = F.new_zeros(n_tasks).index_add(0, task_ids, w * y)
    sff = F.new_zeros(n_tasks, d, d).index_add(0, task_ids, Fw[:, :, None] * F[:, None])
    sfy = F.new_zeros(n_tasks, d).index_add(0, task_ids, Fw * y[:, None])
    return count, sf, sy, sff, sfy


def _sums_masked(F, Y, mask):
    B, d = F.shape
    M = mask.to(F.dtype)
    Yz = torch.where(mask.bool(), Y, torch.zeros_like(Y))  # NaN-safe
    count = M.sum(0)
    sf = M.T @ F
    sy = (M * Yz).sum(0)
    sff = (M.T @ (F[:, :, None] * F[:, None]).reshape(B, d * d)).reshape(-1, d, d)
    sfy = (M * Yz).T @ F
    return count, sf, sy, sff, sfy


def _moments_from_sums(count, sf, sy, sff, sfy, shift):
    """Centred moments from raw sums of features shifted by ``shift`` (d,)."""
    n = count.clamp_min(torch.finfo(count.dtype).tiny)
    mf = sf / n[:, None]
    my = sy / n
    cff = sff / n[:, None, None] - mf[:, :, None] * mf[:, None, :]
    cff = 0.5 * (cff + cff.transpose(1, 2))
    cfy = sfy / n[:, None] - mf * my[:, None]
    empty = count <= 0
    if bool(empty.any()):
        keep = (~empty).to(count.dtype)
        mf, my = mf * keep[:, None], my * keep
        cff, cfy = cff * keep[:, None, None], cfy * keep[:, None]
    return TaskMoments(count, mf + shift * (~empty)[:, None].to(mf.dtype), my, cff, cfy)


def task_moments(
    F: Tensor,
    y: Tensor,
    task_ids: Tensor,
    n_tasks: int,
    weight: Tensor | None = None,
) -> TaskMoments:
    """Per-task moments of long-format data (one observation per row).

    Features are shifted by their (weighted) batch mean before the sums are formed,
    which keeps the covariance accurate in float32. The moments do not depend on the
    shift, so it is treated as a constant (detached). Differentiable in ``F`` and
    ``y``.

    Parameters
    ----------
    F : Tensor of shape (n_obs, d)
    y : Tensor of shape (n_obs,)
    task_ids : LongTensor of shape (n_obs,)
        Task of each observation, in ``[0, n_tasks)``.
    n_tasks : int
    weight : Tensor of shape (n_obs,), optional
        Non-negative observation weights (e.g. a 0/1 mask); default all ones.

    Returns
    -------
    TaskMoments
    """
    w = None if weight is None else weight.to(F.dtype)
    with torch.no_grad():
        if w is None:
            shift = F.mean(0)
        else:
            shift = (F * w[:, None]).sum(0) / w.sum().clamp_min(1e-30)
    sums = _sums_long(F - shift, y, task_ids, int(n_tasks), w)
    return _moments_from_sums(*sums, shift)


def task_moments_masked(F: Tensor, Y: Tensor, mask: Tensor) -> TaskMoments:
    """Per-task moments of wide-format data: every row observes a subset of tasks.

    Parameters
    ----------
    F : Tensor of shape (n_rows, d)
    Y : Tensor of shape (n_rows, n_tasks)
        Targets; entries where ``mask`` is False are ignored (may be NaN).
    mask : Tensor of shape (n_rows, n_tasks), bool or 0/1
        Which entries are observed (or non-negative weights).

    Returns
    -------
    TaskMoments
    """
    with torch.no_grad():
        used = (mask.to(F.dtype).sum(1) > 0).to(F.dtype)
        shift = (F * used[:, None]).sum(0) / used.sum().clamp_min(1.0)
    sums = _sums_masked(F - shift, Y, mask)
    return _moments_from_sums(*sums, shift)


def ridge_from_moments(moments: TaskMoments, alpha: float) -> tuple[Tensor, Tensor]:
    """Solve (S_t + alpha I) w_t = c_t and b_t = y_bar_t - f_bar_t^T w_t.

    Only tasks with ``count > 0`` are solved (one batched
    :func:`torch.linalg.solve`); the others get zero weights and bias.

    Parameters
    ----------
    moments : TaskMoments
    alpha : float
        Ridge penalty (> 0) relative to the mean squared error.

    Returns
    -------
    W : Tensor of shape (n_tasks, d)
    b : Tensor of shape (n_tasks,)
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0; got {alpha!r}.")
    count, mf, my, cff, cfy = moments
    T, d = mf.shape
    present = torch.nonzero(count > 0).squeeze(1)
    eye = torch.eye(d, dtype=cff.dtype, device=cff.device)
    if present.numel() == T:
        W = torch.linalg.solve(cff + alpha * eye, cfy.unsqueeze(-1)).squeeze(-1)
    else:
        Wp = torch.linalg.solve(
            cff[present] + alpha * eye, cfy[present].unsqueeze(-1)
        ).squeeze(-1)
        W = mf.new_zeros(T, d).index_put((present,), Wp)
    b = my - (mf * W).sum(-1)
    return W, b


def ridge_heads(
    F: Tensor,
    y: Tensor,
    task_ids: Tensor,
    n_tasks: int,
    alpha: float,
    weight: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-task ridge heads with unpenalised intercepts, differentiable in F and y.

    Minimises ``(1/n_t) sum_i (y_i - w_t^T f_i - b_t)^2 + alpha ||w_t||^2`` for every
    task t present in the batch (see the module docstring for the maths).

    Parameters
    ----------
    F : Tensor of shape (n_obs, d)
        Features of the observations.
    y : Tensor of shape (n_obs,)
        Targets.
    task_ids : LongTensor of shape (n_obs,)
        Task of every observation, in ``[0, n_tasks)``.
    n_tasks : int
        Number of tasks T.
    alpha : float
        Ridge penalty, > 0.
    weight : Tensor of shape (n_obs,), optional
        Non-negative observation weights (a 0/1 mask selects the fitting set).

    Returns
    -------
    W : Tensor of shape (n_tasks, d)
        Head weights; zero for tasks absent from the batch.
    b : Tensor of shape (n_tasks,)
        Intercepts; zero for absent tasks.

    Examples
    --------
    >>> import torch
    >>> F = torch.randn(40, 3, dtype=torch.float64)
    >>> t = torch.arange(40) % 2
    >>> y = F @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) + 3.0
    >>> W, b = ridge_heads(F, y, t, n_tasks=3, alpha=1e-9)
    >>> W[0].round(decimals=4).tolist(), round(float(b[0]), 4), W[2].abs().sum().item()
    ([1.0, -2.0, 0.5], 3.0, 0.0)
    """
    return ridge_from_moments(task_moments(F, y, task_ids, n_tasks, weight), alpha)


def ridge_heads_masked(
    F: Tensor, Y: Tensor, mask: Tensor, alpha: float
) -> tuple[Tensor, Tensor]:
    """Per-task ridge heads for wide data (rows observe several tasks).

    Parameters
    ----------
    F : Tensor of shape (n_rows, d)
    Y : Tensor of shape (n_rows, n_tasks)
        Targets; unobserved entries (``mask`` False) are ignored.
    mask : Tensor of shape (n_rows, n_tasks), bool
    alpha : float
        Ridge penalty, > 0.

    Returns
    -------
    W : Tensor of shape (n_tasks, d)
    b : Tensor of shape (n_tasks,)
        Zero for tasks with no observed entry.
    """
    return ridge_from_moments(task_moments_masked(F, Y, mask), alpha)


@torch.no_grad()
def fit_ridge_heads(
    F: Tensor,
    y: Tensor,
    task_ids: Tensor,
    n_tasks: int,
    alpha: float,
    *,
    chunk_size: int = 8192,
) -> tuple[Tensor, Tensor]:
    """Final ridge heads on a full training set, accumulated in chunks in float64.

    Same solution as :func:`ridge_heads` on all observations at once, with the sums
    accumulated in float64: by batched matrix products on a task-padded
    (T, max n_t, d) copy when tasks have similar sizes, else in chunks of
    ``chunk_size`` observations (memory O(chunk_size d^2 + T d^2)). Used after
    training to give an estimator its ``head_weights_``/``head_bias_``.

    Parameters
    ----------
    F : Tensor of shape (n_obs, d)
    y : Tensor of shape (n_obs,)
    task_ids : LongTensor of shape (n_obs,)
    n_tasks : int
    alpha : float
    chunk_size : int, default=8192

    Returns
    -------
    W : Tensor of shape (n_tasks, d), float64
    b : Tensor of shape (n_tasks,), float64
    """
    F = F.to(torch.float64)
    y = y.to(torch.float64)
    shift = F.mean(0)
    n, T = F.shape[0], int(n_tasks)
    counts = torch.bincount(task_ids, minlength=T)
    n_max = int(counts.max()) if n else 0
    if n and T * n_max <= 2 * n + chunk_size:
        # tasks of similar size: pad to (T, n_max, d) and use batched matmuls
        order = torch.argsort(task_ids, stable=True)
        t_sorted = task_ids[order]
        starts = torch.cumsum(counts, 0) - counts
        pos = torch.arange(n, device=F.device) - starts[t_sorted]
        Fp = F.new_zeros(T, n_max, F.shape[1])
        Fp[t_sorted, pos] = F[order] - shift
        yp = F.new_zeros(T, n_max)
        yp[t_sorted, pos] = y[order]
        sums = (
            counts.to(F.dtype),
            Fp.sum(1),
            yp.sum(1),
            Fp.transpose(1, 2) @ Fp,
            (Fp.transpose(1, 2) @ yp.unsqueeze(-1)).squeeze(-1),
        )
        return ridge_from_moments(_moments_from_sums(*sums, shift), alpha)
    total = None
    for sl in torch.arange(F.shape[0], device=F.device).split(int(chunk_size)):
        s = _sums_long(F[sl] - shift, y[sl], task_ids[sl], int(n_tasks), None)
        total = (
            s if total is None else tuple(a + b for a, b in zip(total, s, strict=True))
        )
    return ridge_from_moments(_moments_from_sums(*total, shift), alpha)


@torch.no_grad()
def fit_ridge_heads_wide(
    F: Tensor, Y: Tensor, mask: Tensor, alpha: float, *, chunk_size: int = 2048
) -> tuple[Tensor, Tensor]:
    """Ridge heads on a full wide-layout training set, in float64 and in chunks.

    Same solution as :func:`fit_ridge_heads` on the observed (row, task) pairs, but
    each row's features enter once: the per-task sums are matrix products with the
    (rows x tasks) mask, so the cost is O(n_rows T d^2) in a few large matrix
    products instead of O(n_obs d^2) in gathers (n_obs = n_rows T for a fully
    observed matrix), with memory O(chunk_size d^2).

    Parameters
    ----------
    F : Tensor of shape (n_rows, d)
    Y : Tensor of shape (n_rows, n_tasks)
        Targets; unobserved entries (``mask`` False) are ignored (may be NaN).
    mask : Tensor of shape (n_rows, n_tasks), bool
    alpha : float
    chunk_size : int, default=2048

    Returns
    -------
    W : Tensor of shape (n_tasks, d), float64
    b : Tensor of shape (n_tasks,), float64

    Examples
    --------
    >>> import torch
    >>> F = torch.randn(50, 2, dtype=torch.float64)
    >>> w = torch.tensor([1.0, 2.0], dtype=torch.float64)
    >>> Y = torch.stack([F @ w, F[:, 0] - 1.0], 1)
    >>> mask = torch.ones(50, 2, dtype=torch.bool)
    >>> W, b = fit_ridge_heads_wide(F, Y, mask, alpha=1e-9)
    >>> (W.round(decimals=4) + 0.0).tolist(), (b.round(decimals=4) + 0.0).tolist()
    ([[1.0, 2.0], [1.0, 0.0]], [0.0, -1.0])
    """
    F = F.to(torch.float64)
    Y = Y.to(torch.float64)
    mask = mask.bool()
    used = mask.any(1)
    shift = F[used].mean(0) if bool(used.any()) else F.new_zeros(F.shape[1])
    Fc = F - shift
    M = mask.to(F.dtype)
    Yz = torch.where(mask, Y, torch.zeros_like(Y))  # NaN-safe
    count, sf, sy, sfy = M.sum(0), M.T @ Fc, (M * Yz).sum(0), (M * Yz).T @ Fc
    # second moments S_t = sum_n M[n, t] f_n f_n^T. A mostly observed matrix
    # (e.g. a validation split of a complete one) uses the few rows each task
    # misses: S_t = (sum over used rows) - (sum over the rows t misses), gathered
    # per task into one batched product; otherwise one chunked matrix product.
    d = F.shape[1]
    gaps = used[:, None] & ~mask
    n_gaps = int(gaps.sum())
    if n_gaps < 0.25 * int(mask.sum()):
        Fu = Fc[used]
        task, row = torch.nonzero(gaps.T, as_tuple=True)  # sorted by task
        per_task = torch.bincount(task, minlength=mask.shape[1])
        width = int(per_task.max()) if n_gaps else 0
        starts = torch.cumsum(per_task, 0) - per_task
        pos = torch.arange(n_gaps, device=F.device) - starts[task]
        Fp = F.new_zeros(mask.shape[1], width, d)
        Fp[task, pos] = Fc[row]
        sff = (Fu.T @ Fu).expand(mask.shape[1], d, d) - Fp.transpose(1, 2) @ Fp
    else:
        sff = F.new_zeros(mask.shape[1], d, d)
        for sl in torch.arange(F.shape[0], device=F.device).split(int(chunk_size)):
            outer = (Fc[sl, :, None] * Fc[sl, None]).reshape(len(sl), d * d)
            sff += (M[sl].T @ outer).reshape(-1, d, d)
    return ridge_from_moments(_moments_from_sums(count, sf, sy, sff, sfy, shift), alpha)
