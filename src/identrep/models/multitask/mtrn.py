"""MTRN: the multi-task regression network (stage 1 of Chen et al., 2024).

The estimator owns validation, seeds, device and the network's construction
(:meth:`MTRN._build_module`, used by ``fit`` and by
:func:`identrep.persistence.load_model`); its loss is the pure
:func:`~identrep.models.multitask._mtrn_loss.mtrn_loss` and its batches come from
:mod:`identrep.models.multitask._mtrn_batches`.
"""

from __future__ import annotations

import time
from functools import partial
from numbers import Integral, Real

import numpy as np
import torch
from torch import nn

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models._base import (
    IdentrepEstimator,
    TaskTargetsMixin,
    TorchEstimatorMixin,
)
from identrep.models.multitask._bilevel_multinomial import (
    MultinomialHeadsMixin,
    fit_multinomial,
    multinomial_heads,
)
from identrep.models.multitask._mtrn_batches import (
    batch_mode,
    final_heads,
    head_refit_step,
    observation_batches,
    row_batches,
)
from identrep.models.multitask._mtrn_extractor import EXTRACTORS, build_extractor
from identrep.models.multitask._mtrn_loss import ObsBatch, RowBatch, mtrn_loss
from identrep.models.multitask._mtrn_stream import HostRows, streaming_column_moments
from identrep.models.multitask.heads import GroupLassoHeads, JointHeads
from identrep.models.nn.mlp import ACTIVATIONS, MLP, MultiTaskNet, Standardize
from identrep.training.loop import TRAINING_CONSTRAINTS
from identrep.utils._param_validation import Interval, SequenceOf, StrOptions
from identrep.utils.numerics import task_moments
from identrep.utils.seeding import seeded
from identrep.utils.validation import check_multitask, check_n_latents, check_task_ids

__all__ = ["MTRN", "ObsBatch", "RowBatch", "mtrn_loss"]


class MTRN(
    MultinomialHeadsMixin, TaskTargetsMixin, TorchEstimatorMixin, IdentrepEstimator
):
    """Multi-task regression network: shared features h(x), linear heads per task.

    Predicts task t's target as ``y_hat = w_t^T h(x) + b_t`` with a shared feature
    extractor h: R^p -> R^d (an MLP, or any ``nn.Module`` via ``extractor``, e.g.
    an E(n)-equivariant GNN for molecules) and fits by maximum likelihood under unit
    Gaussian noise, i.e. the loss ``0.5 * mean squared error`` over all observed
    (sample, task) pairs. When at least d tasks have linearly independent weights,
    h is identified up to an invertible linear map (Chen et al., 2024, Corollary
    3.3): compare it to ground truth with :func:`identrep.metrics.weak_mcc`, or pass
    it to :class:`~identrep.MTLCM` (see
    :class:`~identrep.TaskIdentifiable`) to resolve the linear map.

    Heads (:mod:`identrep.models.multitask.heads`):

    * ``"joint"`` (the paper): free per-task weights and biases learned jointly with
      h. Minibatches are random samples of observations (long layout) or of rows
      (wide layout, all tasks predicted at once, unobserved entries masked). With
      ``refit_heads=True`` the heads are also replaced after every epoch by their
      exact ridge solution on all training observations given the current
      features (a block-coordinate step). Without it, gradient descent stalls at
      saddles where one feature direction is unused by every head: on a 5-latent
      problem (100 tasks x 100 samples) 6 of 10 seeds ended at weak MCC 0.81-0.89
      (still after 400 epochs); with the refit all 10 reached >= 0.995.
    * ``"ridge"``: per-task ridge regression solved in closed form on each minibatch
      of whole tasks and differentiated through (MetaOptNet; the inner ridge of
      Lachapelle et al., 2023), then solved once on all the data. On the paper's
      Table 2 process (seed 0) ridge heads stopped at weak MCC 0.917 against
      0.968 for the joint heads, whatever ``ridge_alpha`` (1e-7 to 1e-1).
    * ``"group_lasso"``: per-task lasso heads (penalty ``l1_reg`` times lambda_max)
      solved on each batch of whole tasks and differentiated implicitly on their
      support, with the features batch-normalised (no affine) so the penalty
      cannot be escaped by scaling: the bilevel sparse learner of Lachapelle et
      al. (2023); see :class:`~identrep.BilevelSparseMTL` for its defaults.

    Training uses :func:`identrep.training.fit_module` (Adam) with a validation
    split of ``val_fraction`` of each task's samples, early stopping on the
    validation loss after ``patience`` epochs without improvement, and restoration
    of the best epoch's parameters.

    Parameters
    ----------
    n_latents : int, default=10
        Feature (representation) dimension d.
    hidden_sizes : sequence of int, optional
        Hidden-layer widths of the extractor; default one hidden layer of width
        ``2 * n_features`` (the paper's Table 5).
    activation : str, default="relu"
        Hidden activation (see :class:`~identrep.models.nn.mlp.MLP`).
    extractor : None, "egnn" or callable, default=None
        The feature extractor h. None: an MLP (``hidden_sizes``, ``activation``).
        A callable ``extractor(n_features, n_latents)`` returning an
        ``nn.Module`` that maps (batch, n_features) to (batch, n_latents); it is
        built inside the seeded initialisation, and ``hidden_sizes`` and
        ``activation`` do not apply. ``"egnn"``: an
        :class:`~identrep.models.nn.egnn.EGNNExtractor` with its defaults for ``X`` in
        the flat molecule encoding of :func:`identrep.datasets.load_qm9` (use
        ``functools.partial(EGNNExtractor.for_flat_input, hidden=...)`` to change
        them). Inputs are never standardised for a custom extractor (coordinates
        must stay in their units; see ``standardize_inputs``).
    heads : {"joint", "ridge", "group_lasso"}, default="joint"
        Task-head solver.
    loss : {"squared", "multinomial"}, default="squared"
        Regression, or classification with ``heads="group_lasso"`` (class labels
        ``y``, long layout; see :class:`~identrep.BilevelSparseMTL`).
    l1_reg : float in (0, 1), default=0.3
        Lasso penalty of ``heads="group_lasso"``, as a fraction of each task's
        lambda_max (the smallest penalty with all-zero weights).
    ridge_alpha : float, default=1e-3
        Ridge penalty of ``heads="ridge"`` and of the head refits, relative to the
        per-sample squared error (see :mod:`identrep.models.multitask.heads`).
    refit_heads : bool, default=True
        With ``heads="joint"``, replace the heads by their exact ridge solution on
        the training observations after every epoch (costs one forward pass).
    standardize_targets : bool or "pooled", default=True
        Train on targets centred and scaled within each task (population std); the
        fitted heads and predictions are mapped back to the original scale. This
        weights tasks equally whatever their units. ``"pooled"``: centred within
        each task, one scale for all (their pooled std), so tasks keep their
        relative weights (:class:`~identrep.BilevelSparseMTL`'s default).
    standardize_inputs : bool or None, default=None
        None: True for the default MLP extractor, False for a custom
        ``extractor`` (True is then an error: the extractor sees raw ``X``).
        True: standardise every input feature (pooled mean and population std of
        the training rows) in a fixed first layer of the extractor that computes
        in float64, so ``module_`` maps raw (float64) ``X`` and the fit does not
        depend on its units or offset. On the Table 2 process it speeds training
        up markedly (weak MCC 0.955 after 60 epochs against 0.908 without it).
    lr : float, default=3e-3
        Initial Adam learning rate.
    lr_schedule : {"cosine", None}, default="cosine"
        Cosine annealing of the learning rate to 1% of ``lr`` over ``max_epochs``
        (see :func:`~identrep.training.fit_module`), or a constant rate.
    batch_size : int, default=1024
        Observations (long layout) or rows (wide layout) per minibatch.
    max_epochs : int, default=1000
        Cap on the passes over the data: early stopping usually ends training
        first; a ConvergenceWarning says when the cap ended it while validation
        still improved (measurements: docs/notes.md, "MTRN's epoch budget").
    patience : int or None, default=20
        Early-stopping patience in epochs (None: train ``max_epochs`` epochs, still
        restoring the best validation epoch).
    val_fraction : float, default=0.1
        Fraction of every task's samples held out for validation (each task keeps
        at least one training sample); 0 disables validation and early stopping.
    grad_clip : float, optional
        Clip the gradient norm to this value.
    weight_decay : float, default=0.0
        Adam weight decay.
    max_time : float, optional
        Wall-clock budget of the training in seconds (see ``fit_module``).
    checkpoint : str or path-like, optional
        File where the training is saved after every epoch and at its end; a
        ``fit`` that finds it continues the run from it (same data and settings,
        e.g. a later ``fit`` after ``max_time`` stopped one), to the same bits as
        a run never stopped; the schedule then ignores ``max_time``
        (:func:`~identrep.training.fit_module`). One file per run: fits running
        at once (clones in a search) must not share it.
    device : str, default="cpu"
        Torch device ("cuda", or "auto" for CUDA when available).
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, Generator or None
        Seeds the initialisation, the validation split and the batch order.
    verbose : bool, default=False
        Show a one-line progress display on stderr.

    Attributes
    ----------
    module_ : MultiTaskNet
        The trained network (``module_.extractor`` is h; ``module_.heads`` the
        joint heads or None), in eval mode on ``device``.
    history_ : dict
        From :func:`~identrep.training.fit_module`: ``train_loss``, ``val_loss``,
        ``best_epoch``, ``n_epochs``, ``stopped_early``, ``seconds``.
    head_weights_ : ndarray of shape (n_tasks, n_latents)
        w_t on the original target scale.
    head_bias_ : ndarray of shape (n_tasks,)
        b_t on the original target scale.
    target_mean_, target_scale_ : ndarray of shape (n_tasks,)
        Per-task target standardisation (0 and 1 if ``standardize_targets=False``).
    tasks_ : ndarray of shape (n_tasks,)
        Task labels seen in fit (sorted ids, or wide-format column names).
    n_tasks_ : int
    batch_mode_ : {"observations", "rows"}
        How minibatches were drawn: observations (long layout, or wide data too
        sparse for per-batch ridge heads) or rows (wide layout).
    n_latents_ : int
        Output width of ``transform``.
    device_, dtype_ : torch.device, torch.dtype
        Where and in which precision ``module_`` lives.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of ``X`` in fit, when it was a DataFrame with string names.
    fit_seconds_ : float

    References
    ----------
    W. Chen, J. Horwood, J. Heo, J. M. Hernandez-Lobato (2024). Leveraging task
    structures for improved identifiability in neural network representations. TMLR.

    Examples
    --------
    >>> import identrep as ir
    >>> data = ir.datasets.make_nonlinear_tasks(n_tasks=30, n_samples=50,
    ...     n_latents=3, n_causal=1, n_observed=8, random_state=0)
    >>> m = ir.MTRN(n_latents=3, max_epochs=5, random_state=0).fit(
    ...     data.X, data.y, task_ids=data.task_ids)
    >>> m.transform(data.X).shape, m.head_weights_.shape
    ((1500, 3), (30, 3))
    """

    _parameter_constraints: dict = {
        "n_latents": [Interval(Integral, 1, None, closed="left")],
        "hidden_sizes": [SequenceOf(Interval(Integral, 1, None, closed="left")), None],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "extractor": [None, StrOptions(set(EXTRACTORS)), "callable"],
        "heads": [StrOptions({"joint", "ridge", "group_lasso"})],
        "loss": [StrOptions({"squared", "multinomial"})],
        "l1_reg": [Interval(Real, 0, 1, closed="neither")],
        "ridge_alpha": [Interval(Real, 0, None, closed="neither")],
        "refit_heads": ["boolean"],
        "standardize_targets": ["boolean", StrOptions({"pooled"})],
        "standardize_inputs": ["boolean", None],
        **{
            k: TRAINING_CONSTRAINTS[k]
            for k in (
                "lr",
                "lr_schedule",
                "batch_size",
                "max_epochs",
                "patience",
                "val_fraction",
                "grad_clip",
                "weight_decay",
                "max_time",
                "checkpoint",
            )
        },
        "device": ["device"],
        "dtype": ["dtype"],
        "random_state": ["random_state"],
        "verbose": ["boolean"],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        hidden_sizes: tuple[int, ...] | None = None,
        activation: str = "relu",
        extractor=None,
        heads: str = "joint",
        loss: str = "squared",
        ridge_alpha: float = 1e-3,
        l1_reg: float = 0.3,
        refit_heads: bool = True,
        standardize_targets: bool = True,
        standardize_inputs: bool | None = None,
        lr: float = 3e-3,
        lr_schedule: str | None = "cosine",
        batch_size: int = 1024,
        max_epochs: int = 1000,
        patience: int | None = 20,
        val_fraction: float = 0.1,
        grad_clip: float | None = None,
        weight_decay: float = 0.0,
        max_time: float | None = None,
        checkpoint: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.extractor = extractor
        self.heads = heads
        self.loss = loss
        self.ridge_alpha = ridge_alpha
        self.l1_reg = l1_reg
        self.refit_heads = refit_heads
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
        self.max_time = max_time
        self.checkpoint = checkpoint
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    def _check_param_combinations(self) -> None:
        if self.loss == "multinomial" and self.heads != "group_lasso":
            raise InvalidParameterError(
                "MTRN: loss='multinomial' needs heads='group_lasso' (classification "
                f"heads are multinomial group lassos); got heads={self.heads!r}."
            )
        if self.extractor is None:
            return
        if self.standardize_inputs:
            raise InvalidParameterError(
                "MTRN: standardize_inputs=True applies to the default MLP extractor "
                "only; a custom extractor sees X unchanged (coordinates must not be "
                "standardised). Leave standardize_inputs=None or set it to False."
            )
        if self.hidden_sizes is not None:
            raise InvalidParameterError(
                "MTRN: hidden_sizes applies to the default MLP extractor only; "
                "configure a custom extractor through its callable (e.g. "
                "functools.partial) and leave hidden_sizes=None."
            )

    # --------------------------------------------------------------------- fit
    def fit(self, X: ArrayLike, y: ArrayLike, *, task_ids: ArrayLike | None = None):
        """Train the network by maximum likelihood with early stopping.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Targets: long layout with ``task_ids``, or wide layout with NaN for
            unobserved entries (the loss ignores them).
        task_ids : array-like of shape (n_samples,), optional
            Task label (int or str) of every sample, for the long layout.

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A hyperparameter outside its declared constraints (before any data is
            read).
        DataError
            Non-finite inputs, shape mismatches, or a task without observations.
        """
        t_start = time.perf_counter()
        self._validate_params()
        self.__dict__.pop("classes_", None)
        if self.loss == "multinomial":  # class labels, long layout
            return fit_multinomial(self, X, y, task_ids)
        # batch-normalised features need 2 samples
        self._check_fit_input(X, min_samples=2 if self.heads == "group_lasso" else 1)
        self._check_y_given(y)
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        p, T = data.X.shape[1], data.n_tasks
        check_n_latents(self.n_latents, n_features=p, n_tasks=T, owner="MTRN")
        rng, (init_seed, batch_seed) = self._start_fit(2)

        # per-task target standardisation (statistics of all observations)
        counts = data.counts()
        if self.standardize_targets:  # in float64, for any magnitude
            mu, sd = task_moments(data.y, data.task_ids, T)
            if self.standardize_targets == "pooled":  # one scale, any magnitude
                u = sd.max()
                sd = np.full(T, u * np.sqrt(np.average((sd / u) ** 2, weights=counts)))
        else:
            mu, sd = np.zeros(T), np.ones(T)
        y_std = (data.y - mu[data.task_ids]) / sd[data.task_ids]

        train_idx, val_idx = self._split(data.task_ids, rng)
        mode = batch_mode(data, counts, self.heads, self.batch_size, self.n_latents)
        input_stats = streaming_column_moments(data.X) if self._standardizes() else None
        with seeded(init_seed):
            net = self._build_module(
                p, T, self.dtype_, input_stats=input_stats, probe=data.X[:2]
            ).to(device=self.device_)

        Xt = HostRows(data.X, self._x_dtype(), self.device_)  # no copy of all X
        make_batches = row_batches if mode == "rows" else observation_batches
        train_b, val_b = make_batches(
            self._batches,
            data,
            y_std,
            train_idx,
            val_idx,
            Xt,
            batch_seed,
            ridge=self.heads != "joint",
            dtype=self.dtype_,
        )
        post_epoch = None
        if self.heads == "joint" and self.refit_heads:
            post_epoch = head_refit_step(
                data,
                y_std,
                train_idx,
                Xt,
                rows_mode=mode == "rows",
                alpha=float(self.ridge_alpha),
            )
        alpha = float(self.ridge_alpha) if self.heads == "ridge" else None
        self.history_ = self._fit_module(
            net,
            partial(mtrn_loss, alpha=alpha, l1_reg=float(self.l1_reg)),
            train_b,
            val_b,
            post_epoch=post_epoch,
            desc=f"MTRN[{self.heads}]",
        )
        self.module_ = net.eval()

        # heads on the standardised scale, then back to the original one
        W, b = final_heads(
            net,
            lambda: self._features(data.X)[data.rows],  # only for solved heads
            y_std,
            data.task_ids,
            T,
            alpha=float(self.ridge_alpha),
            l1_reg=float(self.l1_reg),
        )
        self.head_weights_ = W * sd[:, None]
        self.head_bias_ = b * sd + mu
        self.target_mean_, self.target_scale_ = mu, sd
        self.tasks_ = data.tasks
        self.n_tasks_ = T
        self.n_latents_ = int(self.n_latents)
        self.batch_mode_ = mode
        self._record_features(X, p)
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    # ---------------------------------------------------------------- network
    def _build_module(
        self,
        n_features: int,
        n_tasks: int,
        dtype: torch.dtype,
        *,
        input_stats: tuple[np.ndarray, np.ndarray] | None = None,
        probe: np.ndarray | None = None,
    ) -> MultiTaskNet:
        """The untrained network for ``n_features`` inputs and ``n_tasks`` tasks.

        The one construction of MTRN's architecture, used by ``fit`` (inside the
        seeded initialisation, so the order of parameter creation is part of the
        random stream) and by :func:`identrep.persistence.load_model` (which then
        loads the saved weights). ``input_stats`` = (mean, scale) of the inputs for
        the fixed standardising first layer of the default MLP (placeholders 0 and
        1 when None; a loaded model gets the saved ones). ``probe`` rows of X check
        a custom extractor's output shape.
        """
        p, d = int(n_features), int(self.n_latents)
        if self.extractor is not None:
            extractor = build_extractor(self.extractor, p, d, dtype, probe)
        else:
            hidden = (2 * p,) if self.hidden_sizes is None else tuple(self.hidden_sizes)
            extractor = MLP(p, hidden, d, activation=self.activation)
            if self._standardizes():
                mean, scale = (
                    (np.zeros(p), np.ones(p)) if input_stats is None else input_stats
                )
                extractor = nn.Sequential(
                    Standardize(torch.as_tensor(mean), torch.as_tensor(scale)),
                    extractor,
                )
        heads = JointHeads(d, int(n_tasks)) if self.heads == "joint" else None
        if self.heads == "group_lasso":  # normalised features: no scale escape
            extractor = nn.Sequential(extractor, nn.BatchNorm1d(d, affine=False))
            heads = GroupLassoHeads(d, int(n_tasks), **self._inner_solver())
        return MultiTaskNet(extractor, heads).to(dtype=dtype)

    def _standardizes(self) -> bool:
        """Whether the extractor starts with the float64 input standardisation."""
        return self.extractor is None and self.standardize_inputs in (None, True)

    def _inner_solver(self) -> dict:
        """Settings of the group-lasso inner solver (subclasses expose them)."""
        return {}

    def _empty_module(self) -> MultiTaskNet:
        """The fitted architecture with arbitrary weights (what a saved model's
        state dict is loaded into)."""
        net = self._build_module(self.n_features_in_, self.n_tasks_, self.dtype_)
        if hasattr(self, "classes_"):
            net.heads = multinomial_heads(self, self.n_tasks_, len(self.classes_))
        return net

    # --------------------------------------------------------------- outputs
    def _features(self, X: np.ndarray) -> np.ndarray:
        """h(x) of checked rows, in chunks, as float64."""
        if X.shape[0] == 0:
            return np.zeros((0, self.n_latents_))
        return self._predict_chunks(self.module_, [X], dtypes=[self._x_dtype()])

    def transform(self, X: ArrayLike) -> np.ndarray:
        """The learned representation h(x).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_latents), float64
        """
        X = self._check_X(X)
        return self._features(X)

    def predict(self, X: ArrayLike, task_ids: ArrayLike | None = None) -> np.ndarray:
        """Predicted targets on the original scale.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        task_ids : array-like of shape (n_samples,), optional
            Task of every sample (labels seen in fit). If omitted, every task is
            predicted for every sample.

        Returns
        -------
        ndarray of shape (n_samples,) with ``task_ids``, else (n_samples, n_tasks)
            (columns in the order of ``tasks_``).

        Raises
        ------
        DataError
            If ``task_ids`` contains a task not seen in fit.
        """
        if hasattr(self, "classes_"):
            return self._predict_classes(X, task_ids)
        X = self._check_X(X)
        if task_ids is None:
            return self._features(X) @ self.head_weights_.T + self.head_bias_
        codes = check_task_ids(task_ids, X.shape[0], self.tasks_)
        F = self._features(X)
        return (F * self.head_weights_[codes]).sum(1) + self.head_bias_[codes]

    def score(self, X: ArrayLike, y: ArrayLike, *, task_ids=None) -> float:
        """Coefficient of determination R^2, averaged uniformly over tasks.

        For every task with at least 2 observations and a non-constant target,
        R^2_t = 1 - SS_res / SS_tot about that task's own mean; the score is their
        unweighted mean (sklearn's ``"uniform_average"`` for multi-output data).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Long layout with ``task_ids``, or wide layout with NaN = unobserved.
        task_ids : array-like of shape (n_samples,), optional

        Returns
        -------
        float

        Raises
        ------
        DataError
            If no task has two distinct target values, or a task is unknown.
        """
        self._check_fitted()
        if hasattr(self, "classes_"):
            return self._score_classes(X, y, task_ids)
        self._check_feature_names(X)
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        Xv = self._check_X(data.X, check_names=False)
        codes = check_task_ids(data.tasks, data.n_tasks, self.tasks_)[data.task_ids]
        F = self._features(Xv)[data.rows]
        pred = (F * self.head_weights_[codes]).sum(1) + self.head_bias_[codes]
        t, n_t = data.task_ids, data.counts()
        mean = np.bincount(t, data.y, data.n_tasks) / np.maximum(n_t, 1)
        ss_tot = np.bincount(t, (data.y - mean[t]) ** 2, data.n_tasks)
        ss_res = np.bincount(t, (data.y - pred) ** 2, data.n_tasks)
        ok = (n_t >= 2) & (ss_tot > 0)
        if not ok.any():
            raise DataError(
                "score needs at least one task with 2 or more observations and a "
                "non-constant target to compute R^2."
            )
        return float(np.mean(1.0 - ss_res[ok] / ss_tot[ok]))
