"""Tests of the shared training loop and its batch helpers (training/loop.py)."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from identrep.exceptions import InvalidParameterError
from identrep.training import (
    IndexBatches,
    TensorBatches,
    fit_module,
    split_within_tasks,
)

# ------------------------------------------------------------------- batches


def _epochs(batches, n=3):
    return [[b[0].squeeze(-1).tolist() for b in batches] for _ in range(n)]


def test_tensor_batches_cover_every_row_once_per_epoch(seed):
    x = torch.arange(10.0)[:, None]
    batches = TensorBatches(x, x[:, 0] * 2, batch_size=4, seed=seed)
    assert len(batches) == 3
    for epoch in _epochs(batches):
        assert [len(b) for b in epoch] == [4, 4, 2]
        assert sorted(sum(epoch, [])) == list(range(10))
    for xb, yb in batches:  # rows stay aligned across tensors
        torch.testing.assert_close(yb, 2 * xb[:, 0])


def test_tensor_batches_reshuffle_and_are_reproducible(seed):
    x = torch.arange(50.0)[:, None]
    a = _epochs(TensorBatches(x, batch_size=8, seed=seed))
    b = _epochs(TensorBatches(x, batch_size=8, seed=seed))
    c = _epochs(TensorBatches(x, batch_size=8, seed=seed + 1))
    assert a == b and a != c
    assert a[0] != a[1]  # a new order every epoch


def test_unshuffled_and_drop_last():
    x = torch.arange(10.0)[:, None]
    ordered = _epochs(TensorBatches(x, batch_size=4, shuffle=False), 1)[0]
    assert ordered == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    dropped = TensorBatches(x, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and all(len(b[0]) == 4 for b in dropped)


def test_grouped_batches_keep_groups_whole(seed):
    groups = np.repeat(np.arange(12), [3, 5, 7, 2, 9, 4, 4, 1, 6, 3, 25, 5])
    batches = IndexBatches(len(groups), 10, groups=groups, seed=seed)
    n_before = len(batches)
    for _ in range(3):
        seen = []
        for idx in batches:
            idx = idx.numpy()
            assert len(idx) <= 10
            seen.extend(idx.tolist())
            for g in np.unique(groups[idx]):
                size = (groups == g).sum()
                if size <= 10:  # small groups are never split
                    assert (groups[idx] == g).sum() == size
        assert sorted(seen) == list(range(len(groups)))
    # the group of 25 is cut into 3 near-equal chunks of <= 10
    big = [int((groups[i.numpy()] == 10).sum()) for i in batches]
    assert sorted(b for b in big if b) == [8, 8, 9]
    # len() does not consume randomness
    assert n_before > 0
    a = IndexBatches(len(groups), 10, groups=groups, seed=seed)
    b = IndexBatches(len(groups), 10, groups=groups, seed=seed)
    len(a)
    assert [i.tolist() for i in a] == [i.tolist() for i in b]


def test_batch_helpers_validate_arguments():
    msg = r"The 'batch_size' parameter of IndexBatches must be an int in the range "
    with pytest.raises(InvalidParameterError, match=msg + r"\[1, inf\); got 0\."):
        IndexBatches(5, 0)
    with pytest.raises(InvalidParameterError, match=msg + r".*; got True\."):
        IndexBatches(5, True)  # a bool is never a count
    with pytest.raises(InvalidParameterError, match=r"'n_items' .* got 0\."):
        IndexBatches(0, 2)
    with pytest.raises(InvalidParameterError, match=r"'shuffle' .* must be a bool"):
        IndexBatches(5, 2, shuffle=1)
    with pytest.raises(ValueError, match="groups must have shape"):
        IndexBatches(5, 2, groups=[0, 1])
    with pytest.raises(ValueError, match="same first dimension"):
        TensorBatches(torch.zeros(3), torch.zeros(4), batch_size=2)


# --------------------------------------------------------------------- split


def test_split_within_tasks(rng):
    counts = [1, 2, 3, 10, 50]
    t = np.repeat(np.arange(5), counts)
    rng.shuffle(t)
    train, val = split_within_tasks(t, 0.2, rng)
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(len(t)))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(val) > 0)
    n_train = np.bincount(t[train], minlength=5)
    n_val = np.bincount(t[val], minlength=5)
    assert np.all(n_train >= 1)  # every task keeps a training sample
    np.testing.assert_array_equal(n_val, [0, 0, 1, 2, 10])
    a = split_within_tasks(t, 0.2, np.random.default_rng(3))
    b = split_within_tasks(t, 0.2, np.random.default_rng(3))
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    train0, val0 = split_within_tasks(t, 0.0)
    assert val0.size == 0 and train0.size == len(t)


def test_split_within_tasks_rejects_bad_input():
    msg = (
        r"The 'val_fraction' parameter of split_within_tasks\(\) must be a float in "
        r"the range \[0, 1\); got 1\.0\."
    )
    with pytest.raises(InvalidParameterError, match=msg):
        split_within_tasks(np.zeros(4, dtype=int), 1.0)
    with pytest.raises(InvalidParameterError, match=r"'val_fraction' .*; got True"):
        split_within_tasks(np.zeros(4, dtype=int), True)
    with pytest.raises(InvalidParameterError, match=r"'rng' parameter .*; got 'a'"):
        split_within_tasks(np.zeros(4, dtype=int), 0.5, "a")
    with pytest.raises(ValueError, match="1-D integer array"):
        split_within_tasks(np.zeros(4), 0.5)


# ---------------------------------------------------------------------- loop


class Scalar(nn.Module):
    """y_hat = w x with a single weight w (starting at 0)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return self.w * x


def mse(module, batch):
    x, y = batch
    return 0.5 * (module(x) - y).square().mean()


def _data(slope, seed, n=64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g)
    return x, slope * x


def test_fit_module_fits_a_regression(seed):
    x, y = _data(2.0, seed)
    module = Scalar()
    hist = fit_module(
        module,
        mse,
        TensorBatches(x, y, batch_size=16, seed=seed),
        lr=0.05,
        max_epochs=100,
    )
    assert abs(module.w.item() - 2.0) < 1e-2
    assert hist["n_epochs"] == 100 and not hist["stopped_early"]
    assert hist["val_loss"] == [] and hist["best_epoch"] == 99
    assert hist["train_loss"][-1] < hist["train_loss"][0]
    assert hist["seconds"] > 0 and not module.training


def test_early_stopping_restores_the_best_weights(seed):
    """Training pulls w from 0 towards 2, validation wants 0.5: val loss dips, rises."""
    x, y = _data(2.0, seed)
    xv, yv = _data(0.5, seed + 100)
    weights = []
    module = Scalar()
    hist = fit_module(
        module,
        mse,
        TensorBatches(x, y, batch_size=16, seed=seed),
        lr=0.01,
        max_epochs=500,
        val_batches=[(xv, yv)],
        patience=5,
        optimizer="sgd",
        callback=lambda e, m, h: weights.append(m.w.item()),
    )
    val = np.array(hist["val_loss"])
    best = int(np.argmin(val))
    assert hist["stopped_early"] and hist["best_epoch"] == best
    assert hist["n_epochs"] == best + 1 + 5 < 500
    assert val[-1] > val[best]  # it did get worse
    assert module.w.item() == pytest.approx(weights[best], abs=0)
    assert abs(weights[best] - 0.5) < abs(weights[-1] - 0.5)
    assert hist["best_loss"] == pytest.approx(val[best])


def test_best_state_restored_without_patience(seed):
    x, y = _data(2.0, seed)
    xv, yv = _data(0.5, seed + 100)
    module = Scalar()
    hist = fit_module(
        module,
        mse,
        [(x, y)],
        lr=0.05,
        max_epochs=60,
        val_batches=[(xv, yv)],
        optimizer="sgd",
    )
    assert hist["n_epochs"] == 60 and not hist["stopped_early"]
    assert hist["best_epoch"] == int(np.argmin(hist["val_loss"])) < 59
    assert abs(module.w.item() - 0.5) < abs(2.0 - 0.5)


def test_reproducible(seed):
    def run():
        x, y = _data(1.5, seed)
        torch.manual_seed(seed)
        module = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
        loss = lambda m, b: 0.5 * (m(b[0][:, None])[:, 0] - b[1]).square().mean()
        hist = fit_module(
            module,
            loss,
            TensorBatches(x, y, batch_size=8, seed=seed),
            lr=1e-2,
            max_epochs=5,
            lr_schedule="cosine",
        )
        return hist["train_loss"], [p.detach().clone() for p in module.parameters()]

    (la, pa), (lb, pb) = run(), run()
    assert la == lb
    for a, b in zip(pa, pb, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_gradient_clipping_bounds_each_step():
    x, y = _data(100.0, 0)
    module = Scalar()
    fit_module(
        module, mse, [(x, y)], lr=1.0, max_epochs=3, grad_clip=0.1, optimizer="sgd"
    )
    assert module.w.item() == pytest.approx(0.3, rel=1e-6)  # 3 steps of norm 0.1


def test_cosine_schedule_anneals_to_min_lr():
    x, y = _data(100.0, 0)
    module = Scalar()
    steps = []

    def loss(m, b):
        steps.append(m.w.item())
        return mse(m, b)

    # SGD with a clipped unit gradient: the step equals the learning rate
    fit_module(
        module,
        loss,
        [(x, y)] * 2,
        lr=1.0,
        max_epochs=3,
        grad_clip=1e-6,
        optimizer="sgd",
        lr_schedule="cosine",
        min_lr_ratio=0.1,
    )
    lrs = np.diff(steps) / 1e-6
    expected = [0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * k / 5)) for k in range(5)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-4)


def test_post_epoch_runs_before_validation_without_grad():
    """A closed-form block update after each epoch is seen by validation."""
    x, y = _data(2.0, 0)
    seen = []

    def set_to_optimum(m):
        assert not torch.is_grad_enabled() and not m.training
        m.w.copy_(torch.tensor(2.0))

    hist = fit_module(
        Scalar(),
        mse,
        [(x, y)],
        lr=1e-3,
        max_epochs=3,
        val_batches=[(x, y)],
        post_epoch=set_to_optimum,
        callback=lambda e, m, h: seen.append(m.w.item()),
    )
    assert seen == [2.0, 2.0, 2.0]
    assert max(hist["val_loss"]) < 1e-12 < hist["train_loss"][0]


def test_weighted_epoch_means():
    """loss_fn may return (loss, weight); epoch losses are weighted means."""
    module = Scalar()
    loss = lambda m, b: (m.w * 0 + b[0], b[1])
    hist = fit_module(
        module,
        loss,
        [(1.0, 1), (4.0, 3), (9.0, 0)],
        lr=0.1,
        max_epochs=1,
        val_batches=[(2.0, 1), (5.0, 1)],
    )
    assert hist["train_loss"] == [pytest.approx(3.25)]
    assert hist["val_loss"] == [pytest.approx(3.5)]


def test_callback_can_stop_training():
    x, y = _data(2.0, 0)
    hist = fit_module(
        Scalar(), mse, [(x, y)], lr=0.1, max_epochs=50, callback=lambda e, m, h: e == 3
    )
    assert hist["n_epochs"] == 4 and hist["stopped_early"]


def test_progress_line_only_when_enabled(capsys):
    x, y = _data(2.0, 0)
    fit_module(Scalar(), mse, [(x, y)], lr=0.1, max_epochs=2)
    assert capsys.readouterr().err == ""
    fit_module(
        Scalar(),
        mse,
        [(x, y)],
        lr=0.1,
        max_epochs=2,
        progress=True,
        desc="demo",
        val_batches=[(x, y)],
    )
    err = capsys.readouterr().err
    assert "demo: 2/2 epochs" in err and "val" in err and err.endswith("\n")


_FLOAT_POS = r"a float in the range \(0, inf\)"
_INT_POS = r"an int in the range \[1, inf\)"


@pytest.mark.parametrize(
    ("kwargs", "allowed"),
    [
        ({"lr": 0.0}, _FLOAT_POS),
        ({"max_epochs": 0}, _INT_POS),
        ({"max_epochs": True}, _INT_POS),  # a bool is never a count
        ({"patience": 0}, _INT_POS + " or None"),
        ({"patience": 2.0}, _INT_POS + " or None"),
        ({"grad_clip": -1.0}, _FLOAT_POS + " or None"),
        ({"grad_clip": True}, _FLOAT_POS + " or None"),
        ({"weight_decay": -1.0}, r"a float in the range \[0, inf\)"),
        ({"optimizer": "lbfgs"}, r"a str among \{'adam', 'adamw', 'sgd'\}"),
        ({"lr_schedule": "step"}, r"a str among \{'cosine'\} or None"),
        ({"min_lr_ratio": 2.0}, r"a float in the range \[0, 1\]"),
        ({"progress": 1}, "a bool"),
        ({"post_epoch": 3}, "a callable or None"),
    ],
)
def test_fit_module_validates_hyperparameters(kwargs, allowed):
    """The declared constraints of TRAINING_CONSTRAINTS, in the one wording."""
    x, y = _data(2.0, 0)
    base = {"lr": 0.1, "max_epochs": 2}
    ((name, value),) = kwargs.items()
    match = rf"The '{name}' parameter of fit_module\(\) must be {allowed}; got "
    with pytest.raises(InvalidParameterError, match=match + re.escape(repr(value))):
        fit_module(Scalar(), mse, [(x, y)], **{**base, **kwargs})


def test_one_shot_iterators_are_rejected():
    x, y = _data(2.0, 0)
    with pytest.raises(TypeError, match="train_batches must be re-iterable"):
        fit_module(Scalar(), mse, iter([(x, y)]), lr=0.1, max_epochs=2)
    with pytest.raises(TypeError, match="val_batches must be re-iterable"):
        fit_module(
            Scalar(),
            mse,
            [(x, y)],
            lr=0.1,
            max_epochs=2,
            val_batches=(b for b in [(x, y)]),
        )
    with pytest.raises(TypeError, match="needs train_batches with a len"):
        fit_module(
            Scalar(), mse, _NoLen([(x, y)]), lr=0.1, max_epochs=2, lr_schedule="cosine"
        )


class _NoLen:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


def test_non_finite_loss_raises():
    x, y = _data(2.0, 0)
    bad = lambda m, b: m.w * float("nan")
    with pytest.raises(FloatingPointError, match="non-finite .* lower lr"):
        fit_module(Scalar(), bad, [(x, y)], lr=0.1, max_epochs=2)


def test_a_budget_that_ends_while_validation_improves_is_reported():
    from identrep.exceptions import ConvergenceWarning

    torch.manual_seed(0)
    X = torch.randn(200, 3)
    y = X @ torch.tensor([1.0, -2.0, 0.5])
    net = torch.nn.Linear(3, 1)

    def loss(module, batch):
        xb, yb = batch
        return (module(xb).squeeze(-1) - yb).square().mean()

    batches = TensorBatches(X[:150], y[:150], batch_size=50, seed=0)
    val = TensorBatches(X[150:], y[150:], batch_size=50, shuffle=False)
    with pytest.warns(ConvergenceWarning, match=r"max_epochs=3\) ended while the"):
        h = fit_module(net, loss, batches, lr=1e-3, max_epochs=3, val_batches=val)
    assert h["budget_exhausted_while_improving"] and h["best_epoch"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # converged: silent
        h = fit_module(net, loss, batches, lr=0.1, max_epochs=300, val_batches=val,
                       patience=5)  # fmt: skip
    assert h["stopped_early"] and not h["budget_exhausted_while_improving"]


def test_max_time_stops_after_the_epoch_that_passes_it():
    torch.manual_seed(0)
    X = torch.randn(120, 3)
    y = X @ torch.tensor([1.0, -2.0, 0.5])
    net = torch.nn.Linear(3, 1)
    batches = TensorBatches(X, y, batch_size=40, seed=0)

    def loss(module, batch):
        xb, yb = batch
        return (module(xb).squeeze(-1) - yb).square().mean()

    # a budget far below one epoch's time: exactly one epoch runs
    h = fit_module(net, loss, batches, lr=1e-2, max_epochs=50, max_time=1e-9)
    assert h["n_epochs"] == 1 and h["stopped_on_time"] and not h["stopped_early"]
    h = fit_module(net, loss, batches, lr=1e-2, max_epochs=3, max_time=3600.0)
    assert h["n_epochs"] == 3 and not h["stopped_on_time"]
    with pytest.raises(ValueError, match="max_time"):
        fit_module(net, loss, batches, lr=1e-2, max_epochs=3, max_time=0.0)


def test_a_non_finite_loss_is_caught_on_every_device(device):
    # on an accelerator the loss is summed on the device and checked at the
    # epoch's end (no host sync per step); on the CPU at the step itself
    X = torch.randn(60, 2, device=device)
    net = torch.nn.Linear(2, 1).to(device)

    def loss(module, batch):
        (xb,) = batch
        return module(xb).mean() * torch.tensor(float("nan"), device=device)

    with pytest.raises(FloatingPointError, match="non-finite .* epoch 1"):
        fit_module(net, loss, TensorBatches(X, batch_size=20, seed=0), lr=1e-2,
                   max_epochs=2)  # fmt: skip


def test_cosine_schedule_follows_the_time_budget():
    # loss = w, so every SGD step moves w by minus that step's learning rate
    def run(max_time):
        net = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.zeros_(net.weight)
        batches = TensorBatches(torch.zeros(3, 1), batch_size=1, shuffle=False)
        kw = dict(optimizer="sgd", lr_schedule="cosine", max_time=max_time, lr=1.0)
        fit_module(net, lambda m, b: m.weight.sum(), batches, max_epochs=1, **kw)
        return -float(net.weight)

    # steps: cosine over 2 intervals gives rates 1, 0.505, 0.01
    assert run(None) == pytest.approx(1 + 0.505 + 0.01)
    # a spent time budget puts the schedule at its end after the first step
    assert run(1e-9) == pytest.approx(1 + 0.01 + 0.01)
