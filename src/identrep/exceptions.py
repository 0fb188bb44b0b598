"""Every exception and warning identrep raises.

Each error is also the built-in (or scikit-learn) exception a caller would catch
without knowing identrep: :class:`NotFittedError` is scikit-learn's, a
:class:`DataError` or :class:`InvalidParameterError` is a ``ValueError``.
"""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = [
    "CheckpointError",
    "ConvergenceWarning",
    "DataError",
    "InvalidParameterError",
    "ModelFileError",
    "NotFittedError",
]


class NotFittedError(_SklearnNotFittedError):
    """Raised when a fitted attribute or ``transform`` is used before ``fit``.

    A subclass of :class:`sklearn.exceptions.NotFittedError` (itself a ``ValueError``
    and an ``AttributeError``), so scikit-learn's tools and ``except`` clauses that
    expect it catch it too.
    """


class DataError(ValueError):
    """Raised for malformed input data (shape, NaN/inf, task ids, degenerate tasks)."""


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter outside its declared constraints.

    Raised by ``fit`` (never by ``__init__``) with a message naming the parameter,
    the estimator, what is allowed and what came. A ``ValueError`` and a
    ``TypeError``, as scikit-learn's own ``InvalidParameterError``.
    """


class ModelFileError(ValueError):
    """A saved model is missing a part, corrupt, foreign, or of an unknown class."""


class ConvergenceWarning(UserWarning):
    """Warned when an optimiser stops before meeting its tolerance."""


class CheckpointError(ValueError):
    """A training checkpoint is unreadable, not a checkpoint, or of another run."""
