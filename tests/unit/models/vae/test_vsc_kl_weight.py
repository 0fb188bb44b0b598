"""VSC's ``kl_weight``: the default is the unweighted objective bit for bit, the
weight multiplies the spike-and-slab KL and nothing else (in training and in
validation), and bad values are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identrep.exceptions import InvalidParameterError
from identrep.models.vae import VSC
from identrep.models.vae import vsc as vsc_module
from identrep.models.vae._elbo import VAEBatch, observation_log_prob
from identrep.models.vae._vsc_loss import spike_slab_kl, spike_slab_sample, vsc_loss
from identrep.models.vae.vsc import VSCObjective
from identrep.utils.seeding import seeded

TINY = dict(n_latents=3, max_epochs=3, batch_size=32, hidden_sizes=(8,))


@pytest.fixture
def X(rng):
    return (rng.uniform(size=(120, 6)) < 0.4) * rng.integers(1, 4, size=(120, 6))


def _unweighted_loss(module, batch, *, alpha, c, slab_weight=1.0):
    """The loss as it was before ``kl_weight`` existed, term by term:
    mean(KL - log p(x | z)) with one relaxed draw of z."""
    mean, log_var, logits = module.encode_parts(batch.x)
    z = spike_slab_sample(mean, log_var, logits, c, slab_weight=slab_weight)
    out = module.decoder(z)
    target = module.target(batch.x).to(out.dtype)
    rec = observation_log_prob(module.likelihood, target, out, module.log_var)
    kl = spike_slab_kl(mean, log_var, logits, alpha)
    return (kl - rec).mean(), batch.x.shape[0]


def _reference(module, batch, *, kl_weight=1.0, **kwargs):
    assert kl_weight == 1.0  # the default passes the unit weight
    return _unweighted_loss(module, batch, **kwargs)


def _batch(X):
    x = torch.tensor(X, dtype=torch.float32)
    zeros = x.new_zeros(x.shape[0])
    return VAEBatch(x, zeros, zeros.long())


def test_default_fit_is_bit_identical_to_the_unweighted_objective(X, monkeypatch):
    kw = dict(TINY, likelihood="categorical", random_state=0)
    default = VSC(**kw).fit(X)
    assert default.kl_weight == 1.0
    explicit = VSC(**kw, kl_weight=1.0).fit(X)
    monkeypatch.setattr(vsc_module, "vsc_loss", _reference)
    before = VSC(**kw).fit(X)
    for m in (default, explicit):
        np.testing.assert_array_equal(m.transform(X), before.transform(X))
        np.testing.assert_array_equal(
            m.history_["train_loss"], before.history_["train_loss"]
        )


@pytest.mark.parametrize("weight", [0.05, 1.0 / 15, 3.0])
def test_the_weight_multiplies_the_kl_term_only(X, weight):
    m = VSC(**TINY, likelihood="categorical", random_state=0).fit(X)
    module, batch = m.module_.eval(), _batch(X)
    kw = dict(alpha=0.2, c=50.0, slab_weight=0.5)
    with torch.no_grad():
        with seeded(3):
            plain, n = vsc_loss(module, batch, **kw)
        with seeded(3):  # same draws of z
            weighted, n_w = vsc_loss(module, batch, **kw, kl_weight=weight)
        with seeded(3):
            reference, _ = _unweighted_loss(module, batch, **kw)
        mean, log_var, logits = module.encode_parts(batch.x)
        kl = spike_slab_kl(mean, log_var, logits, 0.2).mean()
    assert n == n_w == 120
    assert torch.equal(plain, reference)
    # loss(c) - loss(1) = (c - 1) * mean KL; float32 sums of terms of order 10
    assert float(weighted - plain) == pytest.approx(
        (weight - 1.0) * float(kl), rel=1e-4, abs=1e-5
    )
    assert float(kl) > 0.01  # else the check above says nothing


@pytest.mark.parametrize("train", [True, False])
def test_the_objective_passes_the_weight_in_training_and_validation(X, train):
    est = VSC(**TINY, likelihood="categorical", kl_weight=0.1, random_state=0)
    m = est.fit(X)
    obj = VSCObjective(m)
    module, batch = m.module_.train(train), _batch(X)
    c, w = obj.schedule(obj.epoch) if train else (m.c_end, 1.0)
    with torch.no_grad():
        with seeded(5):
            got, _ = obj(module, batch)
        with seeded(5):
            want, _ = vsc_loss(
                module, batch, alpha=m.alpha, c=c, slab_weight=w, kl_weight=0.1
            )
        with seeded(5):
            unit, _ = vsc_loss(module, batch, alpha=m.alpha, c=c, slab_weight=w)
    assert torch.equal(got, want)
    assert not torch.equal(got, unit)  # the weight is not silently 1


def test_a_fit_at_another_weight_is_another_fit(X):
    a = VSC(**TINY, likelihood="categorical", random_state=0).fit(X)
    b = VSC(**TINY, likelihood="categorical", kl_weight=0.1, random_state=0).fit(X)
    assert not np.array_equal(a.transform(X), b.transform(X))


@pytest.mark.parametrize("bad", [0.0, -0.5, "half", None])
def test_bad_kl_weight_is_refused(X, bad):
    with pytest.raises(InvalidParameterError, match="'kl_weight' parameter of VSC"):
        VSC(**TINY, likelihood="categorical", kl_weight=bad).fit(X)
