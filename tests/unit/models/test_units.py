"""Every torch estimator's result does not depend on the units or offset of X and y.

The inputs (and a conditioning target) are standardised in float64 inside the
module before its float32 layers (:class:`~identrep.models.nn.mlp.Standardize`),
so rescaling X and y by any factor a float64 holds (1e-300 ... 1e300) and shifting
them by 1e8 of their own scale leaves the learned representation unchanged up to
round-off. Before, X was cast to float32 first: an offset of 1e8 erased the
signal (relative change of the representation 0.7-1.0) and 1e300 overflowed (NaN
loss). MTLCM and the two-stage pipeline are covered by the MTLCM tests.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import identrep as ir
from identrep.datasets import make_nonlinear_tasks

_BUDGET = {"max_epochs": 3}
ESTIMATORS = {
    "MTRN": lambda s: ir.MTRN(n_latents=3, random_state=s, **_BUDGET),
    "BilevelSparseMTL": lambda s: ir.BilevelSparseMTL(
        n_latents=3, random_state=s, **_BUDGET
    ),
    "RidgeICA": lambda s: ir.RidgeICA(n_latents=3, random_state=s, **_BUDGET),
    "VAE": lambda s: ir.VAE(n_latents=3, random_state=s, **_BUDGET),
    "BetaVAE": lambda s: ir.BetaVAE(n_latents=3, random_state=s, **_BUDGET),
    "SparseVAE": lambda s: ir.SparseVAE(n_latents=3, random_state=s, **_BUDGET),
    "IVAE": lambda s: ir.IVAE(n_latents=3, random_state=s, **_BUDGET),
    "MTIVAE": lambda s: ir.MTIVAE(n_latents=3, random_state=s, **_BUDGET),
    "ICaRL": lambda s: ir.ICaRL(n_latents=3, random_state=s, **_BUDGET),
    "MTICaRL": lambda s: ir.MTICaRL(n_latents=3, random_state=s, **_BUDGET),
    "VSC": lambda s: ir.VSC(n_latents=3, random_state=s, **_BUDGET),
    "OIVAE": lambda s: ir.OIVAE(n_latents=3, random_state=s, **_BUDGET),
}
# (scale of X, offset of X, scale of y, offset of y)
UNITS = {
    "tiny X, huge y": (1e-300, 0.0, 1e300, 0.0),
    "huge X, tiny y": (1e300, 0.0, 1e-300, 0.0),
    "offset 1e8": (1.0, 1e8, 1.0, 1e8),
    "1e20 units, offset 1e28": (1e20, 1e28, 1e-20, -1e-12),
}


def test_every_torch_estimator_is_listed():
    not_torch = {"MTLCM", "TaskIdentifiable", "NMF", "LDA"}
    torch_models = set(ir.models.__all__) - not_torch
    assert set(ESTIMATORS) == torch_models


def _latents(make, seed, data, a, b, c, e):
    X, y = data.X * a + b, data.y * c + e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny budgets: under-fitting warnings
        model = make(seed).fit(X, y, task_ids=data.task_ids)
    if isinstance(model, ir.RidgeICA):
        # the network's features: FastICA after a 3-epoch fit meets nearly
        # Gaussian features, whose rotation round-off alone may change
        return ir.MTRN.transform(model, X)
    try:
        return model.transform(X, y, task_ids=data.task_ids)
    except TypeError:  # transform(X) only
        return model.transform(X)


def _aligned(Z, ref):
    """Z with its columns permuted and signed to match ref (ICA's order and signs
    may flip under round-off)."""
    from scipy.optimize import linear_sum_assignment

    d = ref.shape[1]
    C = np.corrcoef(ref.T, Z.T)[:d, d:]
    rows, cols = linear_sum_assignment(-np.abs(C))
    return Z[:, cols] * np.sign(C[rows, cols])


@pytest.fixture(scope="module")
def data():
    return make_nonlinear_tasks(
        n_tasks=20,
        n_samples=40,
        n_latents=3,
        n_causal=1,
        n_observed=6,
        random_state=0,
    )


_REFERENCE: dict = {}  # (name, seed) -> latents in the original units


@pytest.mark.parametrize("units", list(UNITS), ids=list(UNITS))
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_representation_does_not_depend_on_units(name, units, data, seed):
    make = ESTIMATORS[name]
    if (name, seed) not in _REFERENCE:
        _REFERENCE[name, seed] = _latents(make, seed, data, 1.0, 0.0, 1.0, 0.0)
    ref = _REFERENCE[name, seed]
    Z = _latents(make, seed, data, *UNITS[units])
    assert np.isfinite(Z).all()
    rel = np.abs(_aligned(Z, ref) - ref).max() / np.abs(ref).max()
    # round-off of the shifted inputs only: max over seeds 0-9 and these cases
    # 0.0057 (RidgeICA features, offset 1e8), margin 3.5x; before the fix 0.71-14
    # or a NaN loss
    assert rel < 0.02, f"{name}: the representation changed by {rel:.3g}"


@pytest.mark.parametrize("name", ["MTRN", "VAE", "MTIVAE"])
def test_inputs_far_outside_the_training_range_give_finite_outputs(name, data):
    model = ESTIMATORS[name](0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(data.X, data.y, task_ids=data.task_ids)
    for X in (data.X * 1e40, -data.X * 1e300):
        try:
            Z = model.transform(X, data.y, task_ids=data.task_ids)
        except TypeError:
            Z = model.transform(X)
        assert np.isfinite(Z).all()  # before: NaN (float32 overflow)


def test_mtrn_predictions_follow_the_units_of_y(data, seed):
    fits = []
    for c, e in ((1.0, 0.0), (1e250, -3e251)):
        m = ESTIMATORS["MTRN"](seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(data.X + 1e9, data.y * c + e, task_ids=data.task_ids)
        fits.append((m.predict(data.X + 1e9, data.task_ids) - e) / c)
    np.testing.assert_allclose(fits[1], fits[0], rtol=0, atol=1e-4 * np.ptp(fits[0]))
