"""Closed-form tests of approximate joint diagonalisation (models/_ajd.py)."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.models.multitask._ajd import (
    ajd_pham,
    bounded_variance_criterion,
    minimize_unmixing,
    pham_criterion,
)


def _spd_set(rng, T, d, *, diagonalisable: bool):
    """T symmetric positive-definite matrices C_t = M D_t M^T (+ noise if not)."""
    M = rng.normal(size=(d, d))
    D = rng.uniform(0.1, 3.0, size=(T, d))
    C = np.einsum("ij,tj,kj->tik", M, D, M)
    if not diagonalisable:
        E = rng.normal(size=(T, d, d))
        C = C + 0.5 * np.einsum("tij,tkj->tik", E, E)
    return M, C


def _finite_difference(fun, B, h=1e-6):
    G = np.zeros_like(B)
    for idx in np.ndindex(*B.shape):
        E = np.zeros_like(B)
        E[idx] = h
        G[idx] = (fun(B + E)[0] - fun(B - E)[0]) / (2 * h)
    return G


def _whitened(C, w):
    """C_t -> W C_t W^T with W = Cbar^{-1/2} (the recommended pre-whitening)."""
    Cbar = np.einsum("t,tij->ij", w / w.sum(), C)
    ev, U = np.linalg.eigh(Cbar)
    W = (U / np.sqrt(ev)) @ U.T
    return W, np.einsum("ij,tjk,lk->til", W, C, W)


def _assert_scaled_permutation(P, atol):
    """Each row and column of P has exactly one dominant entry; others ~0."""
    Q = np.abs(P) / np.abs(P).max(axis=1, keepdims=True)
    big = Q > 0.5
    assert big.sum(axis=1).tolist() == [1] * len(P)
    assert big.sum(axis=0).tolist() == [1] * len(P)
    np.testing.assert_allclose(Q[~big], 0.0, atol=atol)


# ---------------------------------------------------------------- pham_criterion


def test_pham_gradient_matches_finite_differences(rng):
    _, C = _spd_set(rng, T=5, d=3, diagonalisable=False)
    w = rng.uniform(1, 5, size=5)
    B = rng.normal(size=(3, 3))
    fun = lambda B_: pham_criterion(B_, C, w)
    value, grad = fun(B)
    assert np.isfinite(value) and grad.shape == B.shape
    np.testing.assert_allclose(grad, _finite_difference(fun, B), rtol=1e-5, atol=1e-7)


def test_pham_criterion_closed_form(rng):
    M, C = _spd_set(rng, T=4, d=3, diagonalisable=True)
    w = np.ones(4)
    # zero at the exact diagonaliser, positive elsewhere (Hadamard's inequality)
    assert abs(pham_criterion(np.linalg.inv(M), C, w)[0]) < 1e-10
    B = rng.normal(size=(3, 3))
    value = pham_criterion(B, C, w)[0]
    F = np.einsum("ij,tjk,lk->til", B, C, B)
    want = np.mean([np.log(np.diag(f)).sum() - np.linalg.slogdet(f)[1] for f in F])
    np.testing.assert_allclose(value, want, rtol=1e-10)
    assert value > 0
    # invariant to permutation and scaling of the rows of B, and to the scale of w
    P = np.eye(3)[[2, 0, 1]] * np.array([[0.3], [-2.0], [5.0]])
    np.testing.assert_allclose(pham_criterion(P @ B, C, 7 * w)[0], value, rtol=1e-10)


def test_pham_criterion_singular_b_is_infinite(rng):
    _, C = _spd_set(rng, T=3, d=3, diagonalisable=True)
    B = rng.normal(size=(3, 3))
    B[2] = 0.0
    assert pham_criterion(B, C, np.ones(3))[0] == np.inf
    assert bounded_variance_criterion(B, C, np.ones(3), 0.01, 1.0)[0] == np.inf


# ---------------------------------------------------------------------- ajd_pham


@pytest.mark.parametrize("d", [2, 4, 6])
def test_ajd_pham_recovers_exact_joint_diagonaliser(rng, d):
    T = 3 * d
    M, C = _spd_set(rng, T=T, d=d, diagonalisable=True)
    w = rng.uniform(50, 150, size=T)
    W, Cw = _whitened(C, w)
    Bw, info = ajd_pham(Cw, w)
    np.testing.assert_allclose(np.linalg.norm(Bw, axis=1), 1.0, rtol=1e-12)
    assert info["criterion"] < 1e-10
    B = Bw @ W  # unmixing of the original matrices
    _assert_scaled_permutation(B @ M, atol=1e-5)
    for Ct in C:  # every B C_t B^T is diagonal
        F = B @ Ct @ B.T
        off = F - np.diag(np.diag(F))
        assert np.abs(off).max() <= 1e-6 * np.abs(np.diag(F)).max()


def test_ajd_pham_starting_point_does_not_matter(rng):
    d, T = 4, 10
    M, C = _spd_set(rng, T=T, d=d, diagonalisable=True)
    w = np.ones(T)
    W, Cw = _whitened(C, w)
    B0 = np.linalg.qr(rng.normal(size=(d, d)))[0]
    Bw, info = ajd_pham(Cw, w, B0=B0)
    assert info["criterion"] < 1e-10
    _assert_scaled_permutation(Bw @ W @ M, atol=1e-5)


def test_ajd_pham_not_diagonalisable_gives_positive_criterion(rng):
    """On matrices with no common diagonaliser the optimum is strictly positive."""
    _, C = _spd_set(rng, T=8, d=3, diagonalisable=False)
    _, Cw = _whitened(C, np.ones(8))
    _, info = ajd_pham(Cw)
    assert info["criterion"] > 1e-3


# ---------------------------------------------------- bounded_variance_criterion


def test_bounded_variance_gradient_matches_finite_differences(rng):
    d, T, lo, hi = 3, 6, 0.01, 1.0
    _, C = _spd_set(rng, T=T, d=d, diagonalisable=False)
    w = rng.uniform(1, 5, size=T)
    # scale B so that the variances (B C_t B^T)_ii fall on both sides of [lo, hi]
    B = rng.normal(size=(d, d))
    var = np.einsum("ij,tjk,ik->ti", B, C, B)
    B = B / np.sqrt(np.median(var, axis=0))[:, None] * np.array([[0.05], [1.0], [2.0]])
    var = np.einsum("ij,tjk,ik->ti", B, C, B)
    below, above = var < lo, var > hi
    assert below.any() and above.any() and (~below & ~above).any()
    fun = lambda B_: bounded_variance_criterion(B_, C, w, lo, hi)
    value, grad = fun(B)
    assert np.isfinite(value)
    np.testing.assert_allclose(grad, _finite_difference(fun, B), rtol=1e-5, atol=1e-6)


def test_bounded_variance_closed_form_and_scale(rng):
    """Equals sum_t w_t sum_i min_{v in [lo, hi]} [log v + var_ti / v] - 2 log|det B|
    (w normalised), which fixes the scale of B."""
    d, T, lo, hi = 3, 4, 0.01, 1.0
    _, C = _spd_set(rng, T=T, d=d, diagonalisable=True)
    w = np.ones(T)
    B = rng.normal(size=(d, d))
    var = np.einsum("ij,tjk,ik->ti", B, C, B)
    v = np.clip(var, lo, hi)
    want = np.mean((np.log(v) + var / v).sum(1)) - 2 * np.log(abs(np.linalg.det(B)))
    np.testing.assert_allclose(
        bounded_variance_criterion(B, C, w, lo, hi)[0], want, rtol=1e-10
    )
    # unlike Pham's criterion it depends on the scale of the rows of B ...
    S = np.diag([10.0, 1.0, 1.0])
    scaled = bounded_variance_criterion(S @ B, C, w, lo, hi)[0]
    assert abs(scaled - want) > 1e-3
    np.testing.assert_allclose(
        pham_criterion(S @ B, C, w)[0], pham_criterion(B, C, w)[0], rtol=1e-10
    )
    # ... and minimising it from B lowers it
    Bstar, _ = minimize_unmixing(
        lambda B_: bounded_variance_criterion(B_, C, w, lo, hi), B
    )
    assert bounded_variance_criterion(Bstar, C, w, lo, hi)[0] < want - 1e-3
