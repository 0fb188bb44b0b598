"""IVAE, MTIVAE, ICaRL and MTICaRL standardise x once per fit (and step with the
foreach optimiser on CPU): the fit is the same, to the bit, as the reference path
that standardises every batch and steps parameter by parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep.training.loop as loop
from identrep.datasets import make_nonlinear_tasks
from identrep.models.nn.vae import (
    ConditionalPrior,
    ConditionalVAE,
    Conditioner,
    GaussianDecoder,
    GaussianEncoder,
)
from identrep.models.vae import IVAE, MTIVAE, ICaRL, MTICaRL
from identrep.models.vae._base import BaseVAE
from identrep.models.vae._elbo import VAEBatch, neg_elbo_loss, standardized_input
from identrep.training._optim import OPTIMIZERS

SMALL = dict(
    n_latents=3,
    encoder="mlp",
    hidden_sizes=[16],
    max_epochs=3,
    batch_size=64,
    val_fraction=0.2,
)


@pytest.fixture(scope="module")
def data(seed):
    return make_nonlinear_tasks(
        n_tasks=8,
        n_samples=60,
        n_latents=3,
        n_causal=1,
        n_observed=6,
        random_state=seed,
    )


def _reference(monkeypatch, cls):
    """The path before standardising once: per-batch standardisation and
    torch's per-parameter optimiser loop."""
    monkeypatch.setattr(cls, "_standardize_once", lambda self: False)
    monkeypatch.setattr(
        loop,
        "_make_optimizer",
        lambda name, params, lr, wd: OPTIMIZERS[name](
            params, lr=lr, weight_decay=wd, foreach=False
        ),
    )


def _fit(cls, data, seed, **params):
    est = cls(**SMALL, random_state=seed, **params)
    est.fit(data.X, data.y, task_ids=data.task_ids)
    state = {k: v.clone() for k, v in est.module_.state_dict().items()}
    Z = est.transform(data.X, data.y, task_ids=data.task_ids)
    return state, est.history_, Z


@pytest.mark.parametrize("cls", [IVAE, MTIVAE, ICaRL, MTICaRL])
def test_fit_equals_the_reference_path_bitwise(cls, data, seed, monkeypatch):
    calls = []
    fast_collate = BaseVAE._standardized_collate

    def spy(self, *args):
        calls.append(type(self).__name__)
        return fast_collate(self, *args)

    monkeypatch.setattr(BaseVAE, "_standardized_collate", spy)
    fast = _fit(cls, data, seed)
    assert calls == [cls.__name__]  # the path under test was taken
    with monkeypatch.context() as m:
        _reference(m, cls)
        ref = _fit(cls, data, seed)
    assert calls == [cls.__name__]  # and the reference path was not
    assert fast[0].keys() == ref[0].keys()
    for name in fast[0]:
        assert torch.equal(fast[0][name], ref[0][name]), name  # bitwise
    assert fast[1]["train_loss"] == ref[1]["train_loss"]
    assert fast[1]["val_loss"] == ref[1]["val_loss"]
    assert fast[1]["best_epoch"] == ref[1]["best_epoch"]
    assert np.array_equal(fast[2], ref[2])


def test_whitened_input_keeps_the_per_batch_map(data, seed, monkeypatch):
    calls = []
    monkeypatch.setattr(
        BaseVAE, "_standardized_collate", lambda *a: calls.append(1) or None
    )
    est = MTIVAE(**SMALL, whiten="zca", random_state=seed)
    est.fit(data.X, data.y, task_ids=data.task_ids)  # the matrix map: per batch
    assert calls == []
    assert np.isfinite(est.transform(data.X, data.y, task_ids=data.task_ids)).all()


def _module(likelihood: str) -> ConditionalVAE:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return ConditionalVAE(
            GaussianEncoder(4, 0, 2, (8,)),
            GaussianDecoder(2, 4, (8,)),
            ConditionalPrior(0, 2),
            Conditioner(False, None),
            torch.full((4,), 2.0),
            torch.full((4,), 3.0),
            likelihood=likelihood,
        )


def test_standardized_input_reads_a_standardised_batch_as_is():
    module = _module("gaussian")
    x = torch.randn(5, 4, dtype=torch.float64)
    zeros = torch.zeros(5, dtype=torch.float64)
    raw = VAEBatch(x, zeros, zeros.long())
    xs = module.standardize(x)
    assert torch.equal(standardized_input(module, raw), xs)
    done = VAEBatch(xs, zeros, zeros.long(), True)
    assert standardized_input(module, done) is xs
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        a = neg_elbo_loss(module, raw)[0]
        torch.manual_seed(1)
        b = neg_elbo_loss(module, done)[0]
    assert torch.equal(a, b)


def test_standardised_batch_with_a_raw_likelihood_is_refused():
    module = _module("bernoulli")
    x = torch.rand(5, 4, dtype=torch.float64)
    zeros = torch.zeros(5, dtype=torch.float64)
    with pytest.raises(ValueError, match="needs the Gaussian likelihood"):
        neg_elbo_loss(
            module, VAEBatch(module.standardize(x), zeros, zeros.long(), True)
        )


def test_read_only_input_fits_without_a_torch_warning(data, seed):
    """Frozen arrays (the data sets' own, memmaps) are read, not written: no
    'non-writable tensor' warning, and the fit equals that of a writable copy.
    torch warns once per process, so the warning is checked in a fresh one."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from identrep.datasets import make_nonlinear_tasks\n"
        "from identrep.models.vae import IVAE\n"
        "d = make_nonlinear_tasks(n_tasks=8, n_samples=60, n_latents=3, n_causal=1,"
        " n_observed=6, random_state=0)\n"
        "X = np.array(d.X); X.setflags(write=False)\n"
        "IVAE(n_latents=3, max_epochs=1, random_state=0).fit(X, d.y,"
        " task_ids=d.task_ids)\n"
    )
    only_that = "error:The given NumPy array is not writable:UserWarning"
    run = subprocess.run(
        [sys.executable, "-W", only_that, "-c", code],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    writable, frozen = np.array(data.X), np.array(data.X)
    frozen.setflags(write=False)
    fits = [
        IVAE(random_state=seed, **SMALL).fit(X, data.y, task_ids=data.task_ids)
        for X in (writable, frozen)
    ]
    Z = [f.transform(writable, data.y, task_ids=data.task_ids) for f in fits]
    np.testing.assert_array_equal(Z[1], Z[0])
