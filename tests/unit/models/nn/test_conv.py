"""ConvEncoder: shapes, gradients, a little training, use as MTRN's extractor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from identrep.datasets import make_shapes_tasks
from identrep.models.multitask.mtrn import MTRN
from identrep.models.nn import ConvEncoder
from identrep.utils.seeding import seeded

P = 64 * 64 * 3


def test_output_shape_dtype_and_layout(dtype):
    with seeded(0):
        net = ConvEncoder(6).to(dtype)
    x = torch.rand(5, P, dtype=dtype)
    out = net(x)
    assert out.shape == (5, 6) and out.dtype == dtype
    # a flat row is an image in (height, width, channels) order
    torch.testing.assert_close(net(x.reshape(5, 64, 64, 3)), out)
    # spatial sizes 64 -> 32 -> 16 -> 8 -> 4, so the head sees 64 * 4 * 4 features
    assert net.head[1].in_features == 1024
    small = ConvEncoder(3, image_shape=(32, 16, 1), channels=(4, 4, 8, 8), hidden=16)
    assert small(torch.rand(2, 32 * 16)).shape == (2, 3)


def test_every_parameter_gets_a_gradient():
    with seeded(1):
        net = ConvEncoder(4)
    net(torch.rand(3, P)).square().sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_it_fits_a_tiny_batch():
    """Regressing 16 images on their 6 factors: the training loss drops."""
    data = make_shapes_tasks(n_tasks=1, n_samples=16, random_state=0)
    x = torch.tensor(data.X)
    z = torch.tensor(data.Z, dtype=torch.float32)
    with seeded(0):
        net = ConvEncoder(6)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = (net(x) - z).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # observed over seeds 0-4: 1.0 -> 0.008-0.023 in 60 steps; require a 5x drop
    assert losses[-1] < 0.2 * losses[0]


def test_errors():
    with pytest.raises(ValueError, match="multiples of 16"):
        ConvEncoder(3, image_shape=(60, 64, 3))
    with pytest.raises(ValueError, match="channels must be 4 positive ints"):
        ConvEncoder(3, channels=(8, 8))
    with pytest.raises(ValueError, match="expects rows of 12288"):
        ConvEncoder(3)(torch.zeros(2, 100))


def test_as_the_extractor_of_mtrn():
    data = make_shapes_tasks(n_tasks=4, n_samples=12, random_state=0)
    model = MTRN(
        n_latents=6,
        extractor=lambda p, d: ConvEncoder(d),
        max_epochs=2,
        batch_size=24,
        patience=None,
        random_state=0,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    assert isinstance(model.module_.extractor, ConvEncoder)
    Z = model.transform(data.X)
    assert Z.shape == (48, 6) and np.isfinite(Z).all()
