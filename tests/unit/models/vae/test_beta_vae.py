"""beta-VAE: beta = 1 is the VAE draw for draw; beta > 1 trades reconstruction
for KL."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.exceptions import InvalidParameterError
from identrep.models.vae import VAE, BetaVAE

FAST = dict(n_latents=2, max_epochs=3, batch_size=32, hidden_sizes=(8,), random_state=0)


@pytest.fixture
def X(rng):
    return rng.normal(size=(120, 5))


def test_beta_one_is_the_vae(X):
    one = BetaVAE(beta=1.0, **FAST).fit(X)
    ref = VAE(**FAST).fit(X)
    assert one.history_["train_loss"] == ref.history_["train_loss"]
    np.testing.assert_array_equal(one.transform(X), ref.transform(X))


def test_larger_beta_gives_a_posterior_closer_to_the_prior(X):
    kw = {**FAST, "max_epochs": 30}
    lo = BetaVAE(beta=1.0, **kw).fit(X)
    hi = BetaVAE(beta=16.0, **kw).fit(X)

    def kl(m):
        mean, var = m.encode(X)
        return 0.5 * (var + mean**2 - 1 - np.log(var)).sum(1).mean()

    assert kl(hi) < kl(lo)


def test_beta_is_declared():
    msg = r"^The 'beta' parameter of BetaVAE must be a float in the range \(0, inf\)"
    with pytest.raises(InvalidParameterError, match=msg):
        BetaVAE(beta=0.0).fit(np.zeros((4, 2)))
