"""Observation models and reconstructions of the unconditional VAEs: the
categorical (multinomial) and Bernoulli likelihoods of VAE and beta-VAE, checked
against log-pmfs computed by hand, and ``reconstruct`` (decoder mean at the
posterior mean) in the units of X for VAE, beta-VAE, VSC and OI-VAE."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import gammaln, log_softmax, softmax

from identrep.exceptions import InvalidParameterError
from identrep.models.vae import OIVAE, VAE, VSC, BetaVAE
from identrep.models.vae._elbo import VAEBatch, neg_elbo_loss
from identrep.utils.seeding import seeded

FAST = dict(n_latents=2, max_epochs=3, batch_size=32, hidden_sizes=(8,), random_state=0)


def _counts(seed=0, n=120, p=12):
    """Bag-of-words rows: 40 words from one of two topics over p words."""
    rng = np.random.default_rng(seed)
    topics = np.zeros((2, p))
    topics[0, : p // 2] = topics[1, p // 2 :] = 2.0 / p
    which = rng.integers(0, 2, size=n)
    return np.vstack([rng.multinomial(40, topics[k]) for k in which]).astype(float)


def _last_linear(net: torch.nn.Module) -> torch.nn.Linear:
    return [m for m in net.modules() if isinstance(m, torch.nn.Linear)][-1]


def _constant_decoder(est, bias: np.ndarray) -> None:
    """Make the decoder ignore z: last layer's weight 0, its bias ``bias``
    (OI-VAE: the last group layers, biases scattered to feature order)."""
    dec = est.module_.decoder
    with torch.no_grad():
        if hasattr(dec, "flat_index"):
            dec.weights[-1].zero_()
            flat = dec.biases[-1].view(-1)
            flat[dec.flat_index] = torch.as_tensor(bias, dtype=flat.dtype)
            return
        last = _last_linear(dec)
        last.weight.zero_()
        last.bias.copy_(torch.as_tensor(bias, dtype=last.bias.dtype))


@pytest.mark.parametrize("beta", [1.0, 3.0])
def test_categorical_elbo_is_the_multinomial_log_pmf_without_coefficient(beta):
    """neg_elbo_loss with a linear decoder of known weights, recomputed by hand:
    -sum_j x_j log softmax(A z + c)_j + beta KL(N(m, s^2) || N(0, 1)), which is
    the multinomial log-pmf (torch.distributions) minus its coefficient."""
    X = _counts()[:6]
    est = BetaVAE(beta=beta, likelihood="categorical", decoder="linear", **FAST)
    est.set_params(max_epochs=1).fit(X)
    net = est.module_.double()
    rng = np.random.default_rng(1)
    A, c = rng.normal(size=(12, 2)), rng.normal(size=12)
    lin = _last_linear(net.decoder)
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(A))
        lin.bias.copy_(torch.as_tensor(c))
    x = torch.as_tensor(X)
    batch = VAEBatch(x, torch.zeros(6, dtype=torch.float64), torch.zeros(6).long())
    with torch.no_grad(), seeded(5):
        loss, n = neg_elbo_loss(net, batch, beta=beta)
        mean, log_var = (t.numpy() for t in net.encode(x, batch.y, batch.task))
    with seeded(5):  # the same draw as the loss's reparameterisation
        eps = torch.randn(6, 2, dtype=torch.float64).numpy()
    z = mean + np.exp(0.5 * log_var) * eps
    logp = log_softmax(z @ A.T + c, axis=1)
    log_lik = (X * logp).sum(1)
    kl = 0.5 * (np.exp(log_var) + mean**2 - 1.0 - log_var).sum(1)
    assert n == 6
    assert float(loss) == pytest.approx(np.mean(beta * kl - log_lik), rel=1e-10)
    # the same per-row term from torch.distributions, coefficient removed
    coef = gammaln(X.sum(1) + 1) - gammaln(X + 1).sum(1)
    ref = [
        float(
            torch.distributions.Multinomial(
                int(X[i].sum()), logits=torch.as_tensor(z[i] @ A.T + c)
            ).log_prob(torch.as_tensor(X[i]))
        )
        for i in range(6)
    ]
    np.testing.assert_allclose(log_lik, np.array(ref) - coef, rtol=1e-10)


def test_bernoulli_elbo_is_the_bernoulli_log_pmf():
    rng = np.random.default_rng(0)
    X = (rng.random((10, 5)) < 0.3).astype(float)
    est = VAE(likelihood="bernoulli", decoder="linear", **FAST).fit(X)
    net = est.module_.double()
    x = torch.as_tensor(X)
    batch = VAEBatch(x, torch.zeros(10, dtype=torch.float64), torch.zeros(10).long())
    with torch.no_grad(), seeded(2):
        loss, _ = neg_elbo_loss(net, batch)
        mean, log_var = (t.numpy() for t in net.encode(x, batch.y, batch.task))
    with seeded(2):
        eps = torch.randn(10, 2, dtype=torch.float64).numpy()
    lin = _last_linear(net.decoder)
    A, c = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    p = 1.0 / (1.0 + np.exp(-((mean + np.exp(0.5 * log_var) * eps) @ A.T + c)))
    log_lik = (X * np.log(p) + (1 - X) * np.log1p(-p)).sum(1)
    kl = 0.5 * (np.exp(log_var) + mean**2 - 1.0 - log_var).sum(1)
    assert float(loss) == pytest.approx(np.mean(kl - log_lik), rel=1e-10)


@pytest.mark.parametrize("cls", [VAE, BetaVAE, VSC, OIVAE])
def test_categorical_heldout_nll_and_reconstruct_with_a_constant_decoder(cls):
    """A decoder that ignores z outputs softmax(b) for every row: the held-out
    NLL is -mean_i sum_j x_ij log softmax(b)_j exactly, whatever the draws, and
    every reconstruction is softmax(b)."""
    X = _counts()
    est = cls(likelihood="categorical", **FAST).fit(X)
    b = np.linspace(-1.0, 2.0, X.shape[1])
    _constant_decoder(est, b)
    want = -(X * log_softmax(b)).sum(1).mean()
    first = -(X[:30] * log_softmax(b)).sum(1).mean()
    assert est.heldout_nll(X[:30]) == pytest.approx(first, rel=1e-6)
    assert est.heldout_nll(X) == pytest.approx(want, rel=1e-6)
    R = est.reconstruct(X)
    assert R.shape == X.shape and R.dtype == np.float64
    np.testing.assert_allclose(R, np.broadcast_to(softmax(b), X.shape), rtol=1e-6)


def test_gaussian_reconstruct_is_in_the_units_of_x():
    """Linear decoder A z + c on standardised features: the reconstruction is
    (A E[z | x] + c) * sd + mean of the training columns."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2)) @ rng.normal(size=(2, 4)) * 50.0 + 1000.0
    est = VAE(decoder="linear", **FAST).fit(X)
    lin = _last_linear(est.module_.decoder)
    A, c = lin.weight.detach().double().numpy(), lin.bias.detach().double().numpy()
    mu, sd = X.mean(0), X.std(0)
    want = (est.transform(X) @ A.T + c) * sd + mu
    np.testing.assert_allclose(est.reconstruct(X), want, rtol=1e-5)
    _constant_decoder(est, np.zeros(4))  # the mean of every training column
    np.testing.assert_allclose(est.reconstruct(X[:3]), np.tile(mu, (3, 1)), rtol=1e-9)


def test_sampled_reconstruct_decodes_one_posterior_draw():
    """reconstruct(X, sample=True): the decoder at z = mu + sigma * eps, one
    draw per row. With a linear decoder A z + c the standardised deviation from
    the mean reconstruction is A (sigma * eps), so eps recovered through A's
    pseudo-inverse and the encoder's own sigma is standard normal: over 400
    rows x 2 latents its mean is within 0.2 of 0 (5 standard errors) and its
    std within 0.15 of 1; the same seed gives the same draw, another seed
    another."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2)) @ rng.normal(size=(2, 4)) * 3.0 + 10.0
    X += 0.5 * rng.normal(size=X.shape)
    est = VAE(decoder="linear", **FAST).fit(X)
    A = _last_linear(est.module_.decoder).weight.detach().double().numpy()
    sd = X.std(0)
    R0, R1 = est.reconstruct(X), est.reconstruct(X, sample=True, random_state=1)
    np.testing.assert_array_equal(R1, est.reconstruct(X, sample=True, random_state=1))
    assert np.abs(R1 - est.reconstruct(X, sample=True, random_state=2)).max() > 1e-3
    x = torch.as_tensor(X, dtype=torch.float64)
    with torch.no_grad():
        _, log_var = est.module_.encode(x, x.new_zeros(400), torch.zeros(400).long())
    sigma = np.exp(0.5 * log_var.double().numpy())
    eps = (((R1 - R0) / sd) @ np.linalg.pinv(A).T) / sigma
    assert abs(eps.mean()) < 0.2 and abs(eps.std() - 1.0) < 0.15
    # other VAEs decode their own draws (VSC: spike-and-slab)
    for cls in (VSC, BetaVAE):
        other = cls(**FAST).fit(X)
        Rs = other.reconstruct(X[:5], sample=True)
        assert Rs.shape == (5, 4) and np.isfinite(Rs).all()


@pytest.mark.parametrize("cls", [VAE, BetaVAE, VSC, OIVAE])
def test_reconstruct_decodes_the_posterior_mean(cls):
    """reconstruct(X) = softmax(decoder(transform(X))) (categorical) and sigmoid
    (Bernoulli), row by row."""
    X = _counts()[:20]
    for lik, link in (("categorical", softmax), ("bernoulli", None)):
        data = X if lik == "categorical" else (X > 2).astype(float)
        est = cls(likelihood=lik, **FAST).fit(data)
        z = torch.as_tensor(est.transform(data), dtype=torch.float32)
        with torch.no_grad():
            out = est.module_.decoder(z)
        out = (out[0] if isinstance(out, tuple) else out).double().numpy()
        want = link(out, axis=1) if link else 1.0 / (1.0 + np.exp(-out))
        np.testing.assert_allclose(est.reconstruct(data), want, rtol=1e-5)


def test_categorical_vae_learns_the_topics(seed):
    """Two topics over disjoint halves of 12 words: a uniform model costs
    40 log 12 = 99.4 nats per document, the true topic 40 log 6 = 71.7. A
    categorical VAE after 60 epochs: 74.2-80.6 nats on fresh documents over seeds
    0-9 (threshold 85: a margin of 4.4 over the worst seed, 14 below uniform),
    and its reconstructions put the document's own topic first in 100% of the
    documents at every seed (threshold 90%)."""
    X, Xt = _counts(seed), _counts(seed + 100, n=60)
    kw = {**FAST, "max_epochs": 60, "val_fraction": 0.0, "patience": None}
    est = VAE(likelihood="categorical", **{**kw, "random_state": seed}).fit(X)
    assert est.heldout_nll(Xt) < 85.0 < 40 * math.log(12)
    R = est.reconstruct(Xt)
    own = Xt[:, :6].sum(1) > 0
    assert ((R[:, :6].sum(1) > 0.5) == own).mean() > 0.9


def test_likelihood_is_declared():
    msg = r"The 'likelihood' parameter of VAE must be a str among"
    with pytest.raises(InvalidParameterError, match=msg):
        VAE(likelihood="poisson").fit(np.zeros((4, 2)))
    msg = r"The 'likelihood' parameter of BetaVAE must be a str among"
    with pytest.raises(InvalidParameterError, match=msg):
        BetaVAE(likelihood="multinomial").fit(np.zeros((4, 2)))
