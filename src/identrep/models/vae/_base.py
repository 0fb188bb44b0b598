"""The estimator base of the VAE family (the estimator layer, STYLE.md rule 2).

:class:`BaseVAE` is an unconditional VAE estimator on
:class:`~identrep.models._base.IdentrepEstimator` and
:class:`~identrep.models._base.TorchEstimatorMixin`: it checks the declared
hyperparameters and the data, standardises, splits, batches, trains with the one
training loop and encodes. A VAE-type model is then its hyperparameters
(``__init__`` and ``_parameter_constraints``, composed from the constraint groups
below), a module (the :meth:`~BaseVAE._build_prior` or
:meth:`~BaseVAE._build_module` hook) and a loss (:meth:`~BaseVAE._make_loss`).
Conditional VAEs (u = target and/or task) build on
:class:`~identrep.models.vae._conditional.ConditionalVAEEstimator`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from torch import nn

from identrep._typing import ArrayLike
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models._base import IdentrepEstimator, TorchEstimatorMixin
from identrep.models.nn.mlp import _ACTIVATIONS, Standardize
from identrep.models.nn.vae import (
    LIKELIHOODS,
    PRIOR_FAMILIES,
    ConditionalPrior,
    ConditionalVAE,
    Conditioner,
    GaussianDecoder,
    GaussianEncoder,
    Whiten,
)
from identrep.models.vae._elbo import VAEBatch, neg_elbo_loss
from identrep.training._constraints import STEP_BUDGET_CONSTRAINTS
from identrep.utils._param_validation import Interval, SequenceOf, StrOptions
from identrep.utils.numerics import column_moments
from identrep.utils.seeding import seeded
from identrep.utils.validation import MultiTaskArrays, check_array

__all__ = [
    "ARCHITECTURE_CONSTRAINTS",
    "ELBO_CONSTRAINTS",
    "LIKELIHOOD_CONSTRAINTS",
    "STEP_BUDGET_CONSTRAINTS",
    "TRAINING_CONSTRAINTS",
    "BaseVAE",
    "check_elbo_weights",
    "whitening_map",
]

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_POSITIVE = Interval(Real, 0, math.inf, closed="neither")

#: Network shape: every VAE of the family has these.
ARCHITECTURE_CONSTRAINTS: dict[str, list] = {
    "n_latents": [_POSITIVE_INT],
    "encoder": [StrOptions({"linear", "mlp"})],
    "decoder": [StrOptions({"linear", "mlp"}), None],
    "hidden_sizes": [SequenceOf(_POSITIVE_INT, allow_empty=True), None],
    "activation": [StrOptions(set(_ACTIVATIONS))],
    "decoder_var": [_POSITIVE, StrOptions({"learned"})],
}
#: The budget and runtime of training (read by TorchEstimatorMixin).
TRAINING_CONSTRAINTS: dict[str, list] = {
    "lr": [_POSITIVE],
    "lr_schedule": [StrOptions({"cosine"}), None],
    "batch_size": [_POSITIVE_INT],
    "max_epochs": [_POSITIVE_INT],
    "patience": [_POSITIVE_INT, None],
    "val_fraction": [Interval(Real, 0, 1, closed="left")],
    "grad_clip": [_POSITIVE, None],
    "device": ["device", None],
    "dtype": ["dtype"],
    "random_state": ["random_state"],
    "verbose": ["boolean", Interval(Integral, 0, None, closed="left")],
}
#: A factorised prior trained by the (weighted) ELBO: VAE and iVAE.
ELBO_CONSTRAINTS: dict[str, list] = {
    "prior": [StrOptions(set(PRIOR_FAMILIES))],
    "objective": [StrOptions({"elbo", "weighted"})],
    "elbo_weights": [SequenceOf(Interval(Real, 0, math.inf, closed="left")), None],
    "anneal": ["boolean"],
}

#: The observation model p(x | z) of a ConditionalVAE-based estimator.
LIKELIHOOD_CONSTRAINTS: dict[str, list] = {
    "likelihood": [StrOptions(set(LIKELIHOODS))],
}


def whitening_map(
    X: np.ndarray, n_components: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, W)`` such that ``(X - mean) @ W.T`` has identity covariance.

    With ``n_components=None`` the ZCA map ``W = C^(-1/2) D^(-1)`` where C is the
    pooled (population) correlation matrix and D the columns' standard
    deviations (computed on standardised columns, so any units work): the
    whitening closest to the standardised inputs.
    Otherwise ``W = diag(lambda_k^(-1/2)) U_k^T`` on the top ``n_components``
    eigenvectors U_k of C (a whitened PCA reduction, shape (n_components, p));
    eigenvectors are signed so that their largest entry is positive. Eigenvalues
    below ``1e-12`` times the largest are floored there (a rank-deficient X gets
    huge but finite weights on its null directions: prefer a reduction).

    Raises
    ------
    DataError
        When X has zero covariance (every column constant).
    """
    X = np.asarray(X, dtype=np.float64)
    # on the standardised columns (any units), folded back into W below
    mean, scale = column_moments(X)
    Xs = (X - mean) / scale
    evals, evecs = np.linalg.eigh(Xs.T @ Xs / X.shape[0])
    evals, evecs = evals[::-1], evecs[:, ::-1]
    if not evals[0] > 0:
        raise DataError(
            "Whitening needs X with a non-zero covariance; every column of X is "
            "constant."
        )
    rows = np.arange(evecs.shape[1])
    evecs = evecs * np.sign(evecs[np.abs(evecs).argmax(axis=0), rows])
    inv_sd = 1.0 / np.sqrt(np.maximum(evals, evals[0] * 1e-12))
    if n_components is None:
        return mean, (evecs * inv_sd) @ evecs.T / scale
    k = min(int(n_components), X.shape[1])
    return mean, inv_sd[:k, None] * evecs[:, :k].T / scale


def check_elbo_weights(est) -> None:
    """The length of ``elbo_weights`` (None or four weights), which the declared
    constraints cannot say; for ``_check_param_combinations``."""
    w = est.elbo_weights
    if w is not None and len(w) != 4:
        raise InvalidParameterError(
            f"The 'elbo_weights' parameter of {type(est).__name__} must be four "
            f"non-negative floats (a, b, c, d) or None; got {w!r}."
        )


class BaseVAE(TorchEstimatorMixin, IdentrepEstimator):
    """Base class of the VAE estimators: an unconditional Gaussian VAE.

    Not used directly. Subclasses set their hyperparameters in ``__init__`` and
    declare them in ``_parameter_constraints``; the base reads ``n_latents``,
    ``encoder``, ``decoder``, ``hidden_sizes``, ``activation``, ``decoder_var``
    and the training parameters of
    :class:`~identrep.models._base.TorchEstimatorMixin` (``prior`` too, in the
    default :meth:`_build_prior`). It provides

    * ``fit(X, y=None, *, task_ids=None)``: ``X`` is standardised (pooled mean
      and population std, folded into ``module_``), a random ``val_fraction`` is
      held out, and :func:`~identrep.training.fit_module` (Adam) trains with early
      stopping on the validation loss, restoring the best epoch. ``y`` and
      ``task_ids`` are accepted and ignored (the conditional subclasses use them);
    * ``transform(X)``: the encoder mean E_q[z | x]; ``encode(X)``: its mean and
      variance.

    Hooks: :meth:`_build_prior` (default a fixed standard prior, Gaussian or
    Laplace by ``prior``), :meth:`_build_module` (default
    :class:`~identrep.models.nn.vae.ConditionalVAE`, whose modules must give
    ``encode(x, y, task) -> (mean, log_var)``), :meth:`_make_loss` (default
    :func:`~identrep.models.vae._elbo.neg_elbo_loss`), :meth:`_set_fitted` (extra
    fitted attributes) and :meth:`_desc` (progress-bar label). Conditioning hooks
    (:meth:`_uses_target`, :meth:`_task_mode`, :meth:`_embedding_dim`,
    :meth:`_condition_encoder`) say the VAE has no u.

    Every seed comes from ``random_state`` in a fixed order: module
    initialisation, batch order and training noise, then the validation split.
    """

    _parameter_constraints: dict[str, list] = {}

    # ---------------------------------------------------------- conditioning
    def _uses_target(self) -> bool:
        """Whether u contains the (standardised) target y."""
        return False

    def _task_mode(self) -> str | None:
        """None, "onehot" or "embedding": how the task enters u."""
        return None

    def _embedding_dim(self) -> int:
        return 0

    def _condition_encoder(self) -> bool:
        """Whether the encoder sees u (q(z | x, u)) or not (q(z | x))."""
        return False

    def _desc(self) -> str:
        return type(self).__name__

    # ---------------------------------------------------------------- params
    # ------------------------------------------------------------------ data
    def _check_fit_data(self, X, y, task_ids) -> MultiTaskArrays:
        """Validated data: ``X`` only (one pooled task, zero targets)."""
        self._check_fit_input(X)
        Xa = check_array(X, "X")
        n = Xa.shape[0]
        return MultiTaskArrays(
            Xa,
            np.zeros(n),
            np.zeros(n, dtype=np.int64),
            np.arange(n, dtype=np.int64),
            np.array([0]),
            "long",
        )

    def _check_transform_data(self, X, y, task_ids):
        """(X, y, task codes) for transform: ``X`` only."""
        X = self._check_X(X)
        n = X.shape[0]
        return X, np.zeros(n), np.zeros(n, dtype=np.int64)

    # ----------------------------------------------------------------- hooks
    def _hidden(self, n_features: int) -> tuple[int, ...]:
        if self.hidden_sizes is not None:
            return tuple(int(h) for h in self.hidden_sizes)
        return (max(2 * n_features, 32),)

    def _build_conditioner(
        self, n_tasks: int, y_mean: float, y_scale: float
    ) -> Conditioner:
        return Conditioner(
            self._uses_target(),
            self._task_mode(),
            n_tasks=n_tasks,
            embedding_dim=self._embedding_dim(),
            y_mean=y_mean,
            y_scale=y_scale,
        )

    def _build_encoder(self, n_features: int, cond_features: int) -> GaussianEncoder:
        hidden = self._hidden(n_features) if self.encoder == "mlp" else ()
        return GaussianEncoder(
            n_features, cond_features, int(self.n_latents), hidden, self.activation
        )

    def _build_decoder(self, n_features: int) -> GaussianDecoder:
        arch = self.decoder if self.decoder is not None else self.encoder
        hidden = self._hidden(n_features) if arch == "mlp" else ()
        learned = isinstance(self.decoder_var, str)
        return GaussianDecoder(
            int(self.n_latents),
            n_features,
            hidden,
            self.activation,
            obs_var=0.1 if learned else float(self.decoder_var),
            learn_var=learned,
        )

    def _build_prior(self, cond_features: int, n_features: int) -> nn.Module:
        """The prior module: ``prior(u) -> (mean, log_var)`` with a ``dist``
        attribute. Default: a :class:`~identrep.models.nn.vae.ConditionalPrior`
        of family ``self.prior`` (the fixed standard prior when u is empty)."""
        return ConditionalPrior(
            cond_features,
            int(self.n_latents),
            self._hidden(n_features),
            self.activation,
            dist=self.prior,
        )

    def _build_module(
        self,
        n_features: int,
        n_tasks: int,
        x_mean: np.ndarray,
        x_scale: np.ndarray,
        y_mean: float,
        y_scale: float,
    ) -> nn.Module:
        """The untrained module, built inside ``seeded`` on CPU (``fit`` moves it
        to the device and dtype afterwards). Parameters are created in the order
        conditioner, encoder, decoder, prior."""
        cond = self._build_conditioner(n_tasks, y_mean, y_scale)
        c = cond.out_features
        enc_c = c if self._condition_encoder() else 0
        return ConditionalVAE(
            self._build_encoder(n_features, enc_c),
            self._build_decoder(n_features),
            self._build_prior(c, n_features),
            cond,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
            condition_encoder=self._condition_encoder(),
            likelihood=getattr(self, "likelihood", "gaussian"),
        )

    def _make_loss(
        self, n_train: int
    ) -> tuple[Callable[[nn.Module, Any], Any], Callable[[nn.Module], None] | None]:
        """``(loss_fn, post_epoch)`` for :func:`fit_module`; default the plain
        negative ELBO and no post-epoch hook. ``n_train``: training-set size."""
        return neg_elbo_loss, None

    def _input_stats(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(x_mean, x_scale)`` of the input standardisation folded into the
        module: the pooled mean and population std, exact for any float64
        magnitude (:func:`~identrep.utils.numerics.column_moments`). Override for
        inputs that are not dense arrays."""
        return column_moments(X)

    def _make_collate(self, Xo, data: MultiTaskArrays) -> Callable[[Any], VAEBatch]:
        """``collate(obs) -> VAEBatch`` for index tensors ``obs`` into the rows of
        ``Xo`` (one row per observation). Default: the data are copied to the
        device once and batches are index lookups; override to densify or stream
        rows batch by batch. ``X`` and ``y`` stay float64: the module standardises
        them in float64 before its own dtype (units and offsets never erase the
        signal)."""
        return self._lookup_collate(self._tensor(Xo, self._x_dtype()), data)

    def _lookup_collate(
        self, Xt: torch.Tensor, data: MultiTaskArrays, standardized: bool = False
    ) -> Callable[[Any], VAEBatch]:
        """``collate(obs)``: index lookups into the device rows ``Xt`` and the
        targets and task codes of ``data`` (``standardized``: ``Xt`` holds the
        module's standardised x, :class:`~identrep.models.vae._elbo.VAEBatch`)."""
        yt = self._tensor(data.y, torch.float64)
        tt = self._tensor(data.task_ids, torch.int64)

        def collate(obs):
            return VAEBatch(Xt[obs], yt[obs], tt[obs], standardized)

        return collate

    def _standardize_once(self) -> bool:
        """Whether the training batches may carry x already standardised by the
        module (:meth:`_standardized_collate`); only for losses that read x
        through :func:`~identrep.models.vae._elbo.standardized_input`. Default
        False."""
        return False

    def _standardized_collate(
        self, net: nn.Module, Xo, data: MultiTaskArrays
    ) -> Callable[[Any], VAEBatch]:
        """``collate(obs)`` as :meth:`_make_collate`, but with x standardised once
        for all rows by ``net.standardize`` (an element-wise float64 map, applied
        chunk by chunk: the same numbers as per batch), so a batch is a lookup of
        ``dtype_`` rows instead of a float64 lookup and a float64 map per step."""
        Xt = torch.empty(Xo.shape, dtype=self.dtype_, device=self.device_)
        with torch.no_grad():
            for start in range(0, Xo.shape[0], 8192):
                chunk = np.asarray(Xo[start : start + 8192])
                if not chunk.flags.writeable:  # read-only input (a memmap, a
                    chunk = chunk.copy()  # frozen array): torch would warn
                rows = torch.as_tensor(chunk)
                Xt[start : start + 8192] = net.standardize(
                    rows.to(device=self.device_, dtype=self._x_dtype())
                )
        return self._lookup_collate(Xt, data, standardized=True)

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        """Set subclass-specific fitted attributes (after training)."""

    def _whitening(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(mean, W)`` of the input whitening that replaces the per-feature
        standardisation (see :func:`whitening_map`), or None (default: the
        ``whiten`` hyperparameter where the estimator has one: None, ``"zca"``
        or ``"pca"`` = reduced to ``n_latents`` whitened components)."""
        kind = getattr(self, "whiten", None)
        if kind is None:
            return None
        return whitening_map(X, int(self.n_latents) if kind == "pca" else None)

    # ------------------------------------------------------------------- fit
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ):
        """Train by maximising the objective with Adam and early stopping.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks), optional
            Targets in the long layout (with ``task_ids``) or the wide layout (NaN =
            unobserved); used only by the estimators whose u contains the target.
        task_ids : array-like of shape (n_samples,), optional
            Task label of every sample (long layout); used only by the estimators
            whose u contains the task.

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A hyperparameter outside its declared constraints.
        DataError
            Non-finite inputs, shape mismatches, or missing ``y``/``task_ids`` that
            the conditioning needs.
        """
        t_start = time.perf_counter()
        self._validate_params()
        data = self._check_fit_data(X, y, task_ids)
        p, n_tasks = data.X.shape[1], data.n_tasks
        rng, (init_seed, batch_seed, train_seed) = self._start_fit(3)

        # one row per observation (wide data repeat a row once per observed task)
        Xo = data.X if data.layout == "long" else data.X[data.rows]
        x_mean, x_scale = self._input_stats(data.X)
        y_mean, y_scale = 0.0, 1.0
        if data.n_obs:
            y_mean, y_scale = (float(v[0]) for v in column_moments(data.y[:, None]))

        white = self._whitening(data.X)
        n_in = p if white is None else white[1].shape[0]

        train_idx, val_idx = self._split(data.task_ids, rng)
        with seeded(init_seed):
            net = self._build_module(n_in, n_tasks, x_mean, x_scale, y_mean, y_scale)
        if white is not None:  # the decoder reconstructs the whitened input
            net.standardize = Whiten(*(torch.as_tensor(w) for w in white))
        net = net.to(device=self.device_, dtype=self.dtype_)

        if self._standardize_once() and type(net.standardize) is Standardize:
            collate = self._standardized_collate(net, Xo, data)
        else:
            collate = self._make_collate(Xo, data)
        train_b = self._batches(train_idx, collate, seed=batch_seed)
        val_b = self._batches(val_idx, collate, shuffle=False) if val_idx.size else None
        loss_fn, post_epoch = self._make_loss(len(train_idx))
        with seeded(train_seed):
            self.history_ = self._fit_module(
                net, loss_fn, train_b, val_b, post_epoch=post_epoch, desc=self._desc()
            )
        self.module_ = net.eval()
        self.tasks_ = data.tasks
        self.n_tasks_ = n_tasks
        self.n_latents_ = int(self.n_latents)
        self._record_features(X, p)
        self._set_fitted(data)
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    def fit_transform(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> np.ndarray:
        """``fit(X, y, task_ids=task_ids)``, then ``transform`` of the same data
        (with ``y`` and ``task_ids`` where the encoder is conditioned on them)."""
        return self.fit(X, y, task_ids=task_ids).transform(X, y, task_ids=task_ids)

    # ------------------------------------------------------------- transform
    def _encode(self, X, y, codes) -> tuple[np.ndarray, np.ndarray]:
        return self._predict_chunks(
            self.module_.encode,
            [X, y, codes],
            dtypes=[self._x_dtype(), torch.float64, torch.int64],
        )

    def transform(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> np.ndarray:
        """The encoder mean E_q[z | x, u] (the representation to score).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), optional
            The target, for an encoder conditioned on it (ignored otherwise).
        task_ids : array-like of shape (n_samples,), optional
            Tasks seen in fit, for an encoder conditioned on the task (ignored
            otherwise).

        Returns
        -------
        ndarray of shape (n_samples, n_latents), float64

        Raises
        ------
        NotFittedError
            Before fit.
        DataError
            A feature-count mismatch, non-finite values, or a missing or unknown
            conditioning input (named in the message).
        """
        X, yv, codes = self._check_transform_data(X, y, task_ids)
        return self._encode(X, yv, codes)[0]

    def encode(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of q(z | x, u), each (n_samples, n_latents).

        Same inputs and errors as :meth:`transform`.
        """
        X, yv, codes = self._check_transform_data(X, y, task_ids)
        mean, log_var = self._encode(X, yv, codes)
        return mean, np.exp(log_var)

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self._uses_target()
        return tags

    def _more_tags(self) -> dict:  # scikit-learn < 1.6
        return {"requires_y": self._uses_target()}
