"""Epochs of a fixed number of optimiser steps: StepBatches and fit_module's
``steps_per_epoch``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from identrep.exceptions import InvalidParameterError
from identrep.training import StepBatches, TensorBatches, fit_module


def _rows(batches, n):
    return [b[0].squeeze(-1).tolist() for _ in range(n) for b in batches]


def test_step_batches_cut_the_passes_of_the_source_into_epochs():
    x = torch.arange(10.0)[:, None]
    plain = _rows(TensorBatches(x, batch_size=4, seed=3), 5)  # 15 batches
    # one pass an epoch: the source's own sequence
    same = StepBatches(TensorBatches(x, batch_size=4, seed=3), 3)
    assert len(same) == 3 and _rows(same, 5) == plain and same.passes == 5
    # 7 steps an epoch runs across passes (a fresh shuffle each), in order
    cut = StepBatches(TensorBatches(x, batch_size=4, seed=3), 7)
    epochs = [[b[0].squeeze(-1).tolist() for b in cut] for _ in range(2)]
    assert [len(e) for e in epochs] == [7, 7]
    assert epochs[0] + epochs[1] == plain[:14]
    assert cut.passes == 5  # 14 batches: 4 whole passes and the 5th begun


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_step_batches_reject_a_bad_step_count(bad):
    with pytest.raises(InvalidParameterError, match="n_steps"):
        StepBatches([1, 2], bad)


def test_step_batches_reject_an_empty_source():
    with pytest.raises(ValueError, match="no batch"):
        list(StepBatches([], 2))


class _Scalar(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))


def test_fit_module_takes_exactly_the_step_budget_and_restores_the_best_epoch():
    """Training loss -w with SGD at lr 1 adds 1 to w per step; the validation
    loss (w - 7)^2 is lowest after the 2nd epoch of 3 steps (w = 6: 1, against
    16, 4, 25, 64), whose state must be restored."""
    module, calls = _Scalar(), {"train": 0}

    def loss_fn(m, batch):
        if batch == "val":
            return (m.w - 7.0) ** 2
        calls["train"] += 1
        return -m.w

    history = fit_module(
        module,
        loss_fn,
        ["a", "b"],  # 2 batches a pass: 3-step epochs end inside passes
        val_batches=["val"],
        lr=1.0,
        optimizer="sgd",
        max_epochs=5,
        steps_per_epoch=3,
    )
    assert calls["train"] == 15  # 5 epochs x 3 steps, not 5 passes x 2
    assert history["n_epochs"] == 5 and history["best_epoch"] == 1
    np.testing.assert_allclose(history["val_loss"], [16.0, 1.0, 4.0, 25.0, 64.0])
    assert float(module.w.detach()) == 6.0


def _fit(seed, **kw):
    torch.manual_seed(seed)
    net = nn.Linear(3, 1)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(50, 3, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(50, generator=g)
    batches = TensorBatches(x, y, batch_size=8, seed=seed)  # 7 batches a pass

    def loss_fn(m, b):
        return ((m(b[0])[:, 0] - b[1]) ** 2).mean()

    val = TensorBatches(x[:10], y[:10], batch_size=10, shuffle=False)
    hist = fit_module(
        net, loss_fn, batches, val_batches=val, lr=0.05, max_epochs=4,
        lr_schedule="cosine", **kw,
    )  # fmt: skip
    return torch.cat([p.detach().flatten() for p in net.parameters()]), hist


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_fit_module_default_and_one_pass_an_epoch_are_the_same_fit(seed):
    plain, h0 = _fit(seed)
    none, h1 = _fit(seed, steps_per_epoch=None)
    one_pass, h2 = _fit(seed, steps_per_epoch=7)
    other, _ = _fit(seed, steps_per_epoch=5)
    assert torch.equal(plain, none) and torch.equal(plain, one_pass)
    assert h0["val_loss"] == h1["val_loss"] == h2["val_loss"]
    assert not torch.equal(plain, other)  # a different budget is a different fit


def test_fit_module_steps_per_epoch_errors(tmp_path):
    with pytest.raises(InvalidParameterError, match="steps_per_epoch"):
        fit_module(_Scalar(), lambda m, b: -m.w, ["a"], lr=1.0, max_epochs=1,
                   steps_per_epoch=0)  # fmt: skip
    with pytest.raises(ValueError, match="steps_per_epoch cannot be combined"):
        fit_module(_Scalar(), lambda m, b: -m.w, ["a"], lr=1.0, max_epochs=1,
                   steps_per_epoch=2, checkpoint=tmp_path / "c.pt")  # fmt: skip


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_vae_estimators_take_a_step_budget():
    from identrep.models.vae import IVAE, ICaRL

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5))
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    kw = dict(n_latents=2, max_epochs=2, batch_size=32, random_state=0)
    plain = IVAE(**kw).fit(X, y)  # 108 training rows: 4 batches a pass
    one_pass = IVAE(**kw, steps_per_epoch=4).fit(X, y)
    other = IVAE(**kw, steps_per_epoch=9).fit(X, y)
    np.testing.assert_array_equal(plain.transform(X, y), one_pass.transform(X, y))
    assert not np.array_equal(plain.transform(X, y), other.transform(X, y))
    for cls in (IVAE, ICaRL):
        with pytest.raises(InvalidParameterError, match="steps_per_epoch"):
            cls(**kw, steps_per_epoch=-1).fit(X, y)
