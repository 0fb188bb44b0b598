"""Sparse VAE: the SSL terms against closed forms, the vectorised decoder against a
per-feature loop, and the estimator (likelihoods, sparse input, errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch.distributions import Beta, Laplace

from identrep.datasets import make_sparse_factors
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models.nn.sparse_vae import MaskedFeatureDecoder
from identrep.models.vae import SparseVAE
from identrep.models.vae._elbo import bernoulli_log_prob, multinomial_log_prob
from identrep.models.vae._ssl import (
    inv_gamma_log_prob,
    noise_prior_scale,
    ssl_inclusion_probs,
    ssl_neg_log_prior,
    ssl_penalty,
    ssl_update_eta,
)

TINY = dict(n_latents=2, max_epochs=2, batch_size=32, hidden_sizes=(8, 8))


def _tol(dtype):
    if dtype == torch.float64:
        return dict(rtol=1e-5, atol=1e-7)
    return dict(rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ SSL terms
def test_estep_is_the_posterior_of_the_laplace_mixture(rng, dtype):
    W = torch.tensor(rng.normal(size=(6, 3)), dtype=dtype)
    eta = torch.tensor([0.2, 0.5, 0.9], dtype=dtype)
    lam0, lam1 = 10.0, 1.0
    slab = Laplace(0.0, 1.0 / lam1).log_prob(W).exp() * eta
    spike = Laplace(0.0, 1.0 / lam0).log_prob(W).exp() * (1 - eta)
    expect = slab / (slab + spike)
    got = ssl_inclusion_probs(W, eta, lam0, lam1)
    torch.testing.assert_close(got, expect, **_tol(dtype))


def test_legacy_estep_drops_the_constants_and_favours_the_slab(dtype):
    W = torch.tensor([[0.1, 0.3]], dtype=dtype)
    eta = torch.tensor([0.5, 0.5], dtype=dtype)
    p = ssl_inclusion_probs(W, eta, 10.0, 1.0)
    q = ssl_inclusion_probs(W, eta, 10.0, 1.0, legacy=True)
    odds = (q / (1 - q)) / (p / (1 - p))
    torch.testing.assert_close(odds, torch.full_like(odds, 10.0), **_tol(dtype))


def test_eta_update_maximises_the_expected_log_prior(rng):
    p = torch.tensor(rng.random((7, 2)), dtype=torch.float64)
    W = torch.tensor(rng.normal(size=(7, 2)), dtype=torch.float64)
    a, b = 2.0, 7.0
    eta = ssl_update_eta(p, a, b)
    torch.testing.assert_close(eta, (p.sum(0) + a - 1) / (a + b + 7 - 2))
    f0 = ssl_neg_log_prior(W, p, eta, 10.0, 1.0, a, b)
    for d in (-1e-3, 1e-3):
        assert ssl_neg_log_prior(W, p, eta + d, 10.0, 1.0, a, b) > f0


def test_neg_log_prior_against_torch_distributions_and_penalty_gradient(rng):
    W = torch.tensor(rng.normal(size=(4, 2)), dtype=torch.float64, requires_grad=True)
    p = torch.tensor(rng.random((4, 2)), dtype=torch.float64)
    eta = torch.tensor([0.3, 0.6], dtype=torch.float64)
    lam0, lam1, a, b = 10.0, 1.0, 1.5, 4.0
    expect = (
        -(
            p * (Laplace(0.0, 1 / lam1).log_prob(W) + eta.log())
            + (1 - p) * (Laplace(0.0, 1 / lam0).log_prob(W) + (1 - eta).log())
        ).sum()
        - Beta(a, b).log_prob(eta).sum()
    )
    got = ssl_neg_log_prior(W, p, eta, lam0, lam1, a, b)
    torch.testing.assert_close(got, expect)
    (g1,) = torch.autograd.grad(got, W)
    (g2,) = torch.autograd.grad(ssl_penalty(W, p, lam0, lam1), W)
    torch.testing.assert_close(g1, g2)


def test_inverse_gamma_prior_and_its_calibration():
    from scipy.stats import invgamma

    v = torch.tensor([0.3, 1.2], dtype=torch.float64)
    expect = invgamma(1.5, scale=0.7).logpdf(v.numpy()).sum()
    assert float(inv_gamma_log_prob(v, 1.5, 0.7)) == pytest.approx(expect)
    variances = np.linspace(0.5, 3.0, 50)
    beta = noise_prior_scale(variances, df=3.0)
    q = np.quantile(variances, 0.05)
    assert invgamma(1.5, scale=beta).cdf(q) == pytest.approx(0.9)


def test_bernoulli_and_multinomial_log_probs():
    from torch.distributions import Bernoulli, Multinomial

    logits = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    x = torch.tensor([[1.0, 0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(
        bernoulli_log_prob(x, logits), Bernoulli(logits=logits).log_prob(x).sum(-1)
    )
    counts = torch.tensor([[2.0, 0.0, 3.0]], dtype=torch.float64)
    full = Multinomial(5, logits=logits[0]).log_prob(counts[0])
    coef = math.lgamma(6) - math.lgamma(3) - math.lgamma(4)  # log 5! / (2! 3!)
    torch.testing.assert_close(multinomial_log_prob(counts, logits)[0], full - coef)


# -------------------------------------------------------------------- decoder
def _loop_decoder(dec: MaskedFeatureDecoder, z):
    """Reference: one pass of the shared network per feature."""
    cols = []
    for j in range(dec.n_features):
        h = dec.act(dec.first(z * dec.W[j]))
        for layer in dec.rest:
            h = dec.act(layer(h))
        cols.append(h @ dec.head_weight[j] + dec.head_bias[j])
    return torch.stack(cols, 1)


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 100])
def test_vectorised_decoder_equals_the_per_feature_loop(seed, dtype, chunk_size):
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(3, 7, (8, 5), chunk_size=chunk_size).to(dtype)
    z = torch.randn(6, 3, dtype=dtype)
    out = dec(z)
    ref = _loop_decoder(dec, z)
    torch.testing.assert_close(out, ref, **_tol(dtype))
    grads = torch.autograd.grad(out.square().sum(), list(dec.parameters()))
    refs = torch.autograd.grad(ref.square().sum(), list(dec.parameters()))
    for g, r in zip(grads, refs, strict=True):
        torch.testing.assert_close(g, r, **_tol(dtype))


def test_a_zero_mask_row_makes_its_feature_constant(seed):
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(2, 3, (4,))
    with torch.no_grad():
        dec.W[1] = 0.0
    out = dec(torch.randn(5, 2))
    assert torch.allclose(out[:, 1], out[0, 1].expand(5))


# ------------------------------------------------------------------ estimator
@pytest.fixture
def data(seed):
    return make_sparse_factors(120, random_state=seed)


def test_fit_sets_masks_inclusions_and_is_reproducible(data):
    m = SparseVAE(**TINY, random_state=0).fit(data.X)
    assert m.mask_.shape == m.inclusion_.shape == m.support_.shape == (7, 2)
    assert ((m.inclusion_ >= 0) & (m.inclusion_ <= 1)).all()
    assert m.inclusion_rates_.shape == (2,)
    np.testing.assert_array_equal(m.support_, m.inclusion_ > 0.5)
    assert m.transform(data.X).shape == (120, 2)
    again = SparseVAE(**TINY, random_state=0).fit(data.X)
    np.testing.assert_array_equal(again.transform(data.X), m.transform(data.X))
    assert np.isfinite(m.score(data.X))


def test_training_lowers_the_loss_and_runs_the_estep(data):
    m = SparseVAE(
        n_latents=2, hidden_sizes=(16, 16), max_epochs=15, random_state=0
    ).fit(data.X)
    loss = m.history_["train_loss"]
    # the warm-up (0.2 x 15 = 3 epochs, no penalty) descends the negative ELBO;
    # afterwards the E-step moves the penalty's weights, so the loss need not fall
    assert loss[2] < loss[0]
    assert np.isfinite(loss).all()
    # the last E-step was taken on the final masks
    p = ssl_inclusion_probs(
        m.module_.decoder.W.detach().double(),
        torch.as_tensor(m.inclusion_rates_),
        10.0,
        1.0,
    )
    np.testing.assert_allclose(p.numpy(), m.inclusion_, atol=0.05)


@pytest.mark.parametrize("likelihood", ["bernoulli", "categorical"])
def test_discrete_likelihoods_and_sparse_input(rng, likelihood):
    X = (rng.random((60, 9)) < 0.3).astype(float)
    if likelihood == "categorical":
        X = X * rng.integers(1, 4, size=X.shape)
    dense = SparseVAE(likelihood=likelihood, **TINY, random_state=0).fit(X)
    sparse = SparseVAE(likelihood=likelihood, **TINY, random_state=0).fit(
        sp.csr_matrix(X)
    )
    np.testing.assert_allclose(
        sparse.transform(sp.csr_matrix(X)), dense.transform(X), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(sparse.mask_, dense.mask_, rtol=1e-5, atol=1e-6)
    assert sparse.score(sp.csr_matrix(X)) == pytest.approx(dense.score(X), rel=1e-5)


def test_errors(data):
    with pytest.raises(InvalidParameterError, match="'likelihood' parameter"):
        SparseVAE(likelihood="poisson").fit(data.X)
    with pytest.raises(InvalidParameterError, match="'lambda0' parameter"):
        SparseVAE(lambda0=0.0).fit(data.X)
    m = SparseVAE(**TINY, random_state=0).fit(data.X)
    with pytest.raises(DataError, match="n_features_in_=7"):
        m.transform(sp.csr_matrix(np.ones((3, 4))))
    bad = sp.csr_matrix(np.array([[np.nan, 1.0]]))
    with pytest.raises(DataError, match="1 non-finite stored values"):
        SparseVAE(**TINY).fit(bad)


# ------------------------------------------- prior correlation, warm-up, gauge
def test_kl_to_a_correlated_prior_against_torch_distributions(rng):
    from torch.distributions import MultivariateNormal, kl_divergence

    from identrep.models.vae._ssl import kl_to_correlated_prior

    mean = torch.tensor(rng.normal(size=(5, 3)), dtype=torch.float64)
    log_var = torch.tensor(rng.normal(size=(5, 3)) * 0.3, dtype=torch.float64)
    A = torch.tensor(rng.normal(size=(3, 3)), dtype=torch.float64)
    L = torch.linalg.cholesky(A @ A.T + 0.5 * torch.eye(3, dtype=torch.float64))
    q = MultivariateNormal(mean, scale_tril=torch.diag_embed(torch.exp(0.5 * log_var)))
    p = MultivariateNormal(torch.zeros(3, dtype=torch.float64), scale_tril=L)
    torch.testing.assert_close(
        kl_to_correlated_prior(mean, log_var, L), kl_divergence(q, p)
    )


def test_learned_prior_correlation_is_a_correlation_matrix(data):
    m = SparseVAE(**TINY, prior_corr="learned", random_state=0).fit(data.X)
    L = m.module_.prior_scale_tril().detach()
    S = L @ L.T
    torch.testing.assert_close(torch.diagonal(S), torch.ones(2))
    assert SparseVAE(**TINY).fit(data.X).module_.prior_scale_tril() is None


def test_no_estep_and_no_penalty_during_the_warmup(data):
    m = SparseVAE(**TINY, ssl_warmup=1.0, random_state=0).fit(data.X)
    np.testing.assert_array_equal(m.inclusion_, np.full((7, 2), 0.5))
    np.testing.assert_array_equal(m.inclusion_rates_, [0.5, 0.5])
    after = SparseVAE(**TINY, ssl_warmup=0.5, random_state=0).fit(data.X)
    assert not np.allclose(after.inclusion_, 0.5)


def test_fixed_scale_leaves_the_masks_as_the_only_scale(seed):
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(3, 5, (8, 6), unit_first=True)
    z = torch.randn(4, 3)
    out = dec(z)
    with torch.no_grad():  # rescaling the shared weights changes nothing ...
        dec.first.weight[:, 1] *= 7.0
        dec.rest[0].weight *= 0.2
    torch.testing.assert_close(dec(z), out)
    with torch.no_grad():  # ... while the masks still scale the inputs
        dec.W[:, 1] *= 7.0
    assert not torch.allclose(dec(z), out)
    free = MaskedFeatureDecoder(3, 5, (8, 6))
    out = free(z)
    with torch.no_grad():
        free.first.weight[:, 1] *= 7.0
        free.W[:, 1] /= 7.0
    torch.testing.assert_close(free(z), out)  # the escape fix_scale removes
