r"""Group-lasso task heads solved exactly per batch, differentiated implicitly.

The inner problem of the bilevel sparse multi-task learner (Lachapelle et al., 2023):
for every task t of a batch, on shared features f = h(x) in R^d,

    W_t = argmin_W  L_t(W) + lam_t sum_{j in P} ||W_{j,:}||_2,             (1)

with W of shape (m, k): row j is the group of feature j across the k outputs (k = 1
for scalar regression, where the penalty is the plain L1 norm; k = K classes for
multinomial classification) and P the penalised rows (all of them, except the
intercept row of the multinomial loss). Two smooth losses are provided:

* quadratic (regression, :class:`QuadraticLoss` in ``_losses.py``): on task-centred
  moments G_t = (1/n_t) F_c^T F_c (d, d), C_t = (1/n_t) F_c^T Y_c (d, k),
  L_t(W) = 0.5 tr(W^T G_t W) - tr(W^T C_t), which is (1/(2 n_t)) ||Y_c - F_c W||^2
  up to a constant; the intercept b_t = y_bar - W^T f_bar is then exact.
* multinomial (classification, :class:`MultinomialLoss`): on F_t (n, d + 1) whose
  last column is ones and one-hot Y_t (n, K), L_t(W) = -(1/n_t) sum_i omega_i
  log softmax(W^T f_i)[y_i]; the last row of W is the unpenalised intercept.

``lam_t = l1_reg * lambda_max_t``, where lambda_max_t (computed without gradient) is
the smallest penalty with W_t = 0: max_j ||C_{t,j}||_2 for regression
(= ||F^T y||_inf / n for a scalar target) and max_j ||F_j^T (Y - P0)||_2 / n for the
multinomial loss, P0 the task's class frequencies (the optimal intercept-only
model). ``l1_reg`` in (0, 1) is then a scale-free fraction.

Solver: FISTA (proximal gradient with Nesterov momentum and gradient-based adaptive
restart) batched over the tasks of a batch as tensors (T, m, k), with step 1/L_t
(L_t the Lipschitz constant of grad L_t), warm started from ``W0`` and stopped when
every task's prox-gradient step moves W by at most ``tol`` times its largest entry.

Gradients (Bertrand et al., 2022). At a solution with group support S (rows with
||W_j|| > 0, plus unpenalised rows), W_{S^c} = 0 is locally constant and the
optimality condition on S is grad_S L(W, theta) + lam W_j / ||W_j|| = 0. Its
derivative gives the support-restricted system

    H_SS u = v_S,   H = hess L + lam blockdiag_j (I - u_j u_j^T) / ||W_j||,      (2)

u_j = W_j / ||W_j|| (the curvature term vanishes for k = 1), and the vector-Jacobian
product of the cotangent v is  -d/dtheta <grad_W L(W, theta), u>  with W held fixed.
This is the implicit differentiation of the proximal fixed point
W = prox(W - gamma grad L(W)) restricted to the support: the two systems share the
same solution. (2) is symmetric positive definite on S, so it is solved by
conjugate gradient on the support only (:func:`support_solve`, ``method="cg"``);
without the restriction the system is singular off the support. ``method="dense"``
forms the full (m k) x (m k) matrix with the identity off the support and solves it
directly (same answer; the cost reference of the benchmark). ``diff="unrolled"``
backpropagates through the FISTA iterations instead (a check: it converges to the
implicit gradient as the iterations converge).

References
----------
S. Lachapelle, T. Deleu, D. Mahajan, I. Mitliagkas, Y. Bengio, S. Lacoste-Julien,
Q. Bertrand (2023). Synergies between disentanglement and sparsity: generalization
and identifiability in multi-task learning. ICML.
Q. Bertrand, Q. Klopfenstein, M. Massias, M. Blondel, S. Vaiter, A. Gramfort,
J. Salmon (2022). Implicit differentiation for fast hyperparameter selection in
non-smooth convex learning. JMLR.
A. Beck, M. Teboulle (2009). FISTA. SIAM J. Imaging Sci. B. O'Donoghue, E. Candes
(2015). Adaptive restart for accelerated gradient schemes. Found. Comput. Math.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from identrep.models.multitask.heads._losses import MultinomialLoss, QuadraticLoss
from identrep.models.multitask.heads.ridge import TaskMoments, task_moments

__all__ = [
    "GroupLassoHeads",
    "MultinomialLoss",
    "QuadraticLoss",
    "SolverInfo",
    "block_soft_threshold",
    "fit_group_lasso_heads",
    "group_lasso_heads",
    "group_lasso_multinomial",
    "group_lasso_quadratic",
    "lambda_max_multinomial",
    "lambda_max_quadratic",
    "support_mask",
    "support_solve",
]


# ------------------------------------------------------------------- penalty
def block_soft_threshold(Z: Tensor, thresh: Tensor, penalized: Tensor | None = None):
    """Proximal operator of ``thresh * sum_{j in P} ||Z_j||_2`` (row-wise).

    ``prox(Z)_j = max(0, 1 - thresh / ||Z_j||) Z_j`` for penalised rows j, ``Z_j``
    otherwise; for k = 1 this is soft-thresholding.

    Parameters
    ----------
    Z : Tensor of shape (T, m, k)
    thresh : Tensor of shape (T,), non-negative
    penalized : BoolTensor of shape (m,), optional
        Penalised rows (default all).

    Returns
    -------
    Tensor of shape (T, m, k)
    """
    norms = Z.norm(dim=-1, keepdim=True)
    scale = 1 - thresh[:, None, None] / norms.clamp_min(torch.finfo(Z.dtype).tiny)
    scale = scale.clamp_min(0)
    if penalized is not None:
        scale = torch.where(penalized[None, :, None], scale, torch.ones_like(scale))
    return Z * scale


def support_mask(W: Tensor, penalized: Tensor | None = None) -> Tensor:
    """Entries of the group support: rows with a nonzero norm, and unpenalised rows.

    Parameters
    ----------
    W : Tensor of shape (T, m, k)
    penalized : BoolTensor of shape (m,), optional

    Returns
    -------
    BoolTensor of shape (T, m, k)
    """
    rows = W.norm(dim=-1) > 0
    if penalized is not None:
        rows = rows | ~penalized[None]
    return rows[..., None].expand_as(W)


@torch.no_grad()
def lambda_max_quadratic(C: Tensor) -> Tensor:
    """Smallest penalty with solution 0 for the quadratic loss: max_j ||C_j||_2.

    Parameters
    ----------
    C : Tensor of shape (T, d, k)
        (1/n) F_c^T Y_c per task.

    Returns
    -------
    Tensor of shape (T,)
    """
    return C.norm(dim=-1).amax(-1)


@torch.no_grad()
def lambda_max_multinomial(F: Tensor, Y: Tensor, omega: Tensor) -> Tensor:
    """Smallest penalty with solution 0 (intercept free) for the multinomial loss:
    max over penalised rows j of ||F_j^T diag(omega) (Y - P0)||_2 / n_t, with P0
    the task's weighted class frequencies.

    Parameters
    ----------
    F : Tensor of shape (T, n, d + 1)
        Last column ones (the intercept, unpenalised).
    Y : Tensor of shape (T, n, K), one-hot
    omega : Tensor of shape (T, n)

    Returns
    -------
    Tensor of shape (T,)
    """
    n = omega.sum(-1).clamp_min(1)
    P0 = (Y * omega[..., None]).sum(1) / n[:, None]
    R = (Y - P0[:, None, :]) * omega[..., None]
    G = F[..., :-1].transpose(1, 2) @ R / n[:, None, None]
    return G.norm(dim=-1).amax(-1)


# ------------------------------------------------------------------ solvers
class SolverInfo(NamedTuple):
    """``n_iter`` FISTA iterations run, ``converged`` whether every task met tol."""

    n_iter: int
    converged: bool


def _fista(loss, inputs, lam, W0, penalized, tol, max_iter, check_every=10):
    """Batched FISTA with adaptive restart; differentiable if the inputs are.

    The forward-backward step is ``prox(A V + c)`` with ``A V + c = V - step
    grad(V)``: for the quadratic loss A = I - step G and c = step C are formed once
    (one batched ``baddbmm`` per iteration), else A V + c is evaluated through
    ``loss.grad``. Momentum (k - 1) / (k + 2) per task, reset to 0 where
    <V - W_new, W_new - W> > 0 (O'Donoghue and Candes' gradient restart).
    """
    tiny = torch.finfo(W0.dtype).tiny
    step = 1.0 / loss.lipschitz(*inputs).clamp_min(torch.finfo(W0.dtype).eps)
    step = step[:, None, None]
    thr = lam[:, None, None] * step
    if loss is QuadraticLoss:
        G, C = inputs
        A = torch.eye(G.shape[-1], dtype=G.dtype, device=G.device) - step * G
        c = step * C

        def forward_step(V):
            return torch.baddbmm(c, A, V)

    else:

        def forward_step(V):
            return V - step * loss.grad(V, *inputs)

    if penalized is None and W0.shape[-1] == 1:

        def prox(Z):  # soft-thresholding
            return Z - torch.minimum(torch.maximum(Z, -thr), thr)

    else:

        def prox(Z):
            return block_soft_threshold(Z, thr[:, 0, 0], penalized)

    W, V = W0, W0
    k = torch.ones_like(thr)
    converged = False
    it = 0
    for it in range(1, int(max_iter) + 1):
        W_new = prox(forward_step(V))
        dW = W_new - W
        if it % check_every == 0 or it == max_iter:
            with torch.no_grad():
                move = (W_new - V).abs().amax((-2, -1))
                scale = W_new.abs().amax((-2, -1)).clamp_min(tiny)
                if bool((move <= tol * scale).all()):
                    W = W_new
                    converged = True
                    break
        restart = ((V - W_new) * dW).sum((-2, -1), keepdim=True) > 0
        k = torch.where(restart, 1.0, k + 1)
        V = W_new + ((k - 1) / (k + 2)) * dW
        W = W_new
    return W, SolverInfo(it, converged)


def support_solve(loss, W, lam, penalized, inputs, V, *, method="cg", tol=1e-10):
    """Solve the support-restricted system (2) H_SS U = V_S; U = 0 off the support.

    Parameters
    ----------
    loss : QuadraticLoss or MultinomialLoss
    W : Tensor of shape (T, m, k)
        The inner solution.
    lam : Tensor of shape (T,)
    penalized : BoolTensor of shape (m,) or None
    inputs : tuple of Tensor
        The loss's inputs (detached).
    V : Tensor of shape (T, m, k)
        Right-hand side (the cotangent of W).
    method : {"cg", "dense"}
        Conjugate gradient on the support (at most 2 |S| iterations), or a direct
        solve of the full (m k)-square system with the identity off the support.
    tol : float
        CG stops when every task's residual norm is below tol times its
        right-hand side's norm.

    Returns
    -------
    Tensor of shape (T, m, k)
    """
    mask = support_mask(W, penalized).to(W.dtype)
    tiny = torch.finfo(W.dtype).tiny
    norms = W.norm(dim=-1, keepdim=True)
    Unit = W / norms.clamp_min(tiny)
    curv_scale = torch.where(norms > 0, lam[:, None, None] / norms.clamp_min(tiny), 0)
    if penalized is not None:
        curv_scale = curv_scale * penalized[None, :, None].to(W.dtype)

    def matvec(U):
        curv = curv_scale * (U - Unit * (Unit * U).sum(-1, keepdim=True))
        return (loss.hvp(W, U, *inputs) + curv + loss.gauge(U, penalized)) * mask

    b = V * mask
    if method == "dense":
        T, m, k = W.shape
        eye = torch.eye(m * k, dtype=W.dtype, device=W.device)
        basis = eye.reshape(m * k, m, k)
        cols = torch.stack([matvec(basis[i].expand(T, m, k)) for i in range(m * k)], -1)
        A = cols.reshape(T, m * k, m * k)
        off = (1 - mask).reshape(T, m * k)
        A = A * (1 - off)[:, :, None] * (1 - off)[:, None, :] + torch.diag_embed(off)
        return torch.linalg.solve(A, b.reshape(T, m * k, 1)).reshape(T, m, k)
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rs = (r * r).sum((-2, -1))
    stop = (tol * tol) * rs
    n_max = 2 * int(mask.sum((-2, -1)).max().item()) + 1
    for _ in range(n_max):
        if bool((rs <= stop).all()):
            break
        Ap = matvec(p)
        pAp = (p * Ap).sum((-2, -1))
        alpha = torch.where(pAp > 0, rs / pAp.clamp_min(tiny), 0)
        x = x + alpha[:, None, None] * p
        r = r - alpha[:, None, None] * Ap
        rs_new = (r * r).sum((-2, -1))
        p = r + (rs_new / rs.clamp_min(tiny))[:, None, None] * p
        rs = rs_new
    return x


class _ImplicitGroupLasso(torch.autograd.Function):
    """W = argmin (1), with the support-restricted implicit VJP (2)."""

    @staticmethod
    def forward(ctx, loss, lam, W0, penalized, opts, info, *inputs):
        with torch.no_grad():
            W, solver_info = _fista(
                loss, inputs, lam, W0, penalized, opts["tol"], opts["max_iter"]
            )
        info.append(solver_info)
        ctx.loss, ctx.penalized, ctx.opts = loss, penalized, opts
        ctx.save_for_backward(W, lam, *inputs)
        return W

    @staticmethod
    def backward(ctx, V):
        W, lam, *inputs = ctx.saved_tensors
        loss = ctx.loss
        U = support_solve(
            loss,
            W,
            lam,
            ctx.penalized,
            [x.detach() for x in inputs],
            V,
            method=ctx.opts["solve"],
            tol=ctx.opts["cg_tol"],
        )
        needs = ctx.needs_input_grad[6:]
        grads: list[Tensor | None] = [None] * len(inputs)
        if any(needs):
            # VJP = -d/dinputs <grad_W L(W, inputs), U> with W held fixed
            with torch.enable_grad():
                xs = [
                    x.detach().requires_grad_(n)
                    for x, n in zip(inputs, needs, strict=True)
                ]
                inner = (loss.grad(W, *xs) * U).sum()
                wanted = [i for i, n in enumerate(needs) if n]
                got = torch.autograd.grad(
                    inner, [xs[i] for i in wanted], allow_unused=True
                )
            for i, g in zip(wanted, got, strict=True):
                grads[i] = None if g is None else -g
        return (None, None, None, None, None, None, *grads)


def _solve(loss, inputs, lam, W0, penalized, *, diff, tol, max_iter, solve, cg_tol):
    if diff not in ("implicit", "unrolled"):
        raise ValueError(f"diff must be 'implicit' or 'unrolled'; got {diff!r}.")
    if solve not in ("cg", "dense"):
        raise ValueError(f"solve must be 'cg' or 'dense'; got {solve!r}.")
    lam = lam.detach()
    W0 = W0.detach()
    if diff == "unrolled":
        return _fista(loss, inputs, lam, W0, penalized, tol, max_iter)
    info: list[SolverInfo] = []
    opts = dict(tol=tol, max_iter=max_iter, solve=solve, cg_tol=cg_tol)
    W = _ImplicitGroupLasso.apply(loss, lam, W0, penalized, opts, info, *inputs)
    return W, info[0]


def group_lasso_quadratic(
    G: Tensor,
    C: Tensor,
    lam: Tensor,
    W0: Tensor | None = None,
    *,
    diff: str = "implicit",
    tol: float = 1e-6,
    max_iter: int = 1000,
    solve: str = "cg",
    cg_tol: float = 1e-10,
) -> tuple[Tensor, SolverInfo]:
    """Group-lasso regression heads from task moments, differentiable in G and C.

    Solves ``min_W 0.5 tr(W^T G W) - tr(W^T C) + lam sum_j ||W_j||_2`` per task.

    Parameters
    ----------
    G : Tensor of shape (T, d, d)
        (1/n_t) F_c^T F_c (task-centred features).
    C : Tensor of shape (T, d, k)
        (1/n_t) F_c^T Y_c.
    lam : Tensor of shape (T,)
        Penalties (treated as constants: no gradient flows to them).
    W0 : Tensor of shape (T, d, k), optional
        Warm start (default zeros).
    diff : {"implicit", "unrolled"}, default="implicit"
        Implicit differentiation on the support, or backpropagation through the
        iterations.
    tol : float, default=1e-6
        Stop when every task's prox-gradient step moves W by at most ``tol`` times
        its largest entry (checked every 10 iterations).
    max_iter : int, default=1000
    solve : {"cg", "dense"}, default="cg"
        How the implicit system is solved (see :func:`support_solve`).
    cg_tol : float, default=1e-10
        Relative residual of the CG solve.

    Returns
    -------
    W : Tensor of shape (T, d, k)
    info : SolverInfo

    Examples
    --------
    >>> import torch
    >>> G = torch.eye(2, dtype=torch.float64)[None]
    >>> C = torch.tensor([[[2.0], [0.5]]], dtype=torch.float64)
    >>> W, info = group_lasso_quadratic(G, C, torch.tensor([1.0], dtype=G.dtype))
    >>> W.flatten().tolist(), info.converged
    ([1.0, 0.0], True)
    """
    W0 = C.new_zeros(C.shape) if W0 is None else W0.to(C.dtype)
    return _solve(
        QuadraticLoss,
        (G, C),
        lam,
        W0,
        None,
        diff=diff,
        tol=tol,
        max_iter=max_iter,
        solve=solve,
        cg_tol=cg_tol,
    )


def group_lasso_multinomial(
    F: Tensor,
    Y: Tensor,
    omega: Tensor,
    lam: Tensor,
    W0: Tensor | None = None,
    *,
    diff: str = "implicit",
    tol: float = 1e-6,
    max_iter: int = 1000,
    solve: str = "cg",
    cg_tol: float = 1e-10,
) -> tuple[Tensor, SolverInfo]:
    """Group-lasso multinomial logistic heads, differentiable in F (and Y).

    Solves (1) with the multinomial loss; the last column of ``F`` must be ones
    (its row of W is the unpenalised intercept); groups are the rows of W, each
    feature's weights across the K classes.

    Parameters
    ----------
    F : Tensor of shape (T, n, d + 1)
    Y : Tensor of shape (T, n, K), one-hot (padding rows arbitrary)
    omega : Tensor of shape (T, n)
        1 for a task's observations, 0 for padding.
    lam : Tensor of shape (T,)
    W0 : Tensor of shape (T, d + 1, K), optional
    diff, tol, max_iter, solve, cg_tol
        As in :func:`group_lasso_quadratic`.

    Returns
    -------
    W : Tensor of shape (T, d + 1, K)
        Rows 0..d-1 the feature weights, row d the intercepts.
    info : SolverInfo
    """
    m, K = F.shape[-1], Y.shape[-1]
    penalized = torch.ones(m, dtype=torch.bool, device=F.device)
    penalized[-1] = False
    W0 = F.new_zeros(F.shape[0], m, K) if W0 is None else W0.to(F.dtype)
    return _solve(
        MultinomialLoss,
        (F, Y, omega.to(F.dtype)),
        lam,
        W0,
        penalized,
        diff=diff,
        tol=tol,
        max_iter=max_iter,
        solve=solve,
        cg_tol=cg_tol,
    )


# --------------------------------------------------------- regression heads
def group_lasso_heads(
    moments: TaskMoments,
    l1_reg: float,
    W0: Tensor | None = None,
    **solver,
) -> tuple[Tensor, Tensor, SolverInfo]:
    """Scalar-regression lasso heads with unpenalised intercepts from task moments.

    Per task t present (``count > 0``): ``w_t`` solves the lasso on task-centred
    data, ``min_w (1/(2 n_t)) ||y_c - F_c w||^2 + lam_t ||w||_1`` with
    ``lam_t = l1_reg * ||F_c^T y_c||_inf / n_t`` (no gradient through lam_t), and
    ``b_t = y_bar_t - f_bar_t^T w_t``. Differentiable in the moments (hence in F
    and y) through :func:`group_lasso_quadratic`.

    Parameters
    ----------
    moments : TaskMoments
        From :func:`~identrep.models.multitask.heads.task_moments` (long data) or
        :func:`~identrep.models.multitask.heads.task_moments_masked` (wide data).
    l1_reg : float in (0, 1)
        Penalty as a fraction of lambda_max.
    W0 : Tensor of shape (n_tasks, d), optional
        Warm start.
    **solver
        ``diff``, ``tol``, ``max_iter``, ``solve``, ``cg_tol`` of
        :func:`group_lasso_quadratic`.

    Returns
    -------
    W : Tensor of shape (n_tasks, d)
        Zero for absent tasks.
    b : Tensor of shape (n_tasks,)
    info : SolverInfo
    """
    count, mf, my, cff, cfy = moments
    T, d = mf.shape
    present = torch.nonzero(count > 0).squeeze(1)
    C = cfy[present].unsqueeze(-1)
    lam = float(l1_reg) * lambda_max_quadratic(C)
    W0p = None if W0 is None else W0[present].unsqueeze(-1)
    Wp, info = group_lasso_quadratic(cff[present], C, lam, W0p, **solver)
    W = Wp.squeeze(-1)
    if present.numel() != T:
        W = mf.new_zeros(T, d).index_put((present,), W)
    return W, my - (mf * W).sum(-1), info


@torch.no_grad()
def fit_group_lasso_heads(
    F: Tensor,
    y: Tensor,
    task_ids: Tensor,
    n_tasks: int,
    l1_reg: float,
    *,
    tol: float = 1e-8,
    max_iter: int = 20000,
) -> tuple[Tensor, Tensor, SolverInfo]:
    """Final lasso heads on a full training set, in float64.

    :func:`group_lasso_heads` on the moments of all observations of every task.

    Parameters
    ----------
    F : Tensor of shape (n_obs, d)
    y : Tensor of shape (n_obs,)
    task_ids : LongTensor of shape (n_obs,)
    n_tasks : int
    l1_reg : float
    tol, max_iter
        Solver tolerance and iteration budget.

    Returns
    -------
    W : Tensor of shape (n_tasks, d), float64
    b : Tensor of shape (n_tasks,), float64
    info : SolverInfo
    """
    m = task_moments(F.double(), y.double(), task_ids, int(n_tasks))
    return group_lasso_heads(m, l1_reg, tol=tol, max_iter=max_iter)


class GroupLassoHeads(nn.Module):
    """Solver state of lasso task heads: no parameters, the last solution per task.

    ``weight`` (n_tasks, d) is a buffer holding each task's latest inner solution,
    the warm start of its next solve (tasks return every epoch). ``tol``,
    ``max_iter`` and ``diff`` are the inner solver's settings
    (:func:`group_lasso_heads`).
    """

    def __init__(self, n_features, n_tasks, *, tol=1e-5, max_iter=500, diff="implicit"):
        super().__init__()
        self.register_buffer("weight", torch.zeros(int(n_tasks), int(n_features)))
        self.n_tasks = int(n_tasks)
        self.solver = dict(tol=float(tol), max_iter=int(max_iter), diff=diff)

    def solve(self, moments: TaskMoments, tasks: Tensor | None, l1_reg: float):
        """Heads of the tasks ``tasks`` (all when None) from their ``moments``,
        warm started from and stored into ``weight``."""
        W0 = self.weight if tasks is None else self.weight[tasks]
        W, b, _ = group_lasso_heads(
            moments, l1_reg, W0.to(moments.mean_f), **self.solver
        )
        with torch.no_grad():
            keep = moments.count > 0
            idx = torch.nonzero(keep).squeeze(1) if tasks is None else tasks[keep]
            self.weight[idx] = W.detach()[keep].to(self.weight.dtype)
        return W, b
