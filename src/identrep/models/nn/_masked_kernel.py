"""The Sparse VAE decoder as one autograd node with a hand-written backward.

For a block J of features the masked first layer is a single GEMM: with
``U_j = diag(w_j) V^T`` (n_latents x H1; V the shared first-layer weight),
``A1[b, j] = z_b^T U_j``, so ``A1[:, J] = z @ [U_j]_{j in J}`` is one
(batch x n_latents) @ (n_latents x |J| H1) product; the shared layers are GEMMs over
the (batch |J|) rows and the heads one batched contraction. The backward applies
the chain rule by hand (fused ATen kernels for the ReLU / leaky-ReLU derivatives).
When all blocks' activations fit in ``keep_elements`` (2**27 by default) the
forward keeps them for it, outside autograd's saved tensors; above that the forward
keeps only its inputs and the backward recomputes each block, so nothing but one
block's activations and the parameter gradients is ever alive. Blocks are sized to
about ``block_elements`` hidden activations (2**18 by default, the fastest of
2**14-2**22 measured in ``docs/notes.md``).
The per-parameter derivatives (``d out / d W``, ``d / d V``, ...) are written
beside each product in :meth:`MaskedDecoderFunction.backward`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["BLOCK_ELEMENTS", "KEEP_ELEMENTS", "masked_decoder", "MaskedDecoderFunction"]

#: Default size of one block's hidden activations (elements).
BLOCK_ELEMENTS = 2**18
#: Default limit (elements; 512 MiB of float32) below which the forward keeps
#: every block's activations for the backward instead of recomputing them.
KEEP_ELEMENTS = 2**27


def _act(name: str, slope: float, A: Tensor) -> Tensor:
    if name == "relu":
        return torch.relu(A)
    if name == "leaky_relu":
        return F.leaky_relu(A, slope)
    return {"elu": F.elu, "gelu": F.gelu, "silu": F.silu, "tanh": torch.tanh}[name](A)


def _act_(name: str, slope: float, A: Tensor) -> Tensor:
    """The activation of ``A``, in place for the piecewise-linear ones."""
    if name == "relu":
        return A.relu_()
    if name == "leaky_relu":
        return F.leaky_relu_(A, slope)
    return _act(name, slope, A)


def _act_backward(name: str, slope: float, A: Tensor, g: Tensor) -> Tensor:
    """``g * act'(A)``. For the piecewise-linear activations ``A`` may be the
    activation's output (same sign), and the fused ATen backward kernels are
    used (``masked_fill_`` with a boolean mask is ~15x slower on CPU)."""
    if name == "relu":
        return torch.ops.aten.threshold_backward(g, A, 0.0)
    if name == "leaky_relu" and slope > 0:
        return torch.ops.aten.leaky_relu_backward(g, A, slope, True)
    if name == "leaky_relu":
        return torch.where(A > 0, g, g * slope)
    with torch.enable_grad():  # smooth activations: one elementwise vjp
        a = A.detach().requires_grad_(True)
        (d,) = torch.autograd.grad(_act(name, slope, a), a, g)
    return d


def _blocks(n_rows: int, n_features: int, width: int, elements: int):
    step = max(1, elements // max(1, n_rows * width))
    return [(s, min(s + step, n_features)) for s in range(0, n_features, step)]


def _forward_block(z, W, V, layers, A_head, c, act, slope, keep: bool):
    """Outputs (batch, f) of the features with masks W (f, K); with ``keep`` also
    ``U`` (K, f H1) and, per layer, what the backward needs: the activation
    (piecewise-linear activations, whose sign is the pre-activation's) or the
    (pre-activation, activation) pair."""
    B, K = z.shape
    f, H1 = W.shape[0], V.shape[0]
    # U[k, j, h] = w_jk V[h, k], built contiguous in one pass
    U = (W.T[:, :, None] * V.T[:, None, :]).view(K, f * H1)
    A = torch.mm(z, U).view(B * f, H1)  # (B f, H1): row b f + j is (b, j)
    piecewise = act == "relu" or (act == "leaky_relu" and slope > 0)
    saved = []
    h = _act_(act, slope, A)
    for weight, bias in layers:
        saved.append(h if piecewise else (A, h))
        A = torch.addmm(bias, h, weight.T)
        h = _act_(act, slope, A)
    saved.append(h if piecewise else (A, h))
    out = torch.bmm(h.view(B, f, -1).transpose(0, 1), A_head[:, :, None])
    out = out[:, :, 0].T + c
    return (out, U, saved, h) if keep else out


class MaskedDecoderFunction(torch.autograd.Function):
    """``out[b, j] = a_j . g(w_j * z_b) + c_j`` with a hand-written backward.

    Inputs: ``z`` (batch, K), ``W`` (G, K), ``V`` (H1, K) the first-layer weight
    (no bias), ``A_head`` (G, H_L), ``c`` (G,), the activation's name and slope,
    the block size, then ``weight_i, bias_i`` of every further layer.
    """

    @staticmethod
    def forward(ctx, z, W, V, A_head, c, act, slope, elements, keep_elements, *flat):
        layers = list(zip(flat[0::2], flat[1::2], strict=True))
        sizes = [V.shape[0], *(w.shape[0] for w, _ in layers)]
        blocks = _blocks(z.shape[0], W.shape[0], max(sizes), elements)
        out = z.new_empty(z.shape[0], W.shape[0])
        piecewise = act == "relu" or (act == "leaky_relu" and slope > 0)
        # what keeping every block's activations costs (elements): the hidden
        # activations (and pre-activations for smooth activations) and U
        kept_size = W.shape[0] * (
            z.shape[0] * sum(sizes) * (1 if piecewise else 2) + z.shape[1] * sizes[0]
        )
        keep = any(ctx.needs_input_grad) and kept_size <= keep_elements
        kept = []
        for s, e in blocks:
            res = _forward_block(
                z, W[s:e], V, layers, A_head[s:e], c[s:e], act, slope, keep
            )
            if keep:
                kept.append(res[1:])
                res = res[0]
            out[:, s:e] = res
        ctx.save_for_backward(z, W, V, A_head, c, *flat)
        ctx.act, ctx.slope, ctx.blocks = act, slope, blocks
        ctx.kept = kept if keep else None
        return out

    @staticmethod
    def backward(ctx, g_out):
        z, W, V, A_head, c, *flat = ctx.saved_tensors
        layers = list(zip(flat[0::2], flat[1::2], strict=True))
        act, slope = ctx.act, ctx.slope
        B, K = z.shape
        gz, gW, gV = torch.zeros_like(z), torch.zeros_like(W), torch.zeros_like(V)
        gA, gc = torch.zeros_like(A_head), torch.zeros_like(c)
        gl = [(torch.zeros_like(w), torch.zeros_like(b)) for w, b in layers]
        g_out = g_out.contiguous()
        for bi, (s, e) in enumerate(ctx.blocks):
            f, H1 = e - s, V.shape[0]
            if ctx.kept is not None:  # activations kept by the forward
                U, saved, h = ctx.kept[bi]
            else:  # recomputed, one block at a time
                _, U, saved, h = _forward_block(
                    z, W[s:e], V, layers, A_head[s:e], c[s:e], act, slope, True
                )
            # the sign carrier of each activation, and its input to the next layer
            sign = [t if torch.is_tensor(t) else t[0] for t in saved]
            post = [t if torch.is_tensor(t) else t[1] for t in saved]
            go = g_out[:, s:e]  # (B, f)
            hL = h.view(B, f, -1)
            # out = a_j . h_L + c_j:
            # d/da_j = sum_b go[b, j] h_L[b, j], d/dc_j = sum_b go[b, j]
            gA[s:e] = torch.bmm(hL.permute(1, 2, 0), go.T[:, :, None])[:, :, 0]
            gc[s:e] = go.sum(0)
            # d/dh_L = go[b, j] a_j
            g = (go[:, :, None] * A_head[s:e][None]).view(B * f, -1)
            del h, hL
            for i in range(len(layers) - 1, -1, -1):
                g = _act_backward(act, slope, sign[i + 1], g)  # d/dA_{i+2}
                sign[i + 1] = post[i + 1] = None  # free the block's activations
                weight, _ = layers[i]
                gl[i][0].addmm_(g.T, post[i])  # d/dweight = g^T h_prev
                gl[i][1].add_(g.sum(0))
                g = g @ weight  # d/dh_prev
            g = _act_backward(act, slope, sign[0], g).view(B, f * H1)  # d/dA1
            del sign, post, saved
            # A1 = z @ U: d/dz = g U^T, d/dU = z^T g, with U[k, j, h] = w_jk V[h, k]
            gz.addmm_(g, U.T)
            gU = torch.mm(z.T, g).view(K, f, H1)
            # d/dw_jk = sum_h gU[k, j, h] V[h, k]; d/dV[h, k] = sum_j gU[k, j, h] w_jk
            gW[s:e] = torch.bmm(gU, V.T[:, :, None])[:, :, 0].T
            gV.add_(torch.bmm(W[s:e].T[:, None, :], gU)[:, 0, :].T)
        flat_grads = [t for pair in gl for t in pair]
        return (gz, gW, gV, gA, gc, None, None, None, None, *flat_grads)


def masked_decoder(
    z: Tensor,
    W: Tensor,
    V: Tensor,
    layers: list[tuple[Tensor, Tensor]],
    A_head: Tensor,
    c: Tensor,
    activation: str = "relu",
    slope: float = 0.01,
    block_elements: int = BLOCK_ELEMENTS,
    keep_elements: int = KEEP_ELEMENTS,
) -> Tensor:
    """Per-feature outputs ``a_j . g(w_j * z) + c_j`` of shape (batch, G).

    ``g`` is ``act(V x)`` followed by ``act(weight_i h + bias_i)`` for each of
    ``layers``. Equal to a loop over the features (tested); differentiable in
    every tensor argument through :class:`MaskedDecoderFunction`.

    Parameters
    ----------
    z : Tensor of shape (batch, K)
    W : Tensor of shape (G, K)
    V : Tensor of shape (H1, K)
    layers : list of (Tensor (H_{i+1}, H_i), Tensor (H_{i+1},))
    A_head : Tensor of shape (G, H_L)
    c : Tensor of shape (G,)
    activation : {"relu", "leaky_relu", "elu", "gelu", "silu", "tanh"}
    slope : float, default=0.01
        Negative slope of "leaky_relu".
    block_elements : int, default=2**18
        Hidden activations per block.
    keep_elements : int, default=2**27
        When every block's activations (and the first-layer products U) hold at
        most this many elements, the forward keeps them for the backward (3
        forward-equivalents of work per step); above it the backward recomputes
        each block (4, at one block's memory).

    Returns
    -------
    Tensor of shape (batch, G)
    """
    flat = [t for pair in layers for t in pair]
    return MaskedDecoderFunction.apply(
        z.contiguous(),
        W,
        V,
        A_head,
        c,
        activation,
        float(slope),
        int(block_elements),
        int(keep_elements),
        *flat,
    )
