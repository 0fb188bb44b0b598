"""Training that survives interruptions: MTRN(checkpoint=...) and a VAE-family
model through fit_module's checkpoint (training/checkpoint.py).

Every interrupted run below is compared with the same run never stopped, to the bit
(``np.array_equal`` / ``torch.equal`` and ``==`` on the loss histories).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep.models._base as estimator_base
from identrep import IVAE, MTRN
from identrep.datasets import make_nonlinear_tasks
from identrep.exceptions import CheckpointError
from identrep.training import fit_module

pytestmark = pytest.mark.filterwarnings(
    "ignore::identrep.exceptions.ConvergenceWarning"
)


@pytest.fixture(scope="module")
def data():
    return make_nonlinear_tasks(
        n_tasks=10, n_samples=40, n_latents=3, n_causal=1, n_observed=6, random_state=0
    )


MTRN_SETTINGS = dict(
    n_latents=3, max_epochs=30, patience=3, val_fraction=0.2, batch_size=64, lr=3e-2
)


def _same_fit(a, b):
    sa, sb = a.module_.state_dict(), b.module_.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    for key in ("train_loss", "val_loss", "best_epoch", "n_epochs", "stopped_early"):
        assert a.history_[key] == b.history_[key], key


def _sessions(make, fit, limit=60):
    """Fit again and again (each fit stops after one epoch on its max_time)
    until a fit ends for another reason; returns the last estimator and the count."""
    for calls in range(1, limit + 1):
        est = fit(make())
        if not est.history_["stopped_on_time"]:
            return est, calls
    raise AssertionError(f"not finished after {limit} fits")


def test_mtrn_stopped_and_resumed_is_the_same_fit(data, tmp_path):
    """Seed 0, not the seed fixture: this fit stops early (epoch 14 of 30, best
    epoch 10), so the early-stopping state is part of what must survive; seeds
    0-4 stop at 10-21 epochs, seed 3 not within 30."""
    seed = 0
    fit = lambda m: m.fit(data.X, data.y, task_ids=data.task_ids)  # noqa: E731
    plain = fit(MTRN(random_state=seed, **MTRN_SETTINGS))
    assert plain.history_["stopped_early"]
    path = tmp_path / "mtrn.ckpt"
    resumed, calls = _sessions(
        lambda: MTRN(
            random_state=seed, max_time=1e-9, checkpoint=path, **MTRN_SETTINGS
        ),
        fit,
    )
    assert calls == plain.history_["n_epochs"]  # one epoch per fit
    _same_fit(plain, resumed)
    np.testing.assert_array_equal(plain.head_weights_, resumed.head_weights_)
    np.testing.assert_array_equal(plain.transform(data.X), resumed.transform(data.X))
    # the finished checkpoint gives the same model again, without training
    again = fit(MTRN(random_state=seed, checkpoint=path, **MTRN_SETTINGS))
    _same_fit(plain, again)


def test_mtrn_refuses_the_checkpoint_of_another_run(data, tmp_path, seed):
    path = tmp_path / "mtrn.ckpt"
    MTRN(random_state=seed, max_time=1e-9, checkpoint=path, **MTRN_SETTINGS).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    other = MTRN(random_state=seed + 1, checkpoint=path, **MTRN_SETTINGS)
    with pytest.raises(CheckpointError, match="initial parameters differ"):
        other.fit(data.X, data.y, task_ids=data.task_ids)
    same = MTRN(random_state=seed, checkpoint=path, **MTRN_SETTINGS)
    bent = np.sign(data.y) * np.abs(data.y) ** 1.5  # other targets, same shapes
    with pytest.raises(CheckpointError, match="first training batch differs"):
        same.fit(data.X, bent, task_ids=data.task_ids)
    wider = MTRN(
        random_state=seed, checkpoint=path, **{**MTRN_SETTINGS, "batch_size": 32}
    )
    with pytest.raises(CheckpointError, match="batches_per_epoch 5 there, 10 here"):
        wider.fit(data.X, data.y, task_ids=data.task_ids)


def test_ivae_weighted_annealed_objective_resumes(data, tmp_path, monkeypatch, seed):
    """A VAE's run holds more state: reparameterisation noise (global torch RNG)
    and the annealing epoch of the weighted objective (its state_dict). The VAE
    estimators expose no checkpoint; fit_module is given one here."""
    path = tmp_path / "ivae.ckpt"
    settings = dict(
        n_latents=2,
        max_epochs=8,
        patience=None,
        objective="weighted",
        anneal=True,
        batch_size=64,
        random_state=seed,
    )
    fit = lambda m: m.fit(data.X, data.y, task_ids=data.task_ids)  # noqa: E731
    plain = fit(IVAE(**settings))

    def fit_one_epoch(module, loss_fn, train_batches, **kwargs):
        kwargs.update(checkpoint=path, max_time=1e-9)
        return fit_module(module, loss_fn, train_batches, **kwargs)

    monkeypatch.setattr(estimator_base, "fit_module", fit_one_epoch)
    resumed, calls = _sessions(lambda: IVAE(**settings), fit)
    assert calls == 8
    _same_fit(plain, resumed)
    saved = torch.load(path, weights_only=True)
    assert saved["parts"]["post_epoch"] == {"epoch": 8}  # the annealing counter
