"""Held-out likelihoods and reconstructions of the Sparse VAE (through the VAE
family's HeldoutNLLMixin): closed forms with a decoder that ignores z, the
importance-weighted bound tightening with draws, the learned prior correlation,
and sparse rows equal to dense ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.special import log_softmax, softmax

from identrep.models.vae import SparseVAE
from identrep.models.vae._heldout import _correlated_gaussian_log_prob

TINY = dict(n_latents=2, hidden_sizes=(8, 8), max_epochs=3, batch_size=32)


def _counts(seed=0, n=80, p=10):
    rng = np.random.default_rng(seed)
    return rng.poisson(2.0, size=(n, p)).astype(float)


def _constant_heads(est, bias) -> None:
    """Per-feature heads a_j = 0, c_j = bias_j: outputs that ignore z."""
    dec = est.module_.decoder
    with torch.no_grad():
        dec.head_weight.zero_()
        dec.head_bias.copy_(torch.as_tensor(bias, dtype=dec.head_bias.dtype))


def test_categorical_heldout_nll_and_reconstruct_in_closed_form():
    """Logits b whatever z: NLL = -mean_i sum_j x_ij log softmax(b)_j and every
    reconstruction is softmax(b), from dense or sparse rows."""
    X = _counts()
    est = SparseVAE(likelihood="categorical", **TINY, random_state=0).fit(X)
    b = np.linspace(-1.0, 1.5, X.shape[1])
    _constant_heads(est, b)
    want = -(X * log_softmax(b)).sum(1).mean()
    assert est.heldout_nll(X) == pytest.approx(want, rel=1e-6)
    assert est.heldout_nll(sp.csr_matrix(X)) == pytest.approx(want, rel=1e-6)
    R = est.reconstruct(sp.csr_matrix(X))
    assert R.shape == X.shape and R.dtype == np.float64
    np.testing.assert_allclose(R, np.broadcast_to(softmax(b), X.shape), rtol=1e-6)


def test_gaussian_heldout_nll_is_in_the_units_of_x():
    """Means c_j on standardised features and fixed variance v: on the raw
    features the mean is c_j s_j + m_j and the variance v s_j^2, so the NLL is
    the Gaussian one in X's units (the standardisation's Jacobian included)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 5)) * [1.0, 10.0, 0.1, 3.0, 50.0] + 20.0
    est = SparseVAE(decoder_var=0.5, **TINY, random_state=0).fit(X)
    c = np.linspace(-0.5, 0.5, 5)
    _constant_heads(est, c)
    m, s = X.mean(0), X.std(0)
    mean, var = c * s + m, 0.5 * s**2
    want = (0.5 * (np.log(2 * np.pi * var) + (X - mean) ** 2 / var)).sum(1).mean()
    assert est.heldout_nll(X) == pytest.approx(want, rel=1e-5)
    np.testing.assert_allclose(est.reconstruct(X), np.tile(mean, (60, 1)), rtol=1e-5)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "categorical"])
def test_more_draws_tighten_the_bound(likelihood, seed):
    X = _counts(seed)
    if likelihood == "bernoulli":
        X = (X > 2).astype(float)
    est = SparseVAE(likelihood=likelihood, **TINY, random_state=seed).fit(X)
    one = np.mean([est.heldout_nll(X, n_particles=1, random_state=s) for s in range(8)])
    many = est.heldout_nll(X, n_particles=64)
    # log-mean-exp of 64 weights >= mean of one-draw log weights (Jensen), and
    # strictly here: the posterior is not exact after 3 epochs
    assert many < one
    assert est.score(X) == pytest.approx(-est.heldout_nll(X, n_particles=1))
    # the same seed gives the same number
    assert est.heldout_nll(X, random_state=3) == est.heldout_nll(X, random_state=3)


def test_learned_prior_correlation_enters_the_bound():
    X = _counts()
    est = SparseVAE(prior_corr="learned", **TINY, random_state=0).fit(X)
    L = est.module_.prior_scale_tril()
    with torch.no_grad():  # a correlation far from the identity
        est.module_.prior_tril_raw.copy_(torch.tensor([[1.0, 0.0], [0.9, 0.3]]))
    assert not torch.allclose(est.module_.prior_scale_tril(), L)
    a = est.heldout_nll(X, n_particles=4)
    with torch.no_grad():
        est.module_.prior_tril_raw.copy_(torch.eye(2))
    b = est.heldout_nll(X, n_particles=4)
    assert np.isfinite(a) and np.isfinite(b) and a != b


def test_correlated_prior_log_density_is_the_multivariate_normal(dtype):
    g = torch.Generator().manual_seed(0)
    raw = torch.tril(torch.randn(3, 3, generator=g, dtype=dtype))
    L = raw / raw.norm(dim=1, keepdim=True)
    L = L * torch.sign(torch.diagonal(L))[:, None]  # positive diagonal
    z = torch.randn(4, 5, 3, generator=g, dtype=dtype)
    ref = torch.distributions.MultivariateNormal(
        torch.zeros(3, dtype=dtype), scale_tril=L
    ).log_prob(z)
    rtol = 1e-10 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(
        _correlated_gaussian_log_prob(z, L), ref, rtol=rtol, atol=rtol
    )
    # identity: the standard normal
    eye = torch.eye(3, dtype=dtype)
    std = -0.5 * (3 * math.log(2 * math.pi) + z.square().sum(-1))
    torch.testing.assert_close(
        _correlated_gaussian_log_prob(z, eye), std, rtol=rtol, atol=rtol
    )
