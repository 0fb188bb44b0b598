"""Variational sparse coding: the spike-and-slab KL against torch.distributions and
a Monte Carlo oracle, the relaxed selector, the schedules, the held-out NLL and the
estimator's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Bernoulli, Normal, kl_divergence

from identrep.exceptions import InvalidParameterError
from identrep.models.vae import VSC
from identrep.models.vae._vsc_loss import (
    spike_slab_kl,
    spike_slab_log_ratio,
    spike_slab_sample,
)
from identrep.models.vae.vsc import VSCObjective

FAST = dict(n_latents=2, max_epochs=3, batch_size=32, hidden_sizes=(8,), random_state=0)


def _params(dtype, n=4, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(n, k, generator=g, dtype=dtype)
    log_var = 0.5 * torch.randn(n, k, generator=g, dtype=dtype)
    logits = 2.0 * torch.randn(n, k, generator=g, dtype=dtype)
    return mean, log_var, logits


def test_kl_is_bernoulli_kl_plus_gamma_times_gaussian_kl(dtype):
    mean, log_var, logits = _params(dtype)
    alpha = 0.2
    gamma = torch.sigmoid(logits)
    bern = kl_divergence(
        Bernoulli(probs=gamma), Bernoulli(probs=torch.full_like(gamma, alpha))
    )
    gauss = kl_divergence(
        Normal(mean, torch.exp(0.5 * log_var)), Normal(torch.zeros_like(mean), 1.0)
    )
    want = (bern + gamma * gauss).sum(-1)
    rtol = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(
        spike_slab_kl(mean, log_var, logits, alpha), want, rtol=rtol, atol=rtol
    )


def test_kl_matches_a_monte_carlo_estimate_from_exact_draws():
    # E_q[log q(z) - log p(z)] with exact spike-and-slab draws and the densities
    # w.r.t. Lebesgue + atom at 0 (spike_slab_log_ratio); 5 standard errors
    mean, log_var, logits = _params(torch.float64, n=3, k=2, seed=1)
    alpha, S = 0.3, 200_000
    g = torch.Generator().manual_seed(0)
    eps = torch.randn(S, *mean.shape, generator=g, dtype=torch.float64)
    u = torch.rand(S, *mean.shape, generator=g, dtype=torch.float64)
    active = u < torch.sigmoid(logits)
    z = torch.where(active, mean + torch.exp(0.5 * log_var) * eps, 0.0)
    samples = -spike_slab_log_ratio(z, active, mean, log_var, logits, alpha)
    est, se = samples.mean(0), samples.std(0) / math.sqrt(S)
    exact = spike_slab_kl(mean, log_var, logits, alpha)
    assert ((est - exact).abs() < 5 * se).all(), (est, exact, se)


def test_kl_is_zero_when_the_posterior_is_the_prior():
    alpha = 0.25
    logits = torch.full((2, 3), math.log(alpha / (1 - alpha)), dtype=torch.float64)
    zeros = torch.zeros(2, 3, dtype=torch.float64)
    torch.testing.assert_close(
        spike_slab_kl(zeros, zeros, logits, alpha), torch.zeros(2, dtype=torch.float64)
    )


def test_sharp_selector_is_a_bernoulli_indicator():
    k, S = 3, 100_000
    logits = torch.tensor([[-1.5, 0.0, 2.0]], dtype=torch.float64).expand(S, k)
    mean = torch.full((S, k), 3.0, dtype=torch.float64)
    log_var = torch.full((S, k), -8.0, dtype=torch.float64)
    torch.manual_seed(0)
    z = spike_slab_sample(mean, log_var, logits, c=1e4)
    on = z.abs() > 1.5  # above half the slab value
    # active with probability gamma: binomial standard error <= 0.0016, 0.01 is 6 SE
    np.testing.assert_allclose(on.double().mean(0), torch.sigmoid(logits[0]), atol=0.01)
    # the relaxation leaves intermediate values only where |u - (1 - gamma)| <
    # ~3.4 / c (selector in (0.03, 0.97)): about 0.07% of draws at c = 1e4
    between = ((z.abs() > 0.1) & ((z - 3.0).abs() > 0.1)).double().mean()
    assert between < 0.005
    torch.manual_seed(0)
    binary = spike_slab_sample(mean, log_var, logits, c=1e4, slab_weight=0.0)
    near = (binary.abs() < 0.05) | ((binary - 1.0).abs() < 0.05)
    assert near.double().mean() > 0.995


def test_schedules():
    obj = VSCObjective(
        VSC(max_epochs=11, c_start=50.0, c_end=200.0, warmup_start=0.2, warmup_end=0.6)
    )
    cs, ws = zip(*(obj.schedule(e) for e in range(11)), strict=True)
    np.testing.assert_allclose(cs, np.linspace(50.0, 200.0, 11))
    # warm-up from epoch 2.2 to 6.6 (fractions of 11 epochs)
    np.testing.assert_allclose(
        ws, [0, 0, 0, 0.8 / 4.4, 1.8 / 4.4, 2.8 / 4.4, 3.8 / 4.4, 1, 1, 1, 1]
    )


def test_validation_uses_the_final_schedule():
    obj = VSCObjective(VSC(max_epochs=10))
    assert obj.schedule(0) == (50.0, 0.0)
    assert obj.schedule(9) == (200.0, 1.0)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
def test_fit_and_heldout_nll(likelihood, rng):
    X = (rng.uniform(size=(150, 6)) < 0.4).astype(float)
    if likelihood == "categorical":
        X = X * rng.integers(1, 4, size=X.shape)
    m = VSC(likelihood=likelihood, **FAST).fit(X)
    assert m.transform(X).shape == (150, 2)
    g = m.spike_probabilities(X)
    assert ((g > 0) & (g < 1)).all()
    rec = m.heldout_nll(X)
    assert rec == m.heldout_nll(X)  # seeded draws: same number
    iw1, iw20 = m.heldout_nll(X, n_particles=1), m.heldout_nll(X, n_particles=20)
    assert np.isfinite([rec, iw1, iw20]).all()
    # the bound tightens with more particles (a large margin at this size)
    assert iw20 < iw1
    assert m.score(X) == pytest.approx(-iw1)


def test_gaussian_heldout_nll_is_in_the_units_of_x(rng):
    X = rng.normal(size=(120, 4))
    a = VSC(**FAST).fit(X)
    b = VSC(**FAST).fit(X * 10.0)
    # same fit on standardised data; raw-scale NLL shifts by 4 log 10 per row
    assert b.heldout_nll(X * 10.0) == pytest.approx(
        a.heldout_nll(X) + 4 * math.log(10.0), rel=1e-4
    )


def test_warmup_order_is_checked():
    msg = r"The 'warmup_end' parameter of VSC must be at least warmup_start"
    with pytest.raises(InvalidParameterError, match=msg):
        VSC(warmup_start=0.5, warmup_end=0.2).fit(np.zeros((4, 2)))
    with pytest.raises(InvalidParameterError, match=r"'alpha' parameter of VSC"):
        VSC(alpha=1.0).fit(np.zeros((4, 2)))
    with pytest.raises(InvalidParameterError, match="n_particles"):
        VSC(**FAST).fit(np.ones((10, 2)) + np.arange(10)[:, None]).heldout_nll(
            np.ones((2, 2)), n_particles=0
        )
