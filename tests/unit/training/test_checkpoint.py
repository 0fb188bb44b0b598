"""Checkpoint and resume of fit_module (training/checkpoint.py).

A run stopped after some epochs and resumed must end with exactly the parameters,
history and best epoch of the same run never stopped (``torch.equal``, lists of
floats compared with ``==``): any state the checkpoint misses (optimiser moments,
schedule step, batch order, dropout noise, early-stopping state) changes the bits.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import identrep.training.checkpoint as ckpt_mod
from identrep.exceptions import CheckpointError
from identrep.training import TensorBatches, fit_module
from identrep.utils.seeding import seeded


class _Net(nn.Module):
    """A small regression net with dropout, so the global torch RNG matters."""

    def __init__(self, width=16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(3, width), nn.Tanh(), nn.Dropout(0.2), nn.Linear(width, 1)
        )

    def forward(self, x):
        return self.body(x)[:, 0]


def _loss(module, batch):
    x, y = batch
    return 0.5 * (module(x) - y).square().mean()


def _data(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(240, 3, generator=g)
    y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.3 * torch.randn(240, generator=g)
    return x, y


#: Every seed 0-9 stops early (after 5-24 epochs), so the early-stopping state
#: is part of every comparison; interruptions come at epoch 4 or before.
SETTINGS = dict(lr=3e-2, max_epochs=40, patience=4, lr_schedule="cosine")


def _run(seed, init_seed=None, width=16, data_seed=None, **kw):
    """One fit_module call as an estimator makes it: a fresh module with a seeded
    initialisation, fresh batch sources with their seed, training under seeded()."""
    x, y = _data(seed if data_seed is None else data_seed)
    with seeded(seed if init_seed is None else init_seed):
        net = _Net(width)
    train = TensorBatches(x[:200], y[:200], batch_size=32, seed=seed)
    val = TensorBatches(x[200:], y[200:], batch_size=64, shuffle=False)
    with seeded(seed + 100):
        hist = fit_module(net, _loss, train, val_batches=val, **{**SETTINGS, **kw})
    return net, hist


def _same_run(a, b):
    (net_a, h_a), (net_b, h_b) = a, b
    for (ka, va), (kb, vb) in zip(
        net_a.state_dict().items(), net_b.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), ka
    for key in ("train_loss", "val_loss", "best_epoch", "best_loss", "n_epochs"):
        assert h_a[key] == h_b[key], key
    assert h_a["stopped_early"] == h_b["stopped_early"]


class _Stop(Exception):
    pass


def _raise_at(k):
    def callback(epoch, module, history):
        if epoch == k:
            raise _Stop

    return callback


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_interrupted_by_an_error_and_resumed_is_the_same_run(tmp_path, seed):
    path = tmp_path / "run.ckpt"
    plain = _run(seed)
    assert plain[1]["stopped_early"]  # early stopping is part of what is compared
    with pytest.raises(_Stop):
        _run(seed, checkpoint=path, callback=_raise_at(2))
    assert torch.load(path, weights_only=True)["epoch"] == 1  # epoch 2 never saved
    _same_run(plain, _run(seed, checkpoint=path))


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_sessions_stopped_on_time_continue_to_the_same_run(tmp_path, seed):
    """max_time ends each call after one epoch (any epoch outlasts 1e-9 s) and
    writes a checkpoint; the calls together are the run without a budget, also
    with the cosine schedule (which ignores max_time when checkpointing)."""
    path = tmp_path / "run.ckpt"
    plain = _run(seed)
    calls = 0
    while True:
        calls += 1
        net, hist = _run(seed, checkpoint=path, max_time=1e-9)
        if not hist["stopped_on_time"]:
            break
        assert hist["n_epochs"] == calls
    assert calls == plain[1]["n_epochs"]
    _same_run(plain, (net, hist))
    # a finished run is returned as it was, without training again
    again = _run(seed, checkpoint=path)
    _same_run(plain, again)
    assert again[1]["n_epochs"] == plain[1]["n_epochs"]


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_constant_rate_run_continues_with_a_larger_budget(tmp_path, seed):
    path = tmp_path / "run.ckpt"
    kw = dict(lr_schedule=None, patience=None)
    plain = _run(seed, max_epochs=12, **kw)
    first = _run(seed, checkpoint=path, max_epochs=5, **kw)
    assert first[1]["n_epochs"] == 5
    _same_run(plain, _run(seed, checkpoint=path, max_epochs=12, **kw))


def test_checkpoint_intervals(tmp_path, seed):
    path = tmp_path / "run.ckpt"
    with pytest.raises(_Stop):
        _run(seed, checkpoint=path, checkpoint_every=2, callback=_raise_at(4))
    assert torch.load(path, weights_only=True)["epoch"] == 3  # epochs 1 and 3
    path.unlink()
    with pytest.raises(_Stop):  # by seconds only, none due within an hour
        _run(
            seed,
            checkpoint=path,
            checkpoint_every=None,
            checkpoint_seconds=3600,
            callback=_raise_at(3),
        )
    assert not path.exists()


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch, seed):
    """The 4th write dies half-way (bytes written, then an error): the file still
    holds epoch 2 whole, no temporary file is left, and the run resumes from it."""
    path = tmp_path / "run.ckpt"
    real_save, writes = torch.save, []

    def dying_save(obj, f, *args, **kwargs):
        writes.append(obj["epoch"])
        if len(writes) == 4:
            with open(f, "wb") as fh:
                fh.write(b"PK\x03\x04 half a checkpoint")
            raise OSError("disk full")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt_mod.torch, "save", dying_save)
    with pytest.raises(OSError, match="disk full"):
        _run(seed, checkpoint=path)
    monkeypatch.setattr(ckpt_mod.torch, "save", real_save)
    assert writes == [0, 1, 2, 3]
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"]
    assert torch.load(path, weights_only=True)["epoch"] == 2
    _same_run(_run(seed), _run(seed, checkpoint=path))


def test_a_checkpoint_of_another_run_is_refused(tmp_path, seed):
    path = tmp_path / "run.ckpt"
    with pytest.raises(_Stop):
        _run(seed, checkpoint=path, callback=_raise_at(1))
    with pytest.raises(CheckpointError, match=r"lr 0\.03 there, 0\.01 here"):
        _run(seed, checkpoint=path, lr=1e-2)
    with pytest.raises(CheckpointError, match="patience 4 there, 6 here"):
        _run(seed, checkpoint=path, patience=6)
    with pytest.raises(CheckpointError, match="max_epochs 40 there, 50 here"):
        _run(seed, checkpoint=path, max_epochs=50)  # the cosine plan changes
    with pytest.raises(CheckpointError, match="initial parameters differ"):
        _run(seed, init_seed=seed + 1, checkpoint=path)
    with pytest.raises(CheckpointError, match="first training batch differs"):
        _run(seed, data_seed=seed + 1, checkpoint=path)
    with pytest.raises(
        CheckpointError, match=r"body\.0\.weight \(16, 3\) float32 there, \(8, 3\)"
    ):
        _run(seed, width=8, checkpoint=path)


def test_unreadable_or_foreign_files_are_refused(tmp_path, seed):
    path = tmp_path / "run.ckpt"
    path.write_bytes(b"\x00not a checkpoint at all")
    with pytest.raises(CheckpointError, match="Cannot read the training checkpoint"):
        _run(seed, checkpoint=path)
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(CheckpointError, match="not an identrep training checkpoint"):
        _run(seed, checkpoint=path)
    with pytest.raises(_Stop):  # a real one, then truncated
        _run(seed, checkpoint=tmp_path / "ok.ckpt", callback=_raise_at(1))
    data = (tmp_path / "ok.ckpt").read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="damaged or not a checkpoint"):
        _run(seed, checkpoint=path)


def test_a_batch_source_without_state_is_refused(tmp_path):
    class Shuffled:  # re-iterable, random, but without state_dict
        def __iter__(self):
            x = torch.randn(8, 3)
            yield x, x[:, 0]

    with pytest.raises(TypeError, match=r"train_batches \(Shuffled\) has no state"):
        fit_module(
            _Net(), _loss, Shuffled(), lr=1e-2, max_epochs=2, checkpoint=tmp_path / "c"
        )
    net = _Net()  # a list of batches is stateless: accepted
    x = torch.randn(8, 3)
    hist = fit_module(
        net, _loss, [(x, x[:, 0])], lr=1e-2, max_epochs=2, checkpoint=tmp_path / "c"
    )
    assert hist["n_epochs"] == 2 and math.isfinite(hist["train_loss"][-1])
