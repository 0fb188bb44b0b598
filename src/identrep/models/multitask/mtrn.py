"""MTRN: the multi-task regression network (stage 1 of Chen et al., 2024)."""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError
from identrep.models._base import IdentrepEstimator
from identrep.models.multitask.heads import (
    JointHeads,
    fit_ridge_heads,
    fit_ridge_heads_wide,
    ridge_heads,
    ridge_heads_masked,
)
from identrep.models.nn.mlp import MLP, MultiTaskNet, Standardize
from identrep.training.loop import IndexBatches, fit_module, split_within_tasks
from identrep.utils.seeding import check_random_state, seeded, torch_seed_from
from identrep.utils.torch import resolve_device, resolve_dtype
from identrep.utils.validation import check_multitask, check_task_ids

__all__ = ["MTRN", "mtrn_loss"]

_HEADS = ("joint", "ridge")


def _egnn_factory():
    from identrep.models.nn.egnn import EGNNExtractor

    return EGNNExtractor.for_flat_input


# named extractors: name -> () -> callable(n_features, n_latents) -> nn.Module
_EXTRACTORS = {"egnn": _egnn_factory}


class ObsBatch(NamedTuple):
    """Observations of a long-format minibatch.

    x (B, p) inputs, y (B,) targets, task (B,) task codes; ``fit`` (B,) bool marks
    the observations ridge heads are solved on and ``score`` (B,) bool those the
    loss averages over (``None`` = all).
    """

    x: Tensor
    y: Tensor
    task: Tensor
    fit: Tensor | None
    score: Tensor | None


class RowBatch(NamedTuple):
    """Rows of a wide-format minibatch: x (B, p), Y (B, T) with 0 where unobserved,
    ``fit`` and ``score`` (B, T) bool masks of the entries heads are solved on and
    the loss averages over."""

    x: Tensor
    Y: Tensor
    fit: Tensor
    score: Tensor


def _half_mse(resid: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """0.5 * mean of squared residuals over ``mask`` (all if None), and the count."""
    if mask is None:
        return 0.5 * resid.square().mean(), torch.tensor(resid.numel())
    n = mask.sum()
    sq = torch.where(mask, resid, torch.zeros_like(resid)).square()
    return 0.5 * sq.sum() / n.clamp_min(1), n


def mtrn_loss(
    module: MultiTaskNet, batch: ObsBatch | RowBatch, *, alpha: float | None = None
) -> tuple[Tensor, Tensor]:
    """Gaussian negative log-likelihood (unit noise) of a minibatch, up to constants.

    ``0.5 * mean over scored (sample, task) pairs of (y - w_t^T h(x) - b_t)^2``. The
    heads are ``module.heads`` (joint) or, when it is ``None``, per-task ridge
    solutions with penalty ``alpha`` on the batch's ``fit`` entries, differentiated
    through (:func:`identrep.models.multitask.heads.ridge_heads`).

    Parameters
    ----------
    module : MultiTaskNet
    batch : ObsBatch or RowBatch
    alpha : float, optional
        Ridge penalty; required when ``module.heads`` is None.

    Returns
    -------
    loss : Tensor, scalar
    n_scored : Tensor, scalar
        Number of terms averaged (the batch's weight in epoch means).
    """
    F = module(batch.x)
    if isinstance(batch, RowBatch):
        if module.heads is not None:
            P = module.heads(F)
            score = batch.score
        else:
            W, b = ridge_heads_masked(F, batch.Y, batch.fit, alpha)
            P = F @ W.T + b
            score = batch.score & batch.fit.any(0)
        return _half_mse(P - batch.Y, score)
    if module.heads is not None:
        return _half_mse(module.heads.gather(F, batch.task) - batch.y, batch.score)
    uniq, local = torch.unique(batch.task, return_inverse=True)
    W, b = ridge_heads(F, batch.y, local, uniq.numel(), alpha, weight=batch.fit)
    pred = (F * W[local]).sum(-1) + b[local]
    score = batch.score
    if batch.fit is not None:
        fitted = torch.zeros(uniq.numel(), dtype=torch.bool, device=F.device)
        fitted[local[batch.fit]] = True
        score = fitted[local] if score is None else score & fitted[local]
    return _half_mse(pred - batch.y, score)


def _refit_joint_heads(module, *, X, rows, y, task_ids, alpha) -> None:
    """Replace the joint heads by the exact ridge solution given the current features.

    A block-coordinate step on the training observations (``rows`` into ``X``,
    standardised targets ``y``), run by :func:`fit_module` after every epoch.
    """
    F = module.features(X)[rows]
    W, b = fit_ridge_heads(F, y, task_ids, module.heads.n_tasks, alpha)
    module.heads.weight.copy_(W.to(module.heads.weight.dtype))
    module.heads.bias.copy_(b.to(module.heads.bias.dtype))


def _refit_joint_heads_wide(module, *, X, Y, mask, alpha) -> None:
    """:func:`_refit_joint_heads` for wide data: training entries ``mask`` of the
    (rows x tasks) standardised target matrix ``Y``."""
    W, b = fit_ridge_heads_wide(module.features(X), Y, mask, alpha)
    module.heads.weight.copy_(W.to(module.heads.weight.dtype))
    module.heads.bias.copy_(b.to(module.heads.bias.dtype))


class MTRN(IdentrepEstimator):
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
      features (a block-coordinate step). Gradient descent on the bilinear
      product of heads and features otherwise stalls at saddles where one feature
      direction is unused by every head (its head column and its signal both
      ~0): on a 5-latent problem (100 tasks x 100 samples, 30 observed) 6 of 10
      seeds ended at weak MCC 0.81-0.89 (one canonical correlation ~0.2, still
      there after 400 epochs), while with the refit all 10 reached >= 0.995.
    * ``"ridge"``: per-task ridge regression solved in closed form on each minibatch
      and differentiated through (MetaOptNet; the inner ridge of Lachapelle et al.,
      2023). Minibatches then hold whole tasks (long layout; tasks larger than
      ``batch_size`` are split), so each task's head is solved on many samples.
      After training, the heads are solved once on all the data. On the paper's
      Table 2 process (seed 0) ridge heads stopped at weak MCC 0.917 against
      0.968 for the default joint heads, insensitive to ``ridge_alpha`` (1e-7 to
      1e-1) and batch size; on small problems (5 latents) both reach >= 0.995.

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
    heads : {"joint", "ridge"}, default="joint"
        Task-head solver.
    ridge_alpha : float, default=1e-3
        Ridge penalty of ``heads="ridge"`` and of the head refits, relative to the
        per-sample squared error (see :mod:`identrep.models.multitask.heads`).
    refit_heads : bool, default=True
        With ``heads="joint"``, replace the heads by their exact ridge solution on
        the training observations after every epoch (costs one forward pass).
    standardize_targets : bool, default=True
        Train on targets centred and scaled within each task (population std); the
        fitted heads and predictions are mapped back to the original scale. This
        weights tasks equally whatever their units. For the paper's synthetic data
        (targets of similar scale) it changes little.
    standardize_inputs : bool or None, default=None
        None: True for the default MLP extractor, False for a custom
        ``extractor`` (True is then an error: the extractor sees raw ``X``).
        True: standardise every input feature (pooled mean and population std of the
        training rows) in a fixed first layer of the extractor, so ``module_`` still
        maps raw ``X``. Only the conditioning of training changes; on the Table 2
        process it speeds training up markedly (weak MCC 0.955 after 60 epochs
        against 0.908 without it, lr=3e-3).
    lr : float, default=3e-3
        Initial Adam learning rate.
    lr_schedule : {"cosine", None}, default="cosine"
        Cosine annealing of the learning rate to 1% of ``lr`` over ``max_epochs``
        (see :func:`~identrep.training.fit_module`), or a constant rate.
    batch_size : int, default=1024
        Observations (long layout) or rows (wide layout) per minibatch.
    max_epochs : int, default=200
        Maximum passes over the training data.
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
    n_features_in_ : int
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

    def __init__(
        self,
        n_latents: int = 10,
        *,
        hidden_sizes: tuple[int, ...] | None = None,
        activation: str = "relu",
        extractor=None,
        heads: str = "joint",
        ridge_alpha: float = 1e-3,
        refit_heads: bool = True,
        standardize_targets: bool = True,
        standardize_inputs: bool | None = None,
        lr: float = 3e-3,
        lr_schedule: str | None = "cosine",
        batch_size: int = 1024,
        max_epochs: int = 200,
        patience: int | None = 20,
        val_fraction: float = 0.1,
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
        self.heads = heads
        self.ridge_alpha = ridge_alpha
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
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    def _validate_params(self) -> None:
        def pos_int(name, value):
            if (
                not isinstance(value, (int, np.integer))
                or isinstance(value, bool)
                or value < 1
            ):
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")

        pos_int("n_latents", self.n_latents)
        pos_int("batch_size", self.batch_size)
        pos_int("max_epochs", self.max_epochs)
        if self.patience is not None:
            pos_int("patience", self.patience)
        if self.hidden_sizes is not None:
            if isinstance(self.hidden_sizes, (str, bytes)) or not hasattr(
                self.hidden_sizes, "__iter__"
            ):
                raise TypeError(
                    "hidden_sizes must be a sequence of positive ints or None; got "
                    f"{type(self.hidden_sizes).__name__}."
                )
            for h in self.hidden_sizes:
                pos_int("each of hidden_sizes", h)
        if self.extractor is not None:
            if isinstance(self.extractor, str):
                if self.extractor not in _EXTRACTORS:
                    raise ValueError(
                        f"extractor must be None, one of {sorted(_EXTRACTORS)} or a "
                        "callable (n_features, n_latents) -> nn.Module; got "
                        f"{self.extractor!r}."
                    )
            elif not callable(self.extractor):
                raise TypeError(
                    "extractor must be None, a name in "
                    f"{sorted(_EXTRACTORS)} or a callable (n_features, n_latents) -> "
                    f"nn.Module; got {type(self.extractor).__name__}."
                )
            if self.standardize_inputs:
                raise ValueError(
                    "standardize_inputs=True applies to the default MLP extractor "
                    "only; a custom extractor sees X unchanged (coordinates must not "
                    "be standardised). Leave standardize_inputs=None or set False."
                )
            if self.hidden_sizes is not None:
                raise ValueError(
                    "hidden_sizes applies to the default MLP extractor only; "
                    "configure a custom extractor through its callable (e.g. "
                    "functools.partial)."
                )
        if self.lr_schedule not in (None, "cosine"):
            raise ValueError(
                f"lr_schedule must be None or 'cosine'; got {self.lr_schedule!r}."
            )
        if self.heads not in _HEADS:
            raise ValueError(f"heads must be one of {_HEADS}; got {self.heads!r}.")
        for name in ("ridge_alpha", "lr"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float, np.floating)) and v > 0):
                raise ValueError(f"{name} must be a positive number; got {v!r}.")
        if not (
            isinstance(self.val_fraction, (int, float, np.floating))
            and 0 <= self.val_fraction < 1
        ):
            raise ValueError(
                f"val_fraction must lie in [0, 1); got {self.val_fraction!r}."
            )
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None; got {self.grad_clip!r}.")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0; got {self.weight_decay!r}.")

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
        DataError
            Non-finite inputs, shape mismatches, or a task without observations.
        ValueError
            A bad hyperparameter.
        """
        t_start = time.perf_counter()
        self._validate_params()
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        p, T, d = data.X.shape[1], data.n_tasks, int(self.n_latents)
        dev, dt = resolve_device(self.device), resolve_dtype(self.dtype)
        rng = check_random_state(self.random_state)
        init_seed, batch_seed = torch_seed_from(rng), torch_seed_from(rng)

        # per-task target standardisation (statistics of all observations)
        counts = data.counts()
        if self.standardize_targets:
            mu = np.bincount(data.task_ids, data.y, T) / counts
            var = np.bincount(data.task_ids, (data.y - mu[data.task_ids]) ** 2, T)
            sd = np.sqrt(var / counts)
            sd = np.where(sd > 1e-12 * np.maximum(np.abs(mu), 1.0), sd, 1.0)
        else:
            mu, sd = np.zeros(T), np.ones(T)
        y_std = (data.y - mu[data.task_ids]) / sd[data.task_ids]

        train_idx, val_idx = split_within_tasks(data.task_ids, self.val_fraction, rng)
        has_val = val_idx.size > 0
        mode = self._batch_mode(data, counts, train_idx)

        with seeded(init_seed):
            if self.extractor is not None:
                extractor = self._build_extractor(p, d, data.X[:2], dt)
            else:
                hidden = (
                    (2 * p,) if self.hidden_sizes is None else tuple(self.hidden_sizes)
                )
                extractor = MLP(p, hidden, d, activation=self.activation)
            if self.extractor is None and self.standardize_inputs in (None, True):
                x_mean, x_sd = data.X.mean(axis=0), data.X.std(axis=0)
                x_sd = np.where(
                    x_sd > 1e-12 * np.maximum(np.abs(x_mean), 1.0), x_sd, 1.0
                )
                extractor = torch.nn.Sequential(
                    Standardize(torch.as_tensor(x_mean), torch.as_tensor(x_sd)),
                    extractor,
                )
            heads = JointHeads(d, T) if self.heads == "joint" else None
            net = MultiTaskNet(extractor, heads).to(device=dev, dtype=dt)

        Xt = torch.tensor(data.X, dtype=dt, device=dev)  # a copy: X may be read-only
        if mode == "rows":
            train_b, val_b = self._row_batches(
                data, y_std, train_idx, val_idx, Xt, batch_seed
            )
        else:
            train_b, val_b = self._obs_batches(
                data, y_std, train_idx, val_idx, Xt, batch_seed
            )
        alpha = float(self.ridge_alpha) if self.heads == "ridge" else None
        post_epoch = None
        if heads is not None and self.refit_heads and mode == "rows":
            # wide data: each row's features enter the exact refit once
            mask = np.zeros((data.X.shape[0], T), dtype=bool)
            Ytr = np.zeros((data.X.shape[0], T))
            mask[data.rows[train_idx], data.task_ids[train_idx]] = True
            Ytr[data.rows[train_idx], data.task_ids[train_idx]] = y_std[train_idx]
            post_epoch = partial(
                _refit_joint_heads_wide,
                X=Xt,
                Y=torch.as_tensor(Ytr, device=dev),
                mask=torch.as_tensor(mask, device=dev),
                alpha=float(self.ridge_alpha),
            )
        elif heads is not None and self.refit_heads:
            post_epoch = partial(
                _refit_joint_heads,
                X=Xt,
                rows=torch.as_tensor(data.rows[train_idx], device=dev),
                y=torch.as_tensor(y_std[train_idx], device=dev),
                task_ids=torch.as_tensor(data.task_ids[train_idx], device=dev),
                alpha=float(self.ridge_alpha),
            )
        self.history_ = fit_module(
            net,
            partial(mtrn_loss, alpha=alpha),
            train_b,
            lr=float(self.lr),
            max_epochs=int(self.max_epochs),
            val_batches=val_b if has_val else None,
            patience=self.patience,
            grad_clip=self.grad_clip,
            weight_decay=float(self.weight_decay),
            lr_schedule=self.lr_schedule,
            post_epoch=post_epoch,
            progress=bool(self.verbose),
            desc=f"MTRN[{self.heads}]",
        )
        self.module_ = net.eval()
        self.device_, self.dtype_ = dev, dt

        # heads on the standardised scale, then back to the original one
        if heads is not None:
            W = heads.weight.detach().cpu().double().numpy()
            b = heads.bias.detach().cpu().double().numpy()
        else:
            F = torch.as_tensor(self._features(data.X))
            W, b = fit_ridge_heads(
                F[data.rows],
                torch.as_tensor(y_std),
                torch.as_tensor(data.task_ids),
                T,
                float(self.ridge_alpha),
            )
            W, b = W.numpy(), b.numpy()
        self.head_weights_ = W * sd[:, None]
        self.head_bias_ = b * sd + mu
        self.target_mean_, self.target_scale_ = mu, sd
        self.tasks_ = data.tasks
        self.n_tasks_ = T
        self.n_latents_ = d
        self.batch_mode_ = mode
        self.n_features_in_ = p
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    def _build_extractor(self, p: int, d: int, probe: np.ndarray, dt) -> nn.Module:
        """The custom extractor, checked on two rows of X (on the CPU)."""
        make = self.extractor
        if isinstance(make, str):
            make = _EXTRACTORS[make]()
        module = make(p, d)
        if not isinstance(module, nn.Module):
            raise TypeError(
                "extractor(n_features, n_latents) must return a torch.nn.Module; got "
                f"{type(module).__name__}."
            )
        module = module.to(dtype=dt).eval()
        with torch.no_grad():
            out = module(torch.tensor(probe, dtype=dt))  # a copy: X may be read-only
        if tuple(out.shape) != (probe.shape[0], d):
            raise ValueError(
                f"The extractor must map (batch, {p}) to (batch, n_latents={d}); on "
                f"{probe.shape[0]} rows it returned shape {tuple(out.shape)}."
            )
        return module

    def _batch_mode(self, data, counts, train_idx) -> str:
        """Rows for wide data unless ridge heads would see too few samples a task."""
        if data.layout != "wide":
            return "observations"
        if self.heads == "joint":
            return "rows"
        n_rows = data.X.shape[0]
        per_batch = min(int(self.batch_size), n_rows) * counts / n_rows
        enough = 2 * (int(self.n_latents) + 1)
        return "rows" if np.median(per_batch) >= enough else "observations"

    def _obs_batches(self, data, y_std, train_idx, val_idx, Xt, seed):
        dev = Xt.device
        rows = torch.as_tensor(data.rows, device=dev)
        yt = torch.as_tensor(y_std, dtype=Xt.dtype, device=dev)
        tt = torch.as_tensor(data.task_ids, device=dev)
        bs = int(self.batch_size)

        def collate(obs, fit=None, score=None):
            def f(idx):
                i = obs[idx]
                return ObsBatch(
                    Xt[rows[i]],
                    yt[i],
                    tt[i],
                    None if fit is None else fit[i],
                    None if score is None else score[i],
                )

            return f

        train = torch.as_tensor(train_idx, device=dev)
        grouped = self.heads == "ridge"
        train_b = IndexBatches(
            len(train_idx),
            bs,
            collate=collate(train),
            seed=seed,
            groups=data.task_ids[train_idx] if grouped else None,
            device=dev,
        )
        if val_idx.size == 0:
            return train_b, None
        if not grouped:
            val = torch.as_tensor(val_idx, device=dev)
            val_b = IndexBatches(
                len(val_idx), bs, collate=collate(val), shuffle=False, device=dev
            )
            return train_b, val_b
        # ridge: solve each task's head on its training samples, score held-out ones
        is_val = np.zeros(data.n_obs, dtype=bool)
        is_val[val_idx] = True
        is_val_t = torch.as_tensor(is_val, device=dev)
        allobs = torch.arange(data.n_obs, device=dev)
        val_b = IndexBatches(
            data.n_obs,
            bs,
            collate=collate(allobs, fit=~is_val_t, score=is_val_t),
            shuffle=False,
            groups=data.task_ids,
            device=dev,
        )
        return train_b, val_b

    def _row_batches(self, data, y_std, train_idx, val_idx, Xt, seed):
        dev = Xt.device
        n_rows, T = data.X.shape[0], data.n_tasks
        Y = np.zeros((n_rows, T))
        Y[data.rows, data.task_ids] = y_std
        fit = np.zeros((n_rows, T), dtype=bool)
        fit[data.rows[train_idx], data.task_ids[train_idx]] = True
        val = np.zeros((n_rows, T), dtype=bool)
        val[data.rows[val_idx], data.task_ids[val_idx]] = True
        Yt = torch.as_tensor(Y, dtype=Xt.dtype, device=dev)
        fit_t = torch.as_tensor(fit, device=dev)
        val_t = torch.as_tensor(val, device=dev)
        bs = int(self.batch_size)

        def collate(rows, score):
            return lambda idx: RowBatch(
                Xt[rows[idx]], Yt[rows[idx]], fit_t[rows[idx]], score[rows[idx]]
            )

        train_rows = torch.as_tensor(np.flatnonzero(fit.any(1)), device=dev)
        train_b = IndexBatches(
            len(train_rows),
            bs,
            collate=collate(train_rows, fit_t),
            seed=seed,
            device=dev,
        )
        if val_idx.size == 0:
            return train_b, None
        need = val.any(1) if self.heads == "joint" else (val | fit).any(1)
        val_rows = torch.as_tensor(np.flatnonzero(need), device=dev)
        val_b = IndexBatches(
            len(val_rows),
            bs,
            collate=collate(val_rows, val_t),
            shuffle=False,
            device=dev,
        )
        return train_b, val_b

    # --------------------------------------------------------------- outputs
    def _features(self, X: np.ndarray, chunk_size: int = 4096) -> np.ndarray:
        out = []
        with torch.no_grad():
            for start in range(0, X.shape[0], chunk_size):
                xb = torch.tensor(
                    X[start : start + chunk_size],
                    dtype=self.dtype_,
                    device=self.device_,
                )
                out.append(self.module_(xb).detach().cpu().double().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.n_latents_))

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
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        Xv = self._check_X(data.X)
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
