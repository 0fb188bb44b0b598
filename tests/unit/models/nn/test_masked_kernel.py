"""The Sparse VAE decoder kernel against a per-feature loop through autograd."""

from __future__ import annotations

import pytest
import torch

from identrep.models.nn._masked_kernel import masked_decoder
from identrep.models.nn.sparse_vae import MaskedFeatureDecoder


def _tol(dtype):
    if dtype == torch.float64:
        return dict(rtol=1e-5, atol=1e-7)
    return dict(rtol=1e-4, atol=1e-5)


def _loop(dec: MaskedFeatureDecoder, z):
    """One pass of the shared network per feature (the authors' structure)."""
    cols = []
    for j in range(dec.n_features):
        h = dec.act(dec.first(z * dec.W[j]))
        for layer in dec.rest:
            h = dec.act(layer(h))
        cols.append(h @ dec.head_weight[j] + dec.head_bias[j])
    return torch.stack(cols, 1)


def _recomputing(monkeypatch):
    """Make the default kernel recompute every block in its backward."""
    import identrep.models.nn._masked_kernel as mk

    defaults = list(mk.masked_decoder.__defaults__)
    defaults[-1] = 0  # keep_elements
    monkeypatch.setattr(mk.masked_decoder, "__defaults__", tuple(defaults))


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "tanh", "gelu"])
@pytest.mark.parametrize("chunk_size", [None, 1, 3])
@pytest.mark.parametrize("recompute", [False, True])
def test_outputs_and_every_gradient_equal_the_loop(
    seed, dtype, activation, chunk_size, recompute, monkeypatch
):
    if recompute:
        _recomputing(monkeypatch)
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(3, 7, (16, 12), activation, chunk_size).to(dtype)
    z = torch.randn(6, 3, dtype=dtype, requires_grad=True)
    out, ref = dec(z), _loop(dec, z)
    torch.testing.assert_close(out, ref, **_tol(dtype))
    weights = torch.randn_like(out)  # a generic upstream gradient
    params = [z, *dec.parameters()]
    got = torch.autograd.grad((out * weights).sum(), params)
    expect = torch.autograd.grad((ref * weights).sum(), params)
    for name, g, r in zip(
        ["z", *dict(dec.named_parameters())], got, expect, strict=True
    ):
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(
            g, r, **_tol(dtype), msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize("keep_elements", [0, 2**20])
def test_gradcheck_in_float64(seed, keep_elements):
    torch.manual_seed(seed)
    dec = MaskedFeatureDecoder(2, 5, (4, 3), chunk_size=2).double()
    z = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    layers = [(layer.weight, layer.bias) for layer in dec.rest]

    def fn(z, W, V, A, c):
        return masked_decoder(
            z,
            W,
            V,
            layers,
            A,
            c,
            block_elements=2 * 3 * 4,
            keep_elements=keep_elements,
        )

    args = (z, dec.W, dec.first.weight, dec.head_weight, dec.head_bias)
    assert torch.autograd.gradcheck(fn, args)


def test_the_forward_keeps_no_autograd_graph_of_its_blocks(monkeypatch):
    _recomputing(monkeypatch)
    dec = MaskedFeatureDecoder(3, 50, (16, 16), chunk_size=5)
    out = dec(torch.randn(4, 3))
    assert out.grad_fn.kept is None  # nothing but the inputs is kept
    # one node (the kernel) whose saved tensors are its inputs only
    assert type(out.grad_fn).__name__ == "MaskedDecoderFunctionBackward"
    n_params = sum(p.numel() for p in dec.parameters())
    saved = sum(t.numel() for t in out.grad_fn.saved_tensors)
    assert saved == n_params + 4 * 3


def test_activations_are_kept_only_below_the_limit_and_only_for_a_backward():
    dec = MaskedFeatureDecoder(3, 10, (8, 8), chunk_size=5)
    z = torch.randn(4, 3)
    V, c = dec.first.weight, dec.head_bias
    layers = [(layer.weight, layer.bias) for layer in dec.rest]
    # 10 features x (4 rows x 16 activations + 3 x 8 of U) = 880 elements
    args = (z, dec.W, V, layers, dec.head_weight, c)
    kept = masked_decoder(*args, block_elements=4 * 5 * 8, keep_elements=880)
    assert len(kept.grad_fn.kept) == 2  # blocks of 5 features
    assert masked_decoder(*args, keep_elements=879).grad_fn.kept is None
    with torch.no_grad():
        assert masked_decoder(*args, keep_elements=880).grad_fn is None
    # a second backward through the kept activations (retain_graph) agrees
    out = masked_decoder(*args)
    (g1,) = torch.autograd.grad(out.sum(), dec.W, retain_graph=True)
    (g2,) = torch.autograd.grad(out.sum(), dec.W)
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)
