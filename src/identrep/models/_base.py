"""The estimator base of every identrep model, and the torch mixin of the networks.

:class:`IdentrepEstimator` is scikit-learn's contract plus what identrep adds:

* hyperparameters declared once per class in ``_parameter_constraints`` and checked
  at the start of ``fit`` by :meth:`~IdentrepEstimator._validate_params` (cross-
  parameter rules go in the :meth:`~IdentrepEstimator._check_param_combinations`
  hook), so every estimator words the same error the same way;
* ``n_features_in_`` and ``feature_names_in_`` recorded at fit and checked at
  transform (a DataFrame whose columns differ is refused, naming the difference);
* ``transform`` before ``fit`` raises :class:`~identrep.exceptions.NotFittedError`,
  which is also scikit-learn's;
* ``fit_transform`` and ``get_feature_names_out`` for every estimator
  (:class:`sklearn.base.TransformerMixin`).

:class:`TorchEstimatorMixin` owns what every torch model repeats: the device and
dtype (resolved once per fit), the seeds drawn from ``random_state``, the
within-task validation split, minibatches, the call of the one training loop
:func:`~identrep.training.fit_module` with the estimator's budget, and chunked
inference. A new torch model is then its hyperparameters, an ``nn.Module`` and a pure
loss.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from torch import nn

from identrep.exceptions import DataError, NotFittedError
from identrep.training.loop import IndexBatches, fit_module, split_within_tasks
from identrep.utils._param_validation import validate_parameter_constraints
from identrep.utils.seeding import check_random_state, torch_seed_from
from identrep.utils.threads import fit_threads
from identrep.utils.torch import deterministic, resolve_device, resolve_dtype
from identrep.utils.validation import check_array, check_input_kind

__all__ = ["IdentrepEstimator", "TaskTargetsMixin", "TorchEstimatorMixin"]


def _feature_names(X) -> np.ndarray | None:
    """String column names of a DataFrame-like ``X``, else None (as scikit-learn:
    names are only recorded when every column name is a string)."""
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    if names.size and all(isinstance(c, str) for c in names):
        return names
    return None


def _feature_names_message(fitted, given, name: str, cls: str) -> str:
    """scikit-learn's wording for columns that differ from fit (so its checks and
    users' ``match=`` patterns keep working), then what to do."""

    def listed(names) -> str:
        shown = [f"- {n}\n" for n in names[:5]]
        return "".join(shown) + ("- ...\n" if len(names) > 5 else "")

    fitted_set, given_set = set(fitted), set(given)
    unexpected = sorted(given_set - fitted_set)
    missing = sorted(fitted_set - given_set)
    msg = "The feature names should match those that were passed during fit.\n"
    if unexpected:
        msg += "Feature names unseen at fit time:\n" + listed(unexpected)
    if missing:
        msg += "Feature names seen at fit time, yet now missing:\n" + listed(missing)
    if not unexpected and not missing:
        msg += "Feature names must be in the same order as they were in fit.\n"
    return msg + (
        f"The columns of {name} differ from those {cls} was fitted with "
        "(feature_names_in_); pass the columns of fit, in the same order."
    )


#: Rows per call of :meth:`TorchEstimatorMixin._predict_chunks` (every call, the last
#: padded): an MLP runs as fast as in calls of 4,096 rows (docs/notes.md, stop 52),
#: and padding a short input costs little.
_ROW_TILE = 256


def _pad_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with its last row repeated up to ``rows`` rows (a valid input for any
    row-wise function, whatever the array holds)."""
    short = rows - a.shape[0]
    if short <= 0:
        return a
    return np.concatenate([a, np.repeat(a[-1:], short, axis=0)])


class IdentrepEstimator(TransformerMixin, BaseEstimator):
    """Base of every identrep estimator (scikit-learn compatible).

    Subclasses declare ``_parameter_constraints`` (every ``__init__`` parameter, see
    :mod:`identrep.utils._param_validation`), call :meth:`_validate_params` first
    in ``fit`` and :meth:`_record_features` once the input is checked, and set
    ``n_latents_`` (the output width of ``transform``).
    """

    _parameter_constraints: dict[str, list] = {}
    _fitted_attr = "n_features_in_"

    # ------------------------------------------------------------ parameters
    def _validate_params(self) -> None:
        """Check every hyperparameter against its declared constraints, then the
        combination rules of :meth:`_check_param_combinations`."""
        validate_parameter_constraints(
            self._parameter_constraints,
            self.get_params(deep=False),
            caller_name=type(self).__name__,
        )
        self._check_param_combinations()

    def _check_param_combinations(self) -> None:
        """Rules that involve several hyperparameters (none by default); raise
        :class:`~identrep.exceptions.InvalidParameterError`."""

    # --------------------------------------------------------------- features
    def _check_fit_input(self, X, *, min_samples: int = 1) -> None:
        """First checks of ``fit``'s ``X`` (before the full data check): dense,
        real-valued, at least ``min_samples`` rows and one column, each refused in
        scikit-learn's wording."""
        check_input_kind(X, "X", type(self).__name__, min_samples=min_samples)

    def _record_features(self, X_raw: Any, n_features: int) -> None:
        """Set ``n_features_in_`` and, for a DataFrame with string column names,
        ``feature_names_in_`` (removed when the new input has none)."""
        self.n_features_in_ = int(n_features)
        names = _feature_names(X_raw)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _check_feature_names(self, X_raw: Any, name: str = "X") -> None:
        fitted = getattr(self, "feature_names_in_", None)
        given = _feature_names(X_raw)
        cls = type(self).__name__
        if fitted is None:
            if given is not None:
                warnings.warn(
                    f"{name} has feature names, but {cls} was fitted without feature "
                    "names",
                    UserWarning,
                    stacklevel=3,
                )
            return
        if given is None:
            warnings.warn(
                f"{name} does not have valid feature names, but {cls} was fitted with "
                "feature names",
                UserWarning,
                stacklevel=3,
            )
            return
        if len(given) == len(fitted) and np.array_equal(given, fitted):
            return
        raise DataError(_feature_names_message(fitted, given, name, cls))

    # ----------------------------------------------------------------- fitted
    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attr):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(...) "
                "before using it."
            )

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_attr)

    def _check_X(self, X, name: str = "X", *, check_names: bool = True) -> np.ndarray:
        """A fitted estimator's input: fitted check, column names, finite values and
        the number of features of fit.

        ``check_names=False`` skips the column-name check, for an ``X`` already
        converted from the caller's input after its names were checked.
        """
        self._check_fitted()
        if check_names:
            self._check_feature_names(X, name)
        check_input_kind(X, name, type(self).__name__)
        X = check_array(X, name)
        if X.shape[1] != self.n_features_in_:
            cls = type(self).__name__
            raise DataError(
                f"{name} has {X.shape[1]} features, but {cls} is expecting "
                f"{self.n_features_in_} features as input: it was fitted with "
                f"n_features_in_={self.n_features_in_}."
            )
        return X

    # ----------------------------------------------------------------- output
    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        """``fit(X, y, **fit_params)`` then ``transform(X)``."""
        return self.fit(X, y, **fit_params).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the ``transform`` output columns: ``<class>0``, ``<class>1``, ..."""
        self._check_fitted()
        prefix = type(self).__name__.lower()
        return np.asarray(
            [f"{prefix}{i}" for i in range(self.n_latents_)], dtype=object
        )


class TaskTargetsMixin:
    """Estimators whose ``fit`` needs targets, given per task (use before
    :class:`IdentrepEstimator` in the bases).

    Sets scikit-learn's tags: targets are required and multi-output only, so
    scikit-learn's own checks pass ``y`` as a 2-D array, i.e. the wide layout
    (``fit(X, Y)``, NaN = unobserved) with one task. Works with scikit-learn >= 1.6
    (``__sklearn_tags__``) and older versions (``_more_tags``).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags

    def _more_tags(self) -> dict:  # scikit-learn < 1.6
        return {"requires_y": True, "multioutput": True, "multioutput_only": True}

    def _check_y_given(self, y) -> None:
        """Refuse ``y=None`` with scikit-learn's wording."""
        if y is None:
            raise DataError(
                f"{type(self).__name__} requires y to be passed, but the target y is "
                "None. Pass targets of shape (n_samples,) with task_ids=..., or a "
                "wide target matrix of shape (n_samples, n_tasks) (NaN = unobserved)."
            )


class TorchEstimatorMixin:
    """The parts every torch estimator shares (use before :class:`IdentrepEstimator`
    in the bases).

    Reads the hyperparameters ``device``, ``dtype``, ``random_state``,
    ``val_fraction``, ``batch_size``, ``lr``, ``max_epochs``, ``patience``,
    ``grad_clip``, ``verbose`` and, where the class has them, ``weight_decay`` and
    ``lr_schedule``. Sets ``device_`` and ``dtype_`` in :meth:`_start_fit`.
    """

    def _start_fit(self, n_seeds: int) -> tuple[np.random.Generator, list[int]]:
        """Resolve ``device_``/``dtype_`` and draw ``n_seeds`` torch seeds.

        Returns the numpy generator (for the split and any further draws) and the
        seeds, drawn in order from ``random_state``, so the same ``random_state``
        gives the same module initialisation, batches and training noise.
        """
        self.device_ = resolve_device(self.device)
        self.dtype_ = resolve_dtype(self.dtype)
        rng = check_random_state(self.random_state)
        return rng, [torch_seed_from(rng) for _ in range(n_seeds)]

    def _standardizes(self) -> bool:
        """Whether the module starts with the float64 input standardisation
        (:class:`~identrep.models.nn.mlp.Standardize`); True unless overridden."""
        return True

    def _x_dtype(self) -> torch.dtype:
        """The dtype ``X`` is fed to the module in: float64 when the module
        standardises it (in float64, before casting to ``dtype_``: units and
        offsets of any size a float64 holds keep their signal), else ``dtype_``."""
        return torch.float64 if self._standardizes() else self.dtype_

    def _split(self, task_ids: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
        """Random ``val_fraction`` of every task's samples held out for early
        stopping (:func:`~identrep.training.split_within_tasks`); their indices
        (into the checked observations, in the order of
        :func:`~identrep.utils.validation.check_multitask`) are kept in
        ``validation_index_``, so held-out scores can be computed after fit."""
        train, val = split_within_tasks(task_ids, self.val_fraction, rng)
        self.validation_index_ = val
        return train, val

    def _tensor(self, a, dtype: torch.dtype | None = None) -> torch.Tensor:
        """A copy of ``a`` on ``device_`` (``dtype_`` unless given); a copy because
        ``a`` may be read-only."""
        return torch.tensor(
            np.asarray(a), dtype=dtype or self.dtype_, device=self.device_
        )

    def _batches(
        self,
        index: np.ndarray,
        collate: Callable[[torch.Tensor], Any],
        *,
        seed: int = 0,
        shuffle: bool = True,
        groups: np.ndarray | None = None,
    ) -> IndexBatches:
        """Minibatches of ``batch_size`` over the items ``index`` (reshuffled each
        epoch when ``shuffle``); ``collate`` receives positions into ``index``
        already mapped to the items."""
        idx = torch.as_tensor(np.asarray(index), device=self.device_)
        return IndexBatches(
            len(idx),
            int(self.batch_size),
            collate=lambda i: collate(idx[i]),
            seed=seed,
            shuffle=shuffle,
            groups=groups,
            device=self.device_,
        )

    def _fit_module(
        self,
        module: nn.Module,
        loss_fn: Callable,
        train_batches,
        val_batches=None,
        *,
        post_epoch: Callable[[nn.Module], None] | None = None,
        desc: str | None = None,
        **overrides,
    ) -> dict:
        """Train ``module`` with :func:`~identrep.training.fit_module` on the
        estimator's budget; ``overrides`` replace single arguments."""
        kwargs = dict(
            lr=float(self.lr),
            max_epochs=int(self.max_epochs),
            steps_per_epoch=getattr(self, "steps_per_epoch", None),
            val_batches=val_batches,
            patience=self.patience,
            grad_clip=self.grad_clip,
            weight_decay=float(getattr(self, "weight_decay", 0.0)),
            lr_schedule=getattr(self, "lr_schedule", None),
            max_time=getattr(self, "max_time", None),
            checkpoint=getattr(self, "checkpoint", None),
            post_epoch=post_epoch,
            progress=bool(self.verbose),
            desc=desc or type(self).__name__,
        )
        kwargs.update(overrides)
        # small batches: one thread unless the user chose (utils/threads.py)
        macs_per_row = sum(p.numel() for p in module.parameters() if p.dim() == 2)
        with (
            fit_threads(work=float(self.batch_size) * macs_per_row),
            deterministic(self.device_),
        ):
            return fit_module(module, loss_fn, train_batches, **kwargs)

    def _predict_chunks(
        self,
        fn: Callable[..., torch.Tensor | Sequence[torch.Tensor]],
        arrays: Sequence[np.ndarray],
        *,
        dtypes: Sequence[torch.dtype | None] | None = None,
    ):
        """Apply ``fn`` to the rows of ``arrays`` in tiles of :data:`_ROW_TILE`
        rows, without gradients, and return float64 numpy output(s) stacked along
        rows.

        Every call of ``fn`` sees exactly ``_ROW_TILE`` rows: the last tile is
        padded with copies of its last row, whose outputs are dropped. The kernels
        of a product may depend on its number of rows (on stop 52's AVX-512
        machine, torch's float32 linear layers gave other last bits to calls of
        fewer than 16 rows), so with one tile size a row's output does not depend
        on how many rows came with it: ``transform(X[mask])`` equals
        ``transform(X)[mask]`` to the bit.

        ``fn`` takes one tensor per array (on ``device_``, dtype ``dtype_`` unless
        ``dtypes`` names another, e.g. ``torch.int64`` for task codes) and returns a
        tensor or a tuple of tensors; the result has the same structure.
        """
        n = arrays[0].shape[0]
        tile = _ROW_TILE
        dtypes = dtypes or [None] * len(arrays)
        outs: list[list[np.ndarray]] = []
        single = True
        with torch.no_grad(), deterministic(self.device_):
            for s in range(0, n, tile):
                k = min(tile, n - s)
                res = fn(
                    *(
                        self._tensor(_pad_rows(a[s : s + k], tile), dt)
                        for a, dt in zip(arrays, dtypes, strict=True)
                    )
                )
                single = isinstance(res, torch.Tensor)
                parts = [res] if single else list(res)
                if not outs:
                    outs = [[] for _ in parts]
                for acc, r in zip(outs, parts, strict=True):
                    acc.append(r[:k].detach().cpu().double().numpy())
        if not outs:
            raise DataError("Cannot compute outputs for an input with 0 rows.")
        stacked = [np.concatenate(acc) for acc in outs]
        return stacked[0] if single else tuple(stacked)
