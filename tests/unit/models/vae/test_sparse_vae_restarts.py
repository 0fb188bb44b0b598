"""SparseVAE: restarts chosen by the training objective, fixed head norms and the
schedules of the prior (ramp of its weight, annealed spike rate)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identrep.datasets import make_sparse_factors
from identrep.exceptions import InvalidParameterError
from identrep.models.nn.sparse_vae import MaskedFeatureDecoder
from identrep.models.vae import SparseVAE
from identrep.models.vae._ssl import ssl_penalty
from identrep.models.vae.sparse_vae import SSLObjective
from identrep.utils.seeding import check_random_state

TINY = dict(n_latents=2, max_epochs=2, batch_size=32, hidden_sizes=(8, 8))


@pytest.fixture
def data(seed):
    return make_sparse_factors(120, random_state=seed)


def test_restarts_keep_the_fit_with_the_lowest_training_objective(data):
    m = SparseVAE(**TINY, n_restarts=3, random_state=0).fit(data.X)
    assert m.restart_objectives_.shape == (3,)
    assert m.best_restart_ == int(np.argmin(m.restart_objectives_))
    # the kept fit is the single fit from the restart's seed ...
    seeds = check_random_state(0).integers(0, 2**31 - 1, size=3)
    single = SparseVAE(**TINY, random_state=int(seeds[m.best_restart_])).fit(data.X)
    np.testing.assert_array_equal(m.transform(data.X), single.transform(data.X))
    np.testing.assert_array_equal(m.mask_, single.mask_)
    # ... its objective is the smallest, and the parameters stay the caller's
    assert m.training_objective(data.X) == pytest.approx(m.restart_objectives_.min())
    assert m.get_params()["n_restarts"] == 3 and m.get_params()["random_state"] == 0
    # the restarts differ (else the choice would mean nothing)
    assert np.ptp(m.restart_objectives_) > 0
    again = SparseVAE(**TINY, n_restarts=3, random_state=0).fit(data.X)
    np.testing.assert_array_equal(again.restart_objectives_, m.restart_objectives_)


def test_training_objective_adds_the_weighted_penalty_over_n(data):
    m = SparseVAE(**TINY, random_state=0).fit(data.X)
    base = m.training_objective(data.X)
    assert base == m.training_objective(data.X)  # fixed draws: deterministic
    m.set_params(prior_weight=m.prior_weight + 30.0)
    pen = ssl_penalty(m.module_.decoder.W.detach(), m.module_.p_star, 10.0, 1.0)
    expected = base + 30.0 * float(pen) / data.X.shape[0]
    assert m.training_objective(data.X) == pytest.approx(expected, rel=1e-5)


def test_fixed_head_norms_leave_the_masks_to_carry_the_gain(seed):
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(3, 5, (8, 6), unit_first=True, unit_head=True)
    z = torch.randn(4, 3)
    out = dec(z)
    with torch.no_grad():  # a head cannot grow to let its mask shrink ...
        dec.head_weight[2] *= 5.0
    torch.testing.assert_close(dec(z), out)
    norms = dec.head().norm(dim=1)
    torch.testing.assert_close(norms, dec.head_norm.expand(5))
    with torch.no_grad():  # ... which a free head can
        free = MaskedFeatureDecoder(3, 5, (8, 6), unit_first=True)
        before = free(z)
        free.head_weight[2] *= 5.0
    assert not torch.allclose(free(z)[:, 2], before[:, 2])


def test_prior_weight_ramps_and_the_spike_rate_anneals():
    est = SparseVAE(
        batch_size=10,
        max_epochs=10,
        ssl_warmup=0.2,
        ssl_ramp=0.4,
        lambda0_anneal=0.5,
        lambda0=16.0,
        lambda1=1.0,
    )
    loss = SSLObjective(est, n_data=100, noise_prior=None)  # 100 steps in all
    assert (loss.warmup_steps, loss.ramp_steps, loss.anneal_steps) == (20, 40, 50)
    for step, ramp, spike in [
        (0, 0.0, 1.0),
        (20, 0.0, 1.0),
        (40, 0.5, 16.0**0.4),
        (60, 1.0, 16.0**0.8),
        (70, 1.0, 16.0),
        (99, 1.0, 16.0),
    ]:
        loss.step = step
        assert loss.ramp() == pytest.approx(ramp)
        assert loss.spike() == pytest.approx(spike)
    plain = SSLObjective(SparseVAE(batch_size=10, max_epochs=10), 100, None)
    assert plain.ramp() == 1.0 and plain.spike() == 10.0


def test_bad_restart_and_schedule_settings(data):
    for name, value in [("n_restarts", 0), ("ssl_ramp", 1.5), ("lambda0_anneal", -0.1)]:
        with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
            SparseVAE(**TINY, **{name: value}).fit(data.X)
