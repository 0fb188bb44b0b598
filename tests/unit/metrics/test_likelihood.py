"""Held-out NLLs against scipy's densities and an exact importance-sampling case."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from identrep.exceptions import DataError, InvalidParameterError
from identrep.metrics import importance_weighted_nll, reconstruction_nll

RNG = np.random.default_rng(0)


def test_gaussian_matches_scipy():
    X, M = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 4))
    var = RNG.uniform(0.2, 2.0, size=4)
    want = -stats.norm.logpdf(X, M, np.sqrt(var)).sum(axis=1)
    got = reconstruction_nll(X, M, var=var, per_row=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert reconstruction_nll(X, M, var=var) == pytest.approx(want.mean())


def test_bernoulli_matches_scipy():
    X = (RNG.uniform(size=(5, 3)) < 0.5).astype(float)
    P = RNG.uniform(0.05, 0.95, size=(5, 3))
    want = -stats.bernoulli.logpmf(X, P).sum(axis=1).mean()
    assert reconstruction_nll(X, P, likelihood="bernoulli") == pytest.approx(want)


def test_multinomial_is_scipy_without_the_count_coefficient():
    X = RNG.integers(0, 5, size=(4, 6)).astype(float)
    P = RNG.dirichlet(np.ones(6), size=4)
    n = X.sum(axis=1)
    coef = gammaln(n + 1) - gammaln(X + 1).sum(axis=1)
    want = -(stats.multinomial.logpmf(X, n, P) - coef)
    got = reconstruction_nll(X, P, likelihood="multinomial", per_row=True)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_importance_weighting_is_exact_with_the_true_posterior():
    # z ~ N(0, 1), x | z ~ N(z, 1): p(x) = N(0, 2), p(z | x) = N(x / 2, 1 / 2).
    # Drawing z from the true posterior makes every weight equal p(x).
    x = RNG.normal(size=(8, 1)) * np.sqrt(2.0)
    z = x / 2 + np.sqrt(0.5) * RNG.normal(size=(8, 16))
    logw = (
        stats.norm.logpdf(x, z, 1.0)
        + stats.norm.logpdf(z)
        - stats.norm.logpdf(z, x / 2, np.sqrt(0.5))
    )
    want = -stats.norm.logpdf(x[:, 0], 0.0, np.sqrt(2.0))
    np.testing.assert_allclose(importance_weighted_nll(logw, per_row=True), want)


def test_importance_bound_tightens_the_elbo():
    # Jensen: -log mean exp(l) <= mean(-l); equality only for constant weights
    L = np.log([[0.2, 0.6], [0.5, 0.5]])
    rows = importance_weighted_nll(L, per_row=True)
    np.testing.assert_allclose(rows, [-np.log(0.4), -np.log(0.5)])
    assert importance_weighted_nll(L, n_particles=1) == pytest.approx(
        -(np.log(0.2) + np.log(0.5)) / 2
    )
    assert importance_weighted_nll(L) <= importance_weighted_nll(L, n_particles=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(), "var is required"),
        (dict(var=np.zeros(2)), "var must be positive"),
        (dict(params=np.zeros((2, 3)), var=1.0), "params must have the shape of X"),
        (dict(likelihood="bernoulli", params=np.full((2, 2), 2.0)), "probabilities"),
        (
            dict(likelihood="multinomial", params=np.full((2, 2), 0.4)),
            "rows sum to 1; row 0 sums to 0.8",
        ),
    ],
)
def test_bad_input_is_named(kwargs, match):
    args = dict(X=np.ones((2, 2)), params=np.full((2, 2), 0.5)) | kwargs
    with pytest.raises(DataError, match=match):
        reconstruction_nll(**args)


def test_bad_options():
    with pytest.raises(InvalidParameterError, match="'likelihood' parameter"):
        reconstruction_nll(np.ones((1, 1)), np.ones((1, 1)), likelihood="poisson")
    with pytest.raises(DataError, match="n_particles=3 exceeds the 2 columns"):
        importance_weighted_nll(np.zeros((1, 2)), n_particles=3)
