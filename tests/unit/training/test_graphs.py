"""Replayed CUDA-graph training steps (training/_graphs.py, ``cuda_graphs``).

On CUDA, a run whose full-size batches are replayed from one recorded graph must
equal, to the bit, the same run stepping eagerly with the same (capturable)
optimiser: parameters with ``torch.equal``, histories with ``==``. The data leave a
smaller last batch, so the eager fallback between replays is part of every
comparison, and the cosine schedule, gradient clipping and validation are on. On
the CPU the context must change nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from identrep.training import TensorBatches, cuda_graphs, fit_module
from identrep.training._graphs import _flatten, graph_mode
from identrep.utils.seeding import seeded

cuda = pytest.mark.gpu


class _Net(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)[:, 0]


def _loss(module, batch):
    x, y = batch
    return 0.5 * (module(x) - y).square().mean()


def _weighted_loss(module, batch):
    x, y = batch
    w = (y > -10).sum()  # a tensor weight, as MTRN's masked losses return
    return 0.5 * (module(x) - y).square().sum() / w, w


def _run(device, seed=0, loss=_loss, **kw):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(250, 3, generator=g)
    y = torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.3 * torch.randn(250, generator=g)
    x, y = x.to(device), y.to(device)
    with seeded(seed):
        net = _Net().to(device)
    # 210 training rows in batches of 32: six full batches and one of 18
    train = TensorBatches(x[:210], y[:210], batch_size=32, seed=seed)
    val = TensorBatches(x[210:], y[210:], batch_size=64, shuffle=False)
    settings = dict(
        lr=3e-2, max_epochs=12, patience=4, lr_schedule="cosine", grad_clip=1.0
    )
    hist = fit_module(net, loss, train, val_batches=val, **{**settings, **kw})
    return net, hist


def _same(a, b):
    (net_a, h_a), (net_b, h_b) = a, b
    for (ka, va), (kb, vb) in zip(
        net_a.state_dict().items(), net_b.state_dict().items(), strict=True
    ):
        assert ka == kb and torch.equal(va, vb), (ka, (va - vb).abs().max())
    for key in ("train_loss", "val_loss", "best_epoch", "best_loss", "n_epochs"):
        assert h_a[key] == h_b[key], key


def test_cpu_fit_unchanged_inside_context():
    """On the CPU the context is a no-op: same bits as outside it."""
    plain = _run("cpu")
    with cuda_graphs():
        inside = _run("cpu")
    _same(plain, inside)


class _B(NamedTuple):
    x: torch.Tensor
    fit: torch.Tensor | None
    n: int


def test_flatten_rebuilds_nested_batches():
    batch = (_B(torch.ones(2), None, 3), [torch.zeros(1), (torch.arange(3),)])
    leaves, build = _flatten(batch)
    assert len(leaves) == 5  # x, None, 3, zeros, arange
    again = build(leaves)
    assert isinstance(again[0], _B) and again[0].fit is None and again[0].n == 3
    assert torch.equal(again[1][1][0], torch.arange(3))
    assert isinstance(again[1], list) and isinstance(again[1][1], tuple)


def test_flatten_dicts_and_refuses_other_leaves():
    leaves, build = _flatten({"x": torch.ones(2), "m": [None, 2.0]})
    assert len(leaves) == 3
    again = build(leaves)
    assert list(again) == ["x", "m"] and again["m"] == [None, 2.0]
    with pytest.raises(TypeError, match="ndarray"):
        _flatten((torch.ones(1), np.ones(2)))


def test_mode_outside_context_and_on_cpu_is_none():
    p = [nn.Parameter(torch.zeros(2))]
    assert graph_mode(p, "adam") is None
    with cuda_graphs():
        assert graph_mode(p, "sgd") is None  # CPU parameters: ordinary step


@cuda
@pytest.mark.parametrize("loss", [_loss, _weighted_loss], ids=["scalar", "weighted"])
def test_replayed_run_equals_eager_capturable_run(loss):
    with cuda_graphs(capture=False):
        eager = _run("cuda", loss=loss)
    with cuda_graphs():
        replayed = _run("cuda", loss=loss)
    _same(eager, replayed)
    # and it trains: the validation loss falls
    assert replayed[1]["best_loss"] < replayed[1]["val_loss"][0]


@cuda
def test_replayed_run_close_to_default_optimizer():
    """The capturable optimiser differs from the default in the last bits only."""
    default = _run("cuda")
    with cuda_graphs():
        replayed = _run("cuda")
    for va, vb in zip(
        default[0].state_dict().values(),
        replayed[0].state_dict().values(),
        strict=True,
    ):
        torch.testing.assert_close(va, vb, rtol=1e-4, atol=1e-5)


@cuda
def test_resume_in_graph_mode_equals_one_run(tmp_path):
    with cuda_graphs():
        whole = _run("cuda")
        path = tmp_path / "run.ckpt"
        for _ in range(40):
            parts = _run("cuda", checkpoint=path, max_time=1e-9)
            if not parts[1]["stopped_on_time"]:
                break
    _same(whole, parts)


@cuda
def test_sgd_refused_and_empty_batch_named():
    with cuda_graphs(), pytest.raises(ValueError, match="optimizers"):
        _run("cuda", optimizer="sgd")

    def empty_first(module, batch):
        x, y = batch
        w = (y > np.inf).sum()  # no entry scored
        return 0.5 * (module(x) - y).square().sum() / w.clamp_min(1), w

    with cuda_graphs(), pytest.raises(ValueError, match="no weight"):
        _run("cuda", loss=empty_first)
