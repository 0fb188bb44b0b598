"""SparseVAE's ``kl_weight``: the default is the unweighted objective bit for bit,
the weight multiplies the KL term and nothing else, and bad values are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identrep.datasets import make_sparse_factors
from identrep.exceptions import InvalidParameterError
from identrep.models.vae import SparseVAE
from identrep.models.vae import sparse_vae as sparse_vae_module
from identrep.models.vae._elbo import (
    VAEBatch,
    kl_diag_gaussians,
    observation_log_prob,
    reparameterize,
)
from identrep.models.vae._ssl import inv_gamma_log_prob, sparse_vae_loss, ssl_penalty
from identrep.utils.seeding import seeded

TINY = dict(n_latents=2, max_epochs=2, batch_size=32, hidden_sizes=(8, 8))


@pytest.fixture
def data(seed):
    return make_sparse_factors(120, random_state=seed)


def _unweighted_loss(
    module, batch, *, n_data, lambda0, lambda1, noise_prior=None, penalty_weight=1.0
):
    """The objective as it was before ``kl_weight`` existed (identity prior),
    written out term by term: mean(KL - log p(x | z)) + penalty / N."""
    assert module.prior_scale_tril() is None
    mean, log_var = module.encode(batch.x)
    z = reparameterize(mean, log_var)
    out = module.decoder(z)
    rec = observation_log_prob(
        module.likelihood, module.target(batch.x), out, module.log_var
    )
    kl = kl_diag_gaussians(
        mean, log_var, torch.zeros_like(mean), torch.zeros_like(mean)
    )
    reg = penalty_weight * ssl_penalty(
        module.decoder.W, module.p_star, lambda0, lambda1
    )
    if noise_prior is not None and module.likelihood == "gaussian":
        reg = reg - inv_gamma_log_prob(module.log_var.exp(), *noise_prior)
    return (kl - rec).mean() + reg / n_data, batch.x.shape[0]


def _reference(module, batch, *, kl_weight=1.0, **kwargs):
    # the default must not even pass another weight
    assert kl_weight == 1.0
    return _unweighted_loss(module, batch, **kwargs)


def test_default_fit_is_bit_identical_to_the_unweighted_objective(data, monkeypatch):
    default = SparseVAE(**TINY, random_state=0).fit(data.X)
    assert default.kl_weight == 1.0
    explicit = SparseVAE(**TINY, kl_weight=1.0, random_state=0).fit(data.X)
    monkeypatch.setattr(sparse_vae_module, "sparse_vae_loss", _reference)
    before = SparseVAE(**TINY, random_state=0).fit(data.X)
    for m in (default, explicit):
        np.testing.assert_array_equal(m.transform(data.X), before.transform(data.X))
        np.testing.assert_array_equal(m.mask_, before.mask_)
        np.testing.assert_array_equal(
            m.history_["train_loss"], before.history_["train_loss"]
        )


def _batch(X):
    x = torch.tensor(X, dtype=torch.float32)
    zeros = x.new_zeros(x.shape[0])
    return VAEBatch(x, zeros, zeros.long())


@pytest.mark.parametrize("weight", [0.05, 1.0 / 15, 3.0])
def test_the_weight_multiplies_the_kl_term_only(data, weight):
    m = SparseVAE(**TINY, random_state=0).fit(data.X)
    module, batch = m.module_, _batch(data.X)
    kw = dict(n_data=120, lambda0=10.0, lambda1=1.0, noise_prior=(1.5, 0.1))
    with torch.no_grad():
        with seeded(3):
            plain, n = sparse_vae_loss(module, batch, **kw)
        with seeded(3):  # same draws of z
            weighted, n_w = sparse_vae_loss(module, batch, **kw, kl_weight=weight)
        with seeded(3):
            reference, _ = _unweighted_loss(module, batch, **kw)
        mean, log_var = module.encode(batch.x)
        kl = kl_diag_gaussians(
            mean, log_var, torch.zeros_like(mean), torch.zeros_like(mean)
        ).mean()
    assert n == n_w == 120
    assert torch.equal(plain, reference)
    # loss(c) - loss(1) = (c - 1) * mean KL; float32 sums of terms of order 10
    assert float(weighted - plain) == pytest.approx(
        (weight - 1.0) * float(kl), rel=1e-4, abs=1e-5
    )
    assert float(kl) > 0.0  # else the check above says nothing


def test_training_uses_the_weight_and_the_objective_reports_it(data):
    m = SparseVAE(**TINY, random_state=0).fit(data.X)
    base = m.training_objective(data.X)
    X = torch.as_tensor(data.X, dtype=torch.float32)  # the encoder standardises
    with torch.no_grad():
        mean, log_var = m.module_.encode(X)
        kl = float(
            kl_diag_gaussians(
                mean, log_var, torch.zeros_like(mean), torch.zeros_like(mean)
            ).mean()
        )
    m.set_params(kl_weight=0.1)
    # same fixed draws: only the KL term changes, by (0.1 - 1) * mean KL
    assert m.training_objective(data.X) == pytest.approx(base - 0.9 * kl, rel=1e-5)
    # and a fit at another weight is another fit
    light = SparseVAE(**TINY, kl_weight=0.1, random_state=0).fit(data.X)
    assert not np.array_equal(light.transform(data.X), m.transform(data.X))


@pytest.mark.parametrize("bad", [0.0, -0.5, "half", None])
def test_bad_kl_weight_is_refused(data, bad):
    with pytest.raises(InvalidParameterError, match="'kl_weight' parameter"):
        SparseVAE(**TINY, kl_weight=bad).fit(data.X)
