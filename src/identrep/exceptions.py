"""Exceptions and warnings raised by identrep."""

from __future__ import annotations

__all__ = ["ConvergenceWarning", "DataError", "NotFittedError"]


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute or ``transform`` is used before ``fit``."""


class DataError(ValueError):
    """Raised for malformed input data (shape, NaN/inf, task ids, degenerate tasks)."""


class ConvergenceWarning(UserWarning):
    """Warned when an optimiser stops before meeting its tolerance."""
