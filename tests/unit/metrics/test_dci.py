"""DCI: closed forms on hand-built importance matrices, and the regressors."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.exceptions import DataError, InvalidParameterError
from identrep.metrics import dci, dci_from_importances


def test_diagonal_importances_are_perfectly_disentangled_and_complete():
    R = np.diag([3.0, 1.0, 0.5])[[2, 0, 1]]  # permuted, scaled diagonal
    out = dci_from_importances(R)
    assert out == pytest.approx({"disentanglement": 1.0, "completeness": 1.0})


def test_uniform_importances_score_zero():
    out = dci_from_importances(np.ones((4, 4)))
    assert out == pytest.approx({"disentanglement": 0.0, "completeness": 0.0})


def test_duplicated_code_keeps_d_and_halves_completeness():
    # two codes carry factor 1 equally, one code carries factor 2: each code is
    # about one factor (D = 1); factor 1 is split over two of 3 codes
    R = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    out = dci_from_importances(R)
    c1 = 1 - np.log(2) / np.log(3)  # entropy of (1/2, 1/2, 0) in base 3
    assert out["disentanglement"] == pytest.approx(1.0)
    assert out["completeness"] == pytest.approx(0.5 * c1 + 0.5 * 1.0)


def test_one_code_for_two_factors_has_zero_disentanglement_there():
    R = np.array([[1.0, 1.0], [0.0, 0.0]])  # code 2 carries nothing (weight 0)
    out = dci_from_importances(R)
    assert out["disentanglement"] == pytest.approx(0.0)
    assert out["completeness"] == pytest.approx(1.0)


def test_known_intermediate_value():
    R = np.array([[0.75, 0.25], [0.0, 1.0]])
    p = np.array([0.75, 0.25])
    d0 = 1 + (p * np.log(p)).sum() / np.log(2)
    out = dci_from_importances(R)
    assert out["disentanglement"] == pytest.approx(0.5 * d0 + 0.5 * 1.0)
    # columns: factor 1 all on code 0 (C=1), factor 2 (0.25, 1)/1.25
    q = np.array([0.2, 0.8])
    c1 = 1 + (q * np.log(q)).sum() / np.log(2)
    assert out["completeness"] == pytest.approx(0.375 * 1.0 + 0.625 * c1)


def test_invariant_to_scale_and_permutation(rng):
    R = rng.random((5, 3))
    ref = dci_from_importances(R)
    out = dci_from_importances(7.0 * R[rng.permutation(5)][:, rng.permutation(3)])
    assert out == pytest.approx(ref, rel=1e-12)


def test_importance_errors():
    with pytest.raises(DataError, match="R must be non-negative"):
        dci_from_importances(-np.eye(2))
    with pytest.raises(DataError, match="R is all zeros"):
        dci_from_importances(np.zeros((2, 2)))


@pytest.mark.parametrize("importance", ["lasso", "gbt"])
def test_identity_codes_score_near_one_rotated_codes_lower(rng, importance):
    Z = rng.standard_normal((1200, 2))
    perm_scaled = np.column_stack([3 * Z[:, 1], -Z[:, 0]])
    good = dci(Z, perm_scaled, importance=importance, n_test=1000, random_state=0)
    assert good["disentanglement"] > 0.9 and good["completeness"] > 0.9
    assert good["informativeness"] < 0.2 and good["n_test"] == 1000
    assert good["importances"].shape == (2, 2)
    c = np.sqrt(0.5)
    rotated = Z @ np.array([[c, -c], [c, c]])
    bad = dci(Z, rotated, importance=importance, n_test=1000, random_state=0)
    assert bad["disentanglement"] < 0.3


def test_dci_input_errors(rng):
    Z = rng.standard_normal((10, 2))
    with pytest.raises(DataError, match="same number of rows"):
        dci(Z, Z[:5])
    with pytest.raises(DataError, match="at least 2 training"):
        dci(Z, Z, n_test=9)
    with pytest.raises(DataError, match="all importances are 0"):
        dci(Z, np.ones((10, 2)), importance="lasso")
    with pytest.raises(InvalidParameterError, match="'importance' parameter"):
        dci(Z, Z, importance="forest")
