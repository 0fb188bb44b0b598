"""Declared hyperparameter constraints, checked once at ``fit``.

Every estimator declares ``_parameter_constraints``: a dict from each ``__init__``
parameter to a list of allowed constraints, any one of which suffices (as
scikit-learn's ``_parameter_constraints``). The base class checks them at the start
of ``fit``, so every estimator words the same error the same way::

    The 'lr' parameter of MTRN must be a float in the range (0.0, inf); got -1.0.

A constraint is one of

* an :class:`Interval` (``Integral`` or ``Real``; ``bool`` is never a number, NaN
  never inside),
* :class:`StrOptions` / :class:`Options` (a fixed set of values),
* :class:`SequenceOf` (a non-string sequence whose items meet a constraint),
* ``None`` (the value ``None``), or one of the strings ``"boolean"``,
  ``"random_state"``, ``"callable"``, ``"device"``, ``"dtype"``,
* a type (``isinstance``).

Functions (the ``make_*`` processes) use the :func:`validate_params` decorator with
the same constraints.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import Any

import numpy as np

from identrep.exceptions import InvalidParameterError

__all__ = [
    "Interval",
    "Options",
    "SequenceOf",
    "StrOptions",
    "make_constraint",
    "validate_parameter_constraints",
    "validate_params",
]


class _Constraint:
    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


class Interval(_Constraint):
    """A number in an interval.

    Parameters
    ----------
    type : {numbers.Integral, numbers.Real}
        ``Integral`` accepts Python and numpy integers; ``Real`` accepts any real
        number (integers too). Booleans are rejected by both.
    left, right : float or None
        Bounds; ``None`` is unbounded on that side.
    closed : {"left", "right", "both", "neither"}
        Which bounds belong to the interval.
    """

    def __init__(self, type, left, right, *, closed: str):
        if type not in (Integral, Real):
            raise ValueError(f"Interval type must be Integral or Real; got {type!r}.")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be left/right/both/neither; got {closed!r}.")
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, self.type):
            return False
        if isinstance(value, Real) and math.isnan(float(value)):
            return False
        lo_ok = (
            self.left is None
            or value > self.left
            or (value == self.left and self.closed in ("left", "both"))
        )
        hi_ok = (
            self.right is None
            or value < self.right
            or (value == self.right and self.closed in ("right", "both"))
        )
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        kind = "an int" if self.type is Integral else "a float"
        lb = "[" if self.closed in ("left", "both") and self.left is not None else "("
        rb = "]" if self.closed in ("right", "both") and self.right is not None else ")"
        lo = "-inf" if self.left is None else self.left
        hi = "inf" if self.right is None else self.right
        return f"{kind} in the range {lb}{lo}, {hi}{rb}"


class Options(_Constraint):
    """One of a fixed set of values of a given type."""

    def __init__(self, type, options: Iterable):
        self.type, self.options = type, tuple(options)

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, self.type) and value in self.options

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)


class StrOptions(Options):
    """One of a fixed set of strings."""

    def __init__(self, options: Iterable[str]):
        super().__init__(str, sorted(options))

    def __str__(self) -> str:
        return "a str among {" + ", ".join(repr(o) for o in self.options) + "}"


class SequenceOf(_Constraint):
    """A non-empty list/tuple (not a string) whose every item meets ``item``."""

    def __init__(self, item: Any, *, allow_empty: bool = False):
        self.item, self.allow_empty = make_constraint(item), allow_empty

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return False
        if not value and not self.allow_empty:
            return False
        return all(self.item.is_satisfied_by(v) for v in value)

    def __str__(self) -> str:
        return f"a sequence of {self.item}"


class _NoneConstraint(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


class _Boolean(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def __str__(self) -> str:
        return "a bool"


class _RandomState(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        if value is None or isinstance(
            value, (np.random.Generator, np.random.SeedSequence)
        ):
            return True
        return Interval(Integral, 0, None, closed="left").is_satisfied_by(value)

    def __str__(self) -> str:
        return "None, a non-negative int, a numpy Generator or a SeedSequence"


class _Callable(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        return callable(value)

    def __str__(self) -> str:
        return "a callable"


class _Device(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str):
            import torch

            try:
                torch.device(value)
            except RuntimeError:
                return value == "auto"
            return True
        return type(value).__name__ == "device" and hasattr(value, "type")

    def __str__(self) -> str:
        return "a torch device or its name ('cpu', 'cuda', 'cuda:1', 'auto')"


class _DType(_Constraint):
    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str):
            return value in ("float32", "float64")
        import torch

        return value in (torch.float32, torch.float64)

    def __str__(self) -> str:
        return "'float32' or 'float64' (or the torch dtype)"


class _InstanceOf(_Constraint):
    def __init__(self, type):
        self.type = type

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, self.type)

    def __str__(self) -> str:
        return f"an instance of {self.type.__name__}"


_NAMED = {
    "boolean": _Boolean,
    "random_state": _RandomState,
    "callable": _Callable,
    "device": _Device,
    "dtype": _DType,
}


def make_constraint(spec: Any) -> _Constraint:
    """The constraint object for a declaration (see the module docstring)."""
    if isinstance(spec, _Constraint):
        return spec
    if spec is None:
        return _NoneConstraint()
    if isinstance(spec, str):
        if spec not in _NAMED:
            raise ValueError(f"Unknown constraint {spec!r}; known: {sorted(_NAMED)}.")
        return _NAMED[spec]()
    if isinstance(spec, type):
        return _InstanceOf(spec)
    raise TypeError(f"Cannot make a constraint from {spec!r}.")


def _describe(constraints: list[_Constraint]) -> str:
    parts = [str(c) for c in constraints]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def validate_parameter_constraints(
    parameter_constraints: dict[str, list], params: dict[str, Any], caller_name: str
) -> None:
    """Check every parameter in ``params`` that has declared constraints.

    Raises
    ------
    InvalidParameterError
        For the first parameter that meets none of its constraints, naming the
        parameter, the caller, what is allowed and the value that came.
    """
    for name, value in params.items():
        if name not in parameter_constraints:
            continue
        declared = parameter_constraints[name]
        if declared == "no_validation":
            continue
        constraints = [make_constraint(c) for c in declared]
        if any(c.is_satisfied_by(value) for c in constraints):
            continue
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller_name} must be "
            f"{_describe(constraints)}; got {value!r}."
        )


def validate_params(parameter_constraints: dict[str, list]) -> Callable:
    """Decorator: check a function's arguments against declared constraints."""

    def decorator(func: Callable) -> Callable:
        sig = inspect.signature(func)
        unknown = set(parameter_constraints) - set(sig.parameters)
        if unknown:
            raise ValueError(f"Constraints for unknown parameters {sorted(unknown)}.")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            validate_parameter_constraints(
                parameter_constraints, bound.arguments, f"{func.__name__}()"
            )
            return func(*args, **kwargs)

        return wrapper

    return decorator
