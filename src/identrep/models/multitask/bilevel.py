"""The bilevel sparse multi-task learner of Lachapelle et al. (ICML 2023).

:class:`BilevelSparseMTL` is :class:`~identrep.MTRN` with group-lasso task heads
(``heads="group_lasso"``) and the method's defaults: each outer step takes a batch
of whole tasks, solves every task's lasso head exactly on the batch-normalised
features (:mod:`identrep.models.multitask.heads.group_lasso`), and updates the
extractor through the implicit gradient of those solutions.
"""

from __future__ import annotations

from functools import partial
from numbers import Integral, Real

import numpy as np

from identrep._typing import Seed
from identrep.exceptions import InvalidParameterError
from identrep.models.multitask._bilevel_fresh import (
    FreshBatch,
    FreshTaskBatches,
    check_task_sampler,
    fresh_task_loss,
)
from identrep.models.multitask._mtrn_stream import HostRows
from identrep.models.multitask.mtrn import MTRN
from identrep.utils._param_validation import Interval, StrOptions
from identrep.utils.seeding import check_random_state

__all__ = ["BilevelSparseMTL"]

_SHARED = {
    k: v
    for k, v in MTRN._parameter_constraints.items()
    if k not in ("heads", "ridge_alpha", "refit_heads", "max_time", "checkpoint")
}


class BilevelSparseMTL(MTRN):
    """Bilevel sparse multi-task learning: lasso task heads, implicit gradients.

    Outer problem: minimise over the extractor h the mean over tasks of
    ``0.5 * mean squared error`` of the task heads' predictions. Inner problem,
    per task t of a batch: ``W_t = argmin_w (1/(2 n_t)) ||y_c - F_c w||^2 + lam_t
    ||w||_1`` on the task-centred features F = BN(h(x)) (batch norm without
    affine, so the penalty cannot be escaped by scaling the features), with
    ``lam_t = l1_reg * ||F_c^T y_c||_inf / n_t``. Heads are solved by batched FISTA
    warm started from the task's previous solution, and differentiated implicitly
    on their support. When tasks use varying sparse subsets of the latents, a
    solution with maximally sparse heads identifies the latents up to permutation
    and scaling, even when they are correlated (Lachapelle et al., 2023).

    The authors draw new tasks at every outer step; pass a task sampler to
    ``fit`` (``task_sampler=SparseTaskSampler.from_data(data)``, see
    :class:`identrep.datasets.SparseTaskSampler`) to do the same: every step then
    takes ``batch_size // n_samples`` fresh tasks on rows of ``X`` and solves
    their heads cold. Saved and loaded with
    :func:`identrep.persistence.save_model` and :func:`~identrep.persistence.load_model`
    (a callable ``extractor`` cannot be saved).

    Parameters
    ----------
    n_latents : int, default=10
    hidden_sizes, activation, extractor, standardize_inputs
        As in :class:`~identrep.MTRN` (default activation ``"leaky_relu"``).
    standardize_targets : bool or "pooled", default="pooled"
        ``"pooled"``: targets centred within each task and divided by one scale
        for all tasks (their pooled std, in float64: the fit does not depend on
        the targets' units), so tasks keep their relative weights, as in the
        authors' code (raw targets). True (MTRN's default) scales every task to
        unit variance: at rho = 0.9 that gives most weight to the tasks whose
        weights contrast latents (var(y_t) = w_t^T Sigma w_t is small for them)
        and moves the minimum of the lasso objective away from the true latents
        (support probability 0.5: MCC 0.80 with it, 0.99 without; docs/notes.md,
        "Bilevel sparse MTL: per-task target scaling"). False: raw targets.
    loss : {"squared", "multinomial"}, default="squared"
        Regression heads (``0.5 * mean squared error``, plain lasso) or
        classification heads: per task, multinomial logistic regression with an
        unpenalised intercept and the group-lasso penalty on each feature's
        weights across the classes; ``y`` are then class labels (long layout
        with ``task_ids``), the outer loss is the cross-entropy and
        ``head_weights_`` has shape (n_tasks, n_latents, n_classes).
    l1_reg : float in (0, 1), default=0.3
        Inner penalty as a fraction of lambda_max (the authors' reproduction: 0.3).
    inner_tol : float, default=1e-5
        Inner solver tolerance (relative change of a prox-gradient step).
    inner_max_iter : int, default=500
        Inner solver iterations per outer step at most.
    inner_diff : {"implicit", "unrolled"}, default="implicit"
        Implicit differentiation on the support, or backpropagation through the
        inner iterations (a check; slower and memory-hungry).
    lr : float, default=1e-3
    lr_schedule : {"cosine", None}, default=None
    batch_size : int, default=400
        Observations per outer step, packed from whole tasks (400 = 8 tasks of 50
        samples, the authors' default).
    max_epochs : int, default=100
    patience : int or None, default=None
    val_fraction : float, default=0.0
        Fraction of every task's samples held out (their heads are solved on the
        rest) for early stopping; the authors fit and score the same points.
    grad_clip, weight_decay, device, dtype, random_state, verbose
        As in :class:`~identrep.MTRN`.

    Attributes
    ----------
    head_weights_ : ndarray of shape (n_tasks, n_latents)
        Per-task lasso weights on all of each task's data (original target
        scale); (n_tasks, n_latents, n_classes) for ``loss="multinomial"``.
    head_bias_ : ndarray of shape (n_tasks,) or (n_tasks, n_classes)
    supports_ : ndarray of shape (n_tasks, n_latents), bool
        Features a task's head uses (nonzero weight, or nonzero weight row).
    classes_ : ndarray of shape (n_classes,)
        The class labels (``loss="multinomial"`` only).
    module_, history_, tasks_, n_tasks_, n_latents_, n_features_in_,
    feature_names_in_, fit_seconds_
        As in :class:`~identrep.MTRN`.

    References
    ----------
    S. Lachapelle, T. Deleu, D. Mahajan, I. Mitliagkas, Y. Bengio, S. Lacoste-Julien,
    Q. Bertrand (2023). Synergies between disentanglement and sparsity:
    generalization and identifiability in multi-task learning. ICML.

    Examples
    --------
    >>> import identrep as ir
    >>> data = ir.datasets.make_sparse_tasks(n_tasks=40, n_samples=50, n_latents=3,
    ...     random_state=0)
    >>> m = ir.BilevelSparseMTL(n_latents=3, max_epochs=2, random_state=0).fit(
    ...     data.X, data.y, task_ids=data.task_ids)
    >>> m.transform(data.X).shape, m.supports_.shape
    ((2000, 3), (40, 3))
    """

    heads = "group_lasso"
    ridge_alpha = 1e-3  # not used by lasso heads
    refit_heads = False

    _parameter_constraints: dict = {
        **_SHARED,
        "inner_tol": [Interval(Real, 0, None, closed="neither")],
        "inner_max_iter": [Interval(Integral, 1, None, closed="left")],
        "inner_diff": [StrOptions({"implicit", "unrolled"})],
        "loss": [StrOptions({"squared", "multinomial"})],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        hidden_sizes: tuple[int, ...] | None = None,
        activation: str = "leaky_relu",
        extractor=None,
        loss: str = "squared",
        l1_reg: float = 0.3,
        inner_tol: float = 1e-5,
        inner_max_iter: int = 500,
        inner_diff: str = "implicit",
        standardize_targets: bool | str = "pooled",
        standardize_inputs: bool | None = None,
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 400,
        max_epochs: int = 100,
        patience: int | None = None,
        val_fraction: float = 0.0,
        grad_clip: float | None = None,
        weight_decay: float = 0.0,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.extractor = extractor
        self.loss = loss
        self.l1_reg = l1_reg
        self.inner_tol = inner_tol
        self.inner_max_iter = inner_max_iter
        self.inner_diff = inner_diff
        self.standardize_targets = standardize_targets
        self.standardize_inputs = standardize_inputs
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.val_fraction = val_fraction
        self.grad_clip = grad_clip
        self.weight_decay = weight_decay
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _inner_solver(self) -> dict:
        return dict(
            tol=float(self.inner_tol),
            max_iter=int(self.inner_max_iter),
            diff=self.inner_diff,
        )

    def fit(self, X, y, *, task_ids=None, task_sampler=None):
        """Train the extractor through the tasks' lasso heads (see the class doc).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Long layout with ``task_ids``, or wide with NaN = unobserved; class
            labels (long layout) for ``loss="multinomial"``.
        task_ids : array-like of shape (n_samples,), optional
        task_sampler : object, optional
            Fresh tasks at every outer step (the authors' training), e.g.
            :class:`identrep.datasets.SparseTaskSampler` built on the latents of
            the rows of ``X``: each step draws ``batch_size // n_samples`` new
            tasks on rows of ``X`` and solves their heads cold; an epoch is as
            many steps as a pass over ``(X, y, task_ids)`` takes. ``(X, y,
            task_ids)`` then give the validation split and the final heads
            (``head_weights_``). Regression (``loss="squared"``) only.

        Returns
        -------
        self
        """
        if self.loss == "multinomial":
            if task_sampler is not None:
                raise InvalidParameterError(
                    "task_sampler draws regression tasks; it needs loss='squared', "
                    "got loss='multinomial'."
                )
            return super().fit(X, y, task_ids=task_ids)
        self._fresh = None
        if task_sampler is not None:
            Xa = X.to_numpy() if hasattr(X, "to_numpy") else np.asarray(X)
            n_rows = Xa.shape[0] if Xa.ndim == 2 else -1
            bs = int(self.batch_size) if isinstance(self.batch_size, Integral) else 0
            tasks = check_task_sampler(task_sampler, n_rows, bs)
            # the draws' seed; an int random_state leaves the init unchanged
            seed = int(check_random_state(self.random_state).integers(2**31 - 1))
            self._fresh = (task_sampler, Xa, tasks, seed)
        try:
            super().fit(X, y, task_ids=task_ids)
        finally:
            self._fresh = None
        self.supports_ = np.asarray(self.head_weights_ != 0)
        return self

    def _fit_module(self, module, loss_fn, train_batches, val_batches=None, **kw):
        """With a task sampler, train on fresh tasks (as many steps per epoch as
        ``train_batches`` has); ``val_batches`` keep the fixed tasks' loss."""
        if getattr(self, "_fresh", None) is None:
            return super()._fit_module(
                module, loss_fn, train_batches, val_batches, **kw
            )
        sampler, Xa, n_tasks, seed = self._fresh
        fresh = FreshTaskBatches(
            sampler,
            HostRows(Xa, self._x_dtype(), self.device_),
            n_tasks=n_tasks,
            n_steps=len(train_batches),
            seed=seed,
            standardize=self.standardize_targets,
            dtype=self.dtype_,
            device=self.device_,
        )
        fresh_loss = partial(fresh_task_loss, l1_reg=float(self.l1_reg))

        def loss(net, batch):
            if isinstance(batch, FreshBatch):
                return fresh_loss(net, batch)
            return loss_fn(net, batch)

        return super()._fit_module(module, loss, fresh, val_batches, **kw)
