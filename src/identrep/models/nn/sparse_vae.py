"""The ``nn.Module``s of the Sparse VAE (Moran et al., 2022): the masked per-feature
decoder and the module that holds encoder, decoder and the SSL state.

Feature j is generated from its own masked copy of z, ``h_j = g(w_j * z)``, through a
shared network g and a per-feature output head, ``out_j = a_j . h_j + c_j``. The
decoder is one autograd node
(:func:`~identrep.models.nn._masked_kernel.masked_decoder`): for a block of features
the masked first layer is a single GEMM, the shared layers GEMMs over (batch x
features) rows and the heads one batched contraction -- no Python loop over
features. Blocks of features (``chunk_size``) are sized to stay in cache; the
backward recomputes each block and applies a hand-written chain rule, so training
memory is one block's activations whatever the number of features.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from identrep.models.nn._masked_kernel import BLOCK_ELEMENTS, masked_decoder
from identrep.models.nn.mlp import ACTIVATIONS, Standardize
from identrep.models.nn.vae import GaussianEncoder

__all__ = ["LIKELIHOODS", "MaskedFeatureDecoder", "SparseVAEModule"]

#: Observation models of the Sparse VAE.
LIKELIHOODS = ("gaussian", "bernoulli", "categorical")


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
        Features per block; default so that one block's hidden activations hold
        about 2**18 elements (``batch * chunk * max(hidden_sizes)``).

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
        unit_first: bool = False,
        unit_head: bool = False,
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
        self.activation = activation
        self._slope = float(getattr(self.act, "negative_slope", 0.01))
        bound = 1.0 / math.sqrt(hidden[-1])
        self.head_weight = nn.Parameter(
            torch.empty(self.n_features, hidden[-1]).uniform_(-bound, bound)
        )
        self.head_bias = nn.Parameter(
            torch.empty(self.n_features).uniform_(-bound, bound)
        )
        self._width = max(hidden)
        # fixed column norms of the first layer: the scale of latent k's effect
        # is then carried by the masks W[:, k] alone (no rescaling of W against
        # the first layer can lower the SSL penalty)
        self.unit_first = bool(unit_first)
        self.register_buffer(
            "first_norm", self.first.weight.detach().norm(dim=0).mean().reshape(1)
        )
        # fixed head-row norms: with the shared network's scales fixed too, the
        # gain of feature j's output in z is bounded by a constant times |w_j|, so
        # a head cannot grow to let w_j shrink under the spike
        self.unit_head = bool(unit_head)
        self.register_buffer(
            "head_norm", self.head_weight.detach().norm(dim=1).mean().reshape(1)
        )
        self.register_buffer(
            "rest_norms",
            torch.stack([lay.weight.detach().norm() for lay in self.rest])
            if len(self.rest)
            else torch.zeros(0),
        )

    def shared_weights(self) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """The first layer's weight V (H1, n_latents) and the later layers'
        (weight, bias); with ``unit_first`` V's columns have a fixed norm and
        every later weight a fixed Frobenius norm (their values at init)."""
        V = self.first.weight
        rest = [(lay.weight, lay.bias) for lay in self.rest]
        if not self.unit_first:
            return V, rest
        V = V * (self.first_norm / V.norm(dim=0, keepdim=True).clamp_min(1e-12))
        rest = [
            (w * (n / w.norm().clamp_min(1e-12)), b)
            for (w, b), n in zip(rest, self.rest_norms, strict=True)
        ]
        return V, rest

    def head(self) -> Tensor:
        """The head weights (n_features, H); with ``unit_head`` every row has the
        fixed norm ``head_norm``."""
        A = self.head_weight
        if not self.unit_head:
            return A
        return A * (self.head_norm / A.norm(dim=1, keepdim=True).clamp_min(1e-12))

    def _block(self, z: Tensor, W: Tensor, A: Tensor, c: Tensor) -> Tensor:
        """Outputs (batch, f) of a block of f features with masks W (f, K), head
        weights A (f, H) and biases c (f,), through autograd (the reference of
        :func:`~identrep.models.nn._masked_kernel.masked_decoder`)."""
        h = self.act(self.first(z[:, None, :] * W))  # (B, f, H1)
        for layer in self.rest:
            h = self.act(layer(h))
        return torch.einsum("bfh,fh->bf", h, A) + c

    def block_size(self, batch: int) -> int:
        """Features per block for a batch of ``batch`` rows."""
        if self.chunk_size is not None:
            return max(1, self.chunk_size)
        return max(1, BLOCK_ELEMENTS // max(1, batch * self._width))

    def forward(self, z: Tensor) -> Tensor:
        """Per-feature outputs (means or logits) of shape (batch, n_features)."""
        V, rest = self.shared_weights()
        return masked_decoder(
            z,
            self.W,
            V,
            rest,
            self.head(),
            self.head_bias,
            self.activation,
            self._slope,
            self.block_size(z.shape[0]) * z.shape[0] * self._width,
        )


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
    learn_prior_corr : bool, default=False
        Learn the correlation matrix Sigma of the prior z ~ N(0, Sigma)
        (:meth:`prior_scale_tril`); False keeps Sigma = I.
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
        learn_prior_corr: bool = False,
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
        # z ~ N(0, Sigma), Sigma = L L^T a correlation matrix (the paper's Eq. 1);
        # L's rows are a free lower-triangular matrix's rows normalised to unit
        # length, initialised at the identity (Sigma = I, the paper's setting)
        self.prior_tril_raw = nn.Parameter(torch.eye(K)) if learn_prior_corr else None

    def prior_scale_tril(self) -> Tensor | None:
        """Cholesky factor L (n_latents, n_latents) of the prior correlation
        matrix Sigma = L L^T (unit diagonal), or None for Sigma = I."""
        if self.prior_tril_raw is None:
            return None
        L = torch.tril(self.prior_tril_raw)
        return L / L.norm(dim=1, keepdim=True)

    def target(self, x: Tensor) -> Tensor:
        """What the decoder reconstructs: standardised x (Gaussian) or raw x."""
        return self.standardize(x) if self.likelihood == "gaussian" else x

    def encode(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """q(z | x) parameters ``(mean, log_var)`` for raw x (batch, n_features)."""
        return self.encoder(self.standardize(x))

    def forward(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """As :meth:`encode`."""
        return self.encode(x)
