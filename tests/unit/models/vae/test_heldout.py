"""Held-out NLL of the unconditional VAEs (VAE, beta-VAE, VSC, OI-VAE): the
one-draw importance weight is an unbiased estimate of the negative ELBO, the bound
tightens with more draws, and Gaussian NLLs are in the units of X."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from identrep.models.vae import OIVAE, VAE, VSC, BetaVAE
from identrep.models.vae._elbo import VAEBatch, neg_elbo_loss
from identrep.utils.seeding import seeded

FAST = dict(n_latents=2, max_epochs=5, batch_size=32, hidden_sizes=(8,), random_state=0)


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return rng.normal(size=(150, 2)) @ rng.normal(size=(2, 5)) + 0.3 * rng.normal(
        size=(150, 5)
    )


def test_one_draw_bound_is_the_negative_elbo_in_expectation(X):
    # E_q[-log w] = -E_q[log p(x | z)] + KL(q || p): the estimator's analytic-KL
    # loss (standardised units) plus the standardisation's log-Jacobian
    m = VAE(decoder_var=0.5, **FAST).fit(X)
    rows = X[:40]
    iw = np.array(
        [m.heldout_nll(rows, n_particles=1, random_state=s) for s in range(200)]
    )
    x = torch.tensor(rows)
    batch = VAEBatch(
        x, torch.zeros(40, dtype=torch.float64), torch.zeros(40, dtype=torch.int64)
    )
    with torch.no_grad():
        ne = []
        for s in range(200):
            with seeded(1000 + s):
                ne.append(float(neg_elbo_loss(m.module_, batch)[0]))
    ne = np.array(ne) + float(torch.log(m.module_.standardize.scale).sum())
    se = math.sqrt(iw.var() / len(iw) + ne.var() / len(ne))
    assert abs(iw.mean() - ne.mean()) < 5 * se, (iw.mean(), ne.mean(), se)


@pytest.mark.parametrize("cls", [VAE, BetaVAE, VSC, OIVAE])
def test_more_draws_tighten_the_bound(cls, X):
    m = cls(**FAST).fit(X)
    one = np.mean([m.heldout_nll(X, n_particles=1, random_state=s) for s in range(5)])
    many = m.heldout_nll(X, n_particles=64)
    assert many < one
    assert m.score(X) == pytest.approx(-m.heldout_nll(X, n_particles=1))


@pytest.mark.parametrize("cls", [VAE, OIVAE])
def test_gaussian_nll_is_in_the_units_of_x(cls, X):
    a, b = cls(**FAST).fit(X), cls(**FAST).fit(X * 100.0 + 7.0)
    shift = 5 * math.log(100.0)
    assert b.heldout_nll(X * 100.0 + 7.0) == pytest.approx(
        a.heldout_nll(X) + shift, rel=1e-4
    )
    assert b.heldout_nll(X * 100.0 + 7.0, n_particles=4) == pytest.approx(
        a.heldout_nll(X, n_particles=4) + shift, rel=1e-4
    )


def test_laplace_prior_is_used(X):
    g = VAE(**FAST).fit(X)
    lap = VAE(prior="laplace", **FAST).fit(X)
    assert np.isfinite(lap.heldout_nll(X, n_particles=8))
    assert lap.heldout_nll(X, n_particles=8) != g.heldout_nll(X, n_particles=8)
