"""The fixed input standardisation: float64 statistics and arithmetic, any dtype out."""

from __future__ import annotations

import torch

from identrep.models.nn.mlp import MLP, Standardize


def test_standardize_keeps_float64_statistics_when_the_module_is_cast():
    s = torch.nn.Sequential(
        Standardize(torch.tensor([1e8 + 0.25], dtype=torch.float64), torch.ones(1) / 2),
        MLP(1, [], 1),
    ).to(torch.float32)
    std = s[0]
    assert std.mean.dtype == torch.float64 and std.out_dtype == torch.float32
    x = torch.tensor([[1e8 + 0.75], [1e8 - 0.25]], dtype=torch.float64)
    out = std(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tensor([[1.0], [-1.0]]))  # cast first: 0
    # saved and loaded statistics keep their precision
    fresh = Standardize(torch.zeros(1), torch.ones(1)).to(torch.float32)
    fresh.load_state_dict(std.state_dict())
    assert fresh.mean.item() == 1e8 + 0.25


def test_standardize_clips_far_inputs_to_a_finite_output():
    std = Standardize(torch.zeros(2), torch.ones(2)).to(torch.float32)
    out = std(torch.tensor([[1e40, -1e300]], dtype=torch.float64))
    assert out.dtype == torch.float32  # what the float32 layers after it get
    assert torch.isfinite(out).all() and out[0, 0] > 1e18 and out[0, 1] < -1e18
