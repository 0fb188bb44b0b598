"""The conditional-VAE estimator base: u is the target and/or the task.

:class:`ConditionalVAEEstimator` adds to :class:`~identrep.models.vae._base.BaseVAE`
the auxiliary variable u (built in the module by a
:class:`~identrep.models.nn.vae.Conditioner`) and the data it needs: long (``y``,
``task_ids``) or wide (``Y`` with NaN = unobserved; every observed (row, task) pair
is one training pair (x, u)) data, checked by
:func:`~identrep.utils.validation.check_multitask`. ``task_ids`` may be omitted
when the task is not part of u (all samples pool into one task), and ``y`` when
the target is not. The estimators iVAE and iCaRL (and their multi-task versions)
build on it.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.models.nn.vae import Conditioner
from identrep.models.vae._base import BaseVAE
from identrep.utils._param_validation import Interval, StrOptions
from identrep.utils.validation import (
    MultiTaskArrays,
    check_array,
    check_multitask,
    check_task_ids,
    encode_task_ids,
)

__all__ = ["ConditionalVAEEstimator"]


def _shape(a) -> tuple[int, ...]:
    """Shape of an array-like (() for None), through ``__array__`` (not numpy's
    ``__array_function__`` protocol, which array-likes may refuse)."""
    if a is None:
        return ()
    return np.asarray(a.to_numpy() if hasattr(a, "to_numpy") else a).shape


class ConditionalVAEEstimator(BaseVAE):
    """Base class of the conditional VAEs (iVAE, MT-iVAE, iCaRL, MT-iCaRL).

    Not used directly. Subclasses have the hyperparameters of
    :class:`~identrep.models.vae._base.BaseVAE` plus ``conditioning`` (u =
    ``"target"``, ``"task"`` or ``"target+task"``) and ``condition_encoder``; the
    task enters u as a one-hot code unless :meth:`_task_mode` says
    ``"embedding"`` (the multi-task versions).

    ``transform(X, y=None, *, task_ids=None)`` returns the encoder mean E[z | x, u].
    **The encoder needs the conditioning**: pass the same kind of ``y`` and
    ``task_ids`` as in fit (long layout, tasks seen in fit) unless
    ``condition_encoder=False`` (then only ``X`` is used). Inputs the
    conditioning does not use are ignored.
    """

    # ---------------------------------------------------------- conditioning
    def _uses_target(self) -> bool:
        return self.conditioning in ("target", "target+task")

    def _task_mode(self) -> str | None:
        return "onehot" if self.conditioning in ("task", "target+task") else None

    def _condition_encoder(self) -> bool:
        return bool(self.condition_encoder)

    def _desc(self) -> str:
        return f"{type(self).__name__}[{self.conditioning}]"

    # ------------------------------------------------------------------ data
    def _check_fit_data(self, X, y, task_ids) -> MultiTaskArrays:
        """Validated data; y or task_ids may be absent when u does not need them."""
        needs_task = self._task_mode() is not None
        cls = type(self).__name__
        self._check_fit_input(X)
        if y is None:
            if self._uses_target():
                raise DataError(
                    f"{cls} conditions on the target: it requires y to be passed, "
                    "but the target y is None. Pass y of shape (n_samples,) (with "
                    "task_ids) or a wide Y of shape (n_samples, n_tasks)."
                )
            Xa = check_array(X, "X")
            n = Xa.shape[0]
            if task_ids is None:
                if needs_task:
                    raise DataError(
                        f"{cls} conditions on the task: pass task_ids of shape "
                        "(n_samples,)."
                    )
                codes, labels = np.zeros(n, dtype=np.int64), np.array([0])
            else:
                codes, labels = encode_task_ids(task_ids, n)
            return MultiTaskArrays(
                Xa, np.zeros(n), codes, np.arange(n, dtype=np.int64), labels, "long"
            )
        y_shape = _shape(y)
        if task_ids is None and not needs_task and len(y_shape) == 1:
            task_ids = np.zeros(y_shape[0], dtype=np.int64)
        return check_multitask(X, y, task_ids, min_samples=1, check_constant=False)

    def _check_transform_data(self, X, y, task_ids):
        """(X, y, task codes) for transform, checked against the fit."""
        X = self._check_X(X)
        n = X.shape[0]
        cond = self._condition_encoder()
        cls = type(self).__name__
        if cond and self._uses_target():
            if y is None:
                raise DataError(
                    f"{cls}.transform needs y: the encoder q(z | x, u) is conditioned "
                    "on the target. Pass y of shape (n_samples,) (or fit with "
                    "condition_encoder=False to encode from X alone)."
                )
            ya = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
            if ya.ndim == 2 and ya.shape[1] == 1:
                ya = ya[:, 0]
            if ya.ndim == 2:
                raise DataError(
                    "transform takes the long layout: y of shape (n_samples,) with "
                    f"task_ids; got y of shape {ya.shape}. Convert wide data "
                    "with identrep.utils.validation.wide_to_long."
                )
            yv = check_array(ya, "y", ndim=1)
            if yv.shape != (n,):
                raise DataError(f"y must have shape ({n},) to match X; got {yv.shape}.")
        else:
            yv = np.zeros(n)
        if cond and self._task_mode() is not None:
            if task_ids is None:
                raise DataError(
                    f"{cls}.transform needs task_ids: the encoder q(z | x, u) is "
                    "conditioned on the task. Pass task_ids of shape (n_samples,) "
                    "with tasks seen in fit (or fit with condition_encoder=False)."
                )
            codes = check_task_ids(task_ids, n, self.tasks_)
        else:
            codes = np.zeros(n, dtype=np.int64)
        return X, yv, codes

    def fit_transform(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> np.ndarray:
        """``fit(X, y, task_ids=task_ids)``, then ``transform(X, y,
        task_ids=task_ids)``: the encoder gets the conditioning of fit.

        Raises
        ------
        DataError
            For a wide ``Y`` when the encoder is conditioned on u (one u per row is
            needed; encode in the long layout after fit), before fitting.
        """
        needs_u = self._condition_encoder() and (
            self._uses_target() or self._task_mode() is not None
        )
        y_shape = _shape(y)
        if needs_u and len(y_shape) == 2 and y_shape[1] > 1:
            raise DataError(
                f"{type(self).__name__}.fit_transform cannot encode a wide Y of "
                f"shape {y_shape}: the encoder q(z | x, u) needs one (y, task) per "
                "row. Call fit(X, Y), then transform(X, y, task_ids=...) in the long "
                "layout (identrep.utils.validation.wide_to_long), or use "
                "condition_encoder=False."
            )
        return super().fit_transform(X, y, task_ids=task_ids)


class TaskEmbeddingMixin:
    """The multi-task variants (MT-iVAE, MT-iCaRL): u holds a learned task embedding
    E_t in place of the one-hot task (use before the conditional estimator in the
    bases). Adds ``embedding_dim`` (default ``n_latents``), ``task_prior``
    (``"free"``: the prior has free per-task parameters and its own u = [y, task
    code], the encoder keeps u = [y, E_t]; ``"embedding"``: the prior is a
    network of the shared u = [y, E_t]) and ``whiten`` (see
    :meth:`~identrep.models.vae._base.BaseVAE._whitening`), and restricts
    ``conditioning`` to the choices that contain the task."""

    _embedding_constraints: dict[str, list] = {
        "conditioning": [StrOptions({"target+task", "task"})],
        "embedding_dim": [Interval(Integral, 1, None, closed="left"), None],
        "task_prior": [StrOptions({"free", "embedding"})],
        "whiten": [StrOptions({"zca", "pca"}), None],
    }

    def _free_task_prior(self) -> bool:
        return self.task_prior == "free"

    def _build_prior_conditioner(self, n_tasks: int, y_mean: float, y_scale: float):
        """The free prior's u = [standardised y, task code] (no parameters)."""
        return Conditioner(
            self._uses_target(),
            "index",
            n_tasks=n_tasks,
            y_mean=y_mean,
            y_scale=y_scale,
        )

    def _task_mode(self) -> str | None:
        return "embedding"

    def _embedding_dim(self) -> int:
        return int(self.n_latents if self.embedding_dim is None else self.embedding_dim)
