"""The ``nn.Module``s of the Sparse VAE (Moran et al., 2022): the masked per-feature
decoder and the module that holds encoder, decoder and the SSL state.

Feature j is generated from its own masked copy of z, ``h_j = g(w_j * z)``, through a
shared network g and a per-feature output head, ``out_j = a_j . h_j + c_j``. The
decoder computes every feature at once: the masked inputs of a block of features form
a (batch, features, n_latents) tensor that goes through g as batched matrix products
and through the heads as one batched contraction -- no Python loop over features.
Blocks of features (``chunk_size``) bound the memory; under autograd each block is
checkpointed (its activations recomputed in the backward pass) when there is more
than one, so training memory stays at one block's activations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from identrep.models.nn.mlp import ACTIVATIONS, Standardize
from identrep.models.nn.vae import GaussianEncoder

__all__ = ["LIKELIHOODS", "MaskedFeatureDecoder", "SparseVAEModule"]

#: Observation models of the Sparse VAE.
LIKELIHOODS = ("gaussian", "bernoulli", "categorical")

#: Default bound on the hidden activations of one feature block (elements).
_CHUNK_ELEMENTS = 2**24


class MaskedFeatureDecoder(nn.Module):
    """Per-feature outputs ``out_j = head_j(g(w_j * z))`` of a shared network g.

    g is ``Linear(n_latents -> H1, no bias) -> act -> [Linear(H_i -> H_{i+1}) ->
    act]...`` and head j is ``a_j . h + c_j``. The masks W (n_features, n_latents)
    are initialised N(0, 1) (the authors' choice), g and the heads as
    ``nn.Linear``.

    Parameters
    ----------
    n_latents : int
    n_features : int
    hidden_sizes : sequence of int, default=(50, 50)
        Widths of g (at least one layer).
    activation : str, default="relu"
    chunk_size : int, optional
        Features per block; default so that one block's hidden activations hold at
        most 2**24 elements (``batch * chunk * max(hidden_sizes)``).

    Examples
    --------
    >>> dec = MaskedFeatureDecoder(3, 7, hidden_sizes=(8, 8))
    >>> dec(torch.zeros(4, 3)).shape
    torch.Size([4, 7])
    """

    def __init__(
        self,
        n_latents: int,
        n_features: int,
        hidden_sizes: Sequence[int] = (50, 50),
        activation: str = "relu",
        chunk_size: int | None = None,
    ):
        super().__init__()
        hidden = tuple(int(h) for h in hidden_sizes)
        if not hidden:
            raise ValueError("hidden_sizes must name at least one layer; got ().")
        self.n_latents, self.n_features = int(n_latents), int(n_features)
        self.chunk_size = None if chunk_size is None else int(chunk_size)
        self.W = nn.Parameter(torch.randn(self.n_features, self.n_latents))
        self.first = nn.Linear(self.n_latents, hidden[0], bias=False)
        self.rest = nn.ModuleList(
            nn.Linear(i, o) for i, o in zip(hidden[:-1], hidden[1:], strict=True)
        )
        self.act = ACTIVATIONS[activation]()
        bound = 1.0 / math.sqrt(hidden[-1])
        self.head_weight = nn.Parameter(
            torch.empty(self.n_features, hidden[-1]).uniform_(-bound, bound)
        )
        self.head_bias = nn.Parameter(
            torch.empty(self.n_features).uniform_(-bound, bound)
        )
        self._width = max(hidden)

    def _block(self, z: Tensor, W: Tensor, A: Tensor, c: Tensor) -> Tensor:
        """Outputs (batch, f) of a block of f features with masks W (f, K), head
        weights A (f, H) and biases c (f,)."""
        h = self.act(self.first(z[:, None, :] * W))  # (B, f, H1)
        for layer in self.rest:
            h = self.act(layer(h))
        return torch.einsum("bfh,fh->bf", h, A) + c

    def block_size(self, batch: int) -> int:
        """Features per block for a batch of ``batch`` rows."""
        if self.chunk_size is not None:
            return max(1, self.chunk_size)
        return max(1, _CHUNK_ELEMENTS // max(1, batch * self._width))

    def forward(self, z: Tensor) -> Tensor:
        """Per-feature outputs (means or logits) of shape (batch, n_features)."""
        step = self.block_size(z.shape[0])
        if step >= self.n_features:
            return self._block(z, self.W, self.head_weight, self.head_bias)
        recompute = torch.is_grad_enabled()
        outs = []
        for s in range(0, self.n_features, step):
            args = (
                z,
                self.W[s : s + step],
                self.head_weight[s : s + step],
                self.head_bias[s : s + step],
            )
            if recompute:
                outs.append(checkpoint(self._block, *args, use_reentrant=False))
            else:
                outs.append(self._block(*args))
        return torch.cat(outs, dim=1)


class SparseVAEModule(nn.Module):
    """Encoder q(z | x), masked decoder and the SSL state of a Sparse VAE.

    ``encode(x, y, task)`` returns the parameters of q(z | x) for raw ``x`` (``y`` and
    ``task`` are ignored; the signature is the family's). The decoder output is the
    per-feature mean (Gaussian, on standardised x, with per-feature log-variance
    ``log_var``) or logits (Bernoulli: per feature; categorical: over features,
    softmax across them). Buffers ``p_star`` (n_features, n_latents) and ``eta``
    (n_latents,) hold the SSL inclusion probabilities and rates, updated by the
    E-step (:mod:`identrep.models.vae._ssl`), never by gradients.

    Parameters
    ----------
    encoder : GaussianEncoder
    decoder : MaskedFeatureDecoder
    likelihood : {"gaussian", "bernoulli", "categorical"}
    x_mean, x_scale : Tensor of shape (n_features,)
        Standardisation of the encoder input (and of the Gaussian target).
    learn_var : bool, default=True
        Learn the Gaussian per-feature log-variance (initialised at
        ``log(obs_var)``), or keep it fixed.
    obs_var : float, default=1.0
    """

    def __init__(
        self,
        encoder: GaussianEncoder,
        decoder: MaskedFeatureDecoder,
        likelihood: str,
        x_mean: Tensor,
        x_scale: Tensor,
        learn_var: bool = True,
        obs_var: float = 1.0,
    ):
        super().__init__()
        if likelihood not in LIKELIHOODS:
            raise ValueError(
                f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}."
            )
        self.standardize = Standardize(x_mean, x_scale)
        self.encoder, self.decoder, self.likelihood = encoder, decoder, likelihood
        G, K = decoder.n_features, decoder.n_latents
        init = torch.full((G,), math.log(float(obs_var)))
        if likelihood == "gaussian" and learn_var:
            self.log_var = nn.Parameter(init)
        else:
            self.register_buffer("log_var", init)
        self.register_buffer("p_star", torch.full((G, K), 0.5))
        self.register_buffer("eta", torch.full((K,), 0.5))

    def target(self, x: Tensor) -> Tensor:
        """What the decoder reconstructs: standardised x (Gaussian) or raw x."""
        return self.standardize(x) if self.likelihood == "gaussian" else x

    def encode(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """q(z | x) parameters ``(mean, log_var)`` for raw x (batch, n_features)."""
        return self.encoder(self.standardize(x))

    def forward(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """As :meth:`encode`."""
        return self.encode(x)
