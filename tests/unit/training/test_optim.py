"""The optimisers of fit_module: the CPU foreach form takes the same steps as
torch's per-parameter loop, to the bit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from identrep.training._optim import OPTIMIZERS, make_optimizer


def _net(seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(7, 16), nn.LeakyReLU(), nn.Linear(16, 3))


def _train(net: nn.Module, opt, seed: int, dtype, steps: int = 25) -> list[float]:
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 7, generator=gen, dtype=dtype)
        y = torch.randn(32, 3, generator=gen, dtype=dtype)
        loss = (net(x) - y).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_foreach_steps_equal_the_per_parameter_loop(
    name, weight_decay, dtype, seed
):
    fast, ref = _net(seed).to(dtype), _net(seed).to(dtype)
    opt = make_optimizer(name, list(fast.parameters()), 1e-2, weight_decay)
    assert opt.defaults["foreach"] is True  # the path under test is taken
    ref_opt = OPTIMIZERS[name](
        list(ref.parameters()), lr=1e-2, weight_decay=weight_decay, foreach=False
    )
    assert _train(fast, opt, seed, dtype) == _train(ref, ref_opt, seed, dtype)
    for a, b in zip(fast.parameters(), ref.parameters(), strict=True):
        assert torch.equal(a, b)  # bitwise, not approximately


def test_no_parameters_keeps_torchs_error():
    with pytest.raises(ValueError, match="empty parameter list"):
        make_optimizer("adam", [], 1e-3)
