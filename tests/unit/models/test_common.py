"""Checks every estimator shares (the base class's contract, DESIGN.md section 3).

* every ``__init__`` parameter has declared constraints, and no constraint names a
  parameter that does not exist;
* every hyperparameter set to a value of the wrong kind is refused by ``fit`` with
  the one wording of :class:`~identrep.exceptions.InvalidParameterError`, naming the
  parameter and the estimator, before any data is touched;
* ``transform`` before ``fit`` raises identrep's ``NotFittedError``, which is also
  scikit-learn's.

The scikit-learn estimator checks (``parametrize_with_checks``) live beside each
family's tests, with their exemptions listed there one by one.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import sklearn.exceptions
from sklearn.base import clone

import identrep as ir
from identrep.exceptions import InvalidParameterError, NotFittedError

ESTIMATORS = [getattr(ir, name) for name in ir.models.__all__]


class _Wrong:
    """A value no constraint accepts (not a number, string, bool, callable or None)."""

    def __repr__(self) -> str:
        return "<wrong>"


def _init_params(cls) -> set[str]:
    sig = inspect.signature(cls.__init__)
    return {n for n in sig.parameters if n != "self"}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_has_declared_constraints(cls):
    declared = set(cls._parameter_constraints)
    params = _init_params(cls)
    assert params - declared == set(), f"{cls.__name__}: undeclared {params - declared}"
    assert declared - params == set(), f"{cls.__name__}: unknown {declared - params}"


def _cases():
    for cls in ESTIMATORS:
        for name in sorted(_init_params(cls)):
            if cls._parameter_constraints.get(name) == "no_validation":
                continue
            yield pytest.param(cls, name, id=f"{cls.__name__}-{name}")


@pytest.mark.parametrize(("cls", "name"), list(_cases()))
def test_fit_refuses_a_wrong_hyperparameter_with_one_wording(cls, name):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 3)), rng.standard_normal(40)
    task_ids = np.repeat([0, 1], 20)
    est = cls().set_params(**{name: _Wrong()})
    msg = rf"The '{name}' parameter of {cls.__name__} must be .*; got <wrong>\."
    with pytest.raises(InvalidParameterError, match=msg):
        est.fit(X, y, task_ids=task_ids)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_transform_before_fit_raises_sklearns_not_fitted_error(cls):
    est = clone(cls())
    with pytest.raises(NotFittedError, match="not fitted yet"):
        est.transform(np.zeros((3, 3)))
    assert issubclass(NotFittedError, sklearn.exceptions.NotFittedError)


def test_the_deprecated_baselines_module_warns_and_re_exports():
    import importlib
    import sys

    sys.modules.pop("identrep.models.baselines", None)
    with pytest.warns(DeprecationWarning, match="identrep.models.vae"):
        baselines = importlib.import_module("identrep.models.baselines")
    assert baselines.IVAE is ir.IVAE and baselines.MTICaRL is ir.MTICaRL
