"""The bilevel sparse multi-task learner of Lachapelle et al. (ICML 2023).

:class:`BilevelSparseMTL` is :class:`~identrep.MTRN` with group-lasso task heads
(``heads="group_lasso"``) and the method's defaults: each outer step takes a batch
of whole tasks, solves every task's lasso head exactly on the batch-normalised
features (:mod:`identrep.models.multitask.heads.group_lasso`), and updates the
extractor through the implicit gradient of those solutions.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils.metaestimators import available_if

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError
from identrep.models.multitask._bilevel_multinomial import fit_multinomial
from identrep.models.multitask.mtrn import MTRN
from identrep.utils._param_validation import Interval, StrOptions
from identrep.utils.validation import check_task_ids

__all__ = ["BilevelSparseMTL"]

_SHARED = {
    k: v
    for k, v in MTRN._parameter_constraints.items()
    if k not in ("heads", "ridge_alpha", "refit_heads")
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

    Parameters
    ----------
    n_latents : int, default=10
    hidden_sizes, activation, extractor, standardize_targets, standardize_inputs
        As in :class:`~identrep.MTRN` (default activation ``"leaky_relu"``).
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
        standardize_targets: bool = True,
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

    def fit(self, X, y, *, task_ids=None):
        """Train the extractor through the tasks' lasso heads (see the class doc).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Long layout with ``task_ids``, or wide with NaN = unobserved; class
            labels (long layout) for ``loss="multinomial"``.
        task_ids : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        if self.loss == "multinomial":
            self._validate_params()
            self.__dict__.pop("classes_", None)
            return fit_multinomial(self, X, y, task_ids)
        self.__dict__.pop("classes_", None)
        super().fit(X, y, task_ids=task_ids)
        self.supports_ = np.asarray(self.head_weights_ != 0)
        return self

    # ------------------------------------------------------- classification
    def _check_classifier(self, what: str) -> None:
        self._check_fitted()
        if not hasattr(self, "classes_"):
            raise DataError(
                f"{what} needs a model fitted with loss='multinomial'; this one was "
                f"fitted with loss={self.loss!r}."
            )

    @available_if(lambda self: self.loss == "multinomial")
    def predict_proba(self, X: ArrayLike, task_ids: ArrayLike) -> np.ndarray:
        """Class probabilities of every sample under its task's head
        (``loss="multinomial"`` only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task_ids : array-like of shape (n_samples,)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), columns in the order of
        ``classes_``.
        """
        self._check_classifier("predict_proba")
        X = self._check_X(X)
        codes = check_task_ids(task_ids, X.shape[0], self.tasks_)
        F = self._features(X)
        logits = np.einsum("nd,ndk->nk", F, self.head_weights_[codes])
        logits += self.head_bias_[codes]
        logits -= logits.max(1, keepdims=True)
        P = np.exp(logits)
        return P / P.sum(1, keepdims=True)

    def predict(self, X: ArrayLike, task_ids: ArrayLike | None = None) -> np.ndarray:
        """Predicted targets (regression, as :meth:`MTRN.predict`) or, for
        ``loss="multinomial"``, the most probable class of every sample under its
        task's head (``task_ids`` required)."""
        if not hasattr(self, "classes_"):
            return super().predict(X, task_ids)
        if task_ids is None:
            raise DataError("predict of a multinomial model needs task_ids.")
        return self.classes_[self.predict_proba(X, task_ids).argmax(1)]

    def score(self, X: ArrayLike, y: ArrayLike, *, task_ids=None) -> float:
        """R^2 averaged over tasks (regression, as :meth:`MTRN.score`) or, for
        ``loss="multinomial"``, the accuracy over all samples."""
        if not hasattr(self, "classes_"):
            return super().score(X, y, task_ids=task_ids)
        if task_ids is None:
            raise DataError("score of a multinomial model needs task_ids.")
        return float(np.mean(self.predict(X, task_ids) == np.asarray(y)))
