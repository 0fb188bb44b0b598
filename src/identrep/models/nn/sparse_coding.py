"""``nn.Module``s of two sparse VAEs compared with the Sparse VAE: variational
sparse coding (VSC, Tonolini et al.) and the output-interpretable VAE (OI-VAE,
Ainsworth et al., 2018).

Both standardise x (float64, :class:`~identrep.models.nn.mlp.Standardize`) before
the encoder and reconstruct standardised x (Gaussian) or raw x (Bernoulli logits,
categorical logits over the features). ``forward`` returns distribution parameters,
never samples or losses (those are in :mod:`identrep.models.vae._vsc_loss` and
:mod:`identrep.models.vae._oivae_loss`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from identrep.models.nn.mlp import ACTIVATIONS, MLP, Standardize
from identrep.models.nn.vae import soft_clamp

__all__ = ["GroupedDecoder", "OIVAEModule", "VSCModule"]

#: Observation models (as the Sparse VAE's).
LIKELIHOODS = ("gaussian", "bernoulli", "categorical")


class _ObservationMixin(nn.Module):
    """Standardisation, likelihood and the Gaussian per-feature log-variance."""

    def _init_observation(self, likelihood, x_mean, x_scale, learn_var, obs_var):
        if likelihood not in LIKELIHOODS:
            raise ValueError(
                f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}."
            )
        self.likelihood = likelihood
        self.standardize = Standardize(x_mean, x_scale)
        init = torch.full((len(x_mean),), math.log(float(obs_var)))
        if likelihood == "gaussian" and learn_var:
            self.log_var = nn.Parameter(init)
        else:
            self.register_buffer("log_var", init)

    def target(self, x: Tensor) -> Tensor:
        """What the decoder reconstructs: standardised x (Gaussian) or raw x."""
        return self.standardize(x) if self.likelihood == "gaussian" else x


class VSCModule(_ObservationMixin):
    """Spike-and-slab encoder and MLP decoder of variational sparse coding.

    The encoder maps standardised x to ``3 n_latents`` outputs: slab mean, slab
    log-variance (soft-clamped to +-10) and spike logits ``v`` (gamma =
    sigmoid(v)); the decoder maps z to per-feature means or logits.

    Parameters
    ----------
    n_features, n_latents : int
    hidden_sizes : sequence of int
        Hidden widths of encoder and decoder (empty: linear).
    activation : str
    likelihood : {"gaussian", "bernoulli", "categorical"}
    x_mean, x_scale : Tensor of shape (n_features,)
    learn_var : bool, default=False
    obs_var : float, default=1.0
        Gaussian noise variance on standardised features (initial value when
        learned).
    n_pseudo_inputs : int, default=0
        J > 0 adds the pseudo-input prior of the VSC authors' code: J learned
        points in the encoder's (standardised) input space whose posteriors are
        the prior's components (:meth:`prior_parts`), and a linear selector of
        component weights from x (:meth:`selector_logits`). 0: the fixed prior.

    Examples
    --------
    >>> m = VSCModule(5, 2, (8,), "relu", "gaussian", torch.zeros(5), torch.ones(5))
    >>> [t.shape for t in m.encode_parts(torch.zeros(3, 5, dtype=torch.float64))]
    [torch.Size([3, 2]), torch.Size([3, 2]), torch.Size([3, 2])]
    """

    def __init__(
        self,
        n_features: int,
        n_latents: int,
        hidden_sizes: Sequence[int],
        activation: str,
        likelihood: str,
        x_mean: Tensor,
        x_scale: Tensor,
        learn_var: bool = False,
        obs_var: float = 1.0,
        n_pseudo_inputs: int = 0,
    ):
        super().__init__()
        hidden = tuple(int(h) for h in hidden_sizes)
        self.n_latents = int(n_latents)
        self.encoder = MLP(
            n_features, hidden, 3 * self.n_latents, activation=activation
        )
        self.decoder = MLP(
            self.n_latents, hidden[::-1], n_features, activation=activation
        )
        self._init_observation(likelihood, x_mean, x_scale, learn_var, obs_var)
        self.n_pseudo_inputs = int(n_pseudo_inputs)
        if self.n_pseudo_inputs > 0:
            # Near the data mean in standardised units (small spread).
            init = 0.1 * torch.randn(self.n_pseudo_inputs, n_features)
            self.pseudo_inputs = nn.Parameter(init)
            self.selector = nn.Linear(n_features, self.n_pseudo_inputs)

    def _parts(self, xs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mean, raw, logits = self.encoder(xs).chunk(3, dim=-1)
        return mean, soft_clamp(raw, 10.0), logits

    def encode_parts(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(slab mean, slab log-variance, spike logits)`` for raw x, each
        (batch, n_latents)."""
        return self._parts(self.standardize(x))

    def prior_parts(self) -> tuple[Tensor, Tensor, Tensor]:
        """The pseudo-input prior's components: :meth:`encode_parts` of the J
        pseudo-inputs, each (J, n_latents)."""
        return self._parts(self.pseudo_inputs)

    def selector_logits(self, x: Tensor) -> Tensor:
        """Unnormalised log-weights of the prior's components for raw x,
        (batch, J)."""
        return self.selector(self.standardize(x))

    def encode(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """Mean and log-variance of the spike-and-slab posterior of z for raw x:
        ``gamma mu`` and ``log(gamma (s^2 + mu^2) - gamma^2 mu^2)``."""
        mean, log_var, logits = self.encode_parts(x)
        gamma = torch.sigmoid(logits)
        m = gamma * mean
        var = gamma * (log_var.exp() + mean.square()) - m.square()
        return m, torch.log(var.clamp_min(torch.finfo(var.dtype).tiny))

    def forward(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """As :meth:`encode`."""
        return self.encode(x)


class GroupedDecoder(nn.Module):
    """OI-VAE generator: group g sees its own linear map of z, ``W_g z``, through
    its own network f_g, and outputs the features of group g.

    ``W`` (n_groups, group_dim, n_latents) holds the group-latent weights whose
    column norms ``||W_g[:, k]||`` carry the group-lasso penalty. Group networks
    are evaluated together as batched matrix products over groups, with outputs
    padded to the largest group and scattered back to feature order (no Python
    loop over groups).

    Parameters
    ----------
    n_latents : int
    groups : sequence of int, length n_features
        Group label (0 .. n_groups - 1) of every feature.
    group_dim : int
        Input width of each group network (the paper's p_g; 1 in its bars demo).
    hidden_sizes : sequence of int
        Hidden widths of every group network (empty: linear).
    activation : str
    init_scale : float, default=1.0
        Standard deviation of the N(0, init_scale^2) initial W (the authors'
        N(0, 1)).

    Examples
    --------
    >>> dec = GroupedDecoder(3, [0, 0, 1, 2, 2, 2], 1, (4,), "relu")
    >>> dec(torch.zeros(5, 3)).shape, dec.W.shape
    (torch.Size([5, 6]), torch.Size([3, 1, 3]))
    """

    def __init__(
        self,
        n_latents: int,
        groups: Sequence[int],
        group_dim: int,
        hidden_sizes: Sequence[int],
        activation: str,
        init_scale: float = 1.0,
    ):
        super().__init__()
        g = torch.as_tensor(list(groups), dtype=torch.int64)
        n_groups = int(g.max()) + 1
        sizes = torch.bincount(g, minlength=n_groups)
        width = int(sizes.max())
        # slot of every feature inside its group's padded output
        slot = torch.zeros_like(g)
        for k in range(n_groups):
            idx = torch.nonzero(g == k).ravel()
            slot[idx] = torch.arange(idx.numel())
        self.register_buffer("flat_index", g * width + slot)
        self.n_groups, self.width = n_groups, width
        self.n_latents, self.group_dim = int(n_latents), int(group_dim)
        # "large so that the prox does not kill them early" (the authors' choice)
        W = torch.randn(n_groups, self.group_dim, self.n_latents)
        if init_scale != 1.0:  # the default leaves the draws untouched
            W = W * float(init_scale)
        self.W = nn.Parameter(W)
        dims = (self.group_dim, *(int(h) for h in hidden_sizes), width)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, o in zip(dims[:-1], dims[1:], strict=True):
            bound = 1.0 / math.sqrt(i)
            self.weights.append(
                nn.Parameter(torch.empty(n_groups, i, o).uniform_(-bound, bound))
            )
            self.biases.append(
                nn.Parameter(torch.empty(n_groups, 1, o).uniform_(-bound, bound))
            )
        self.act = ACTIVATIONS[activation]()

    def forward(self, z: Tensor) -> Tensor:
        """Per-feature means or logits (batch, n_features)."""
        h = torch.einsum("gdk,bk->gbd", self.W, z)  # (G, B, group_dim)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = self.act(h)
        out = h.permute(1, 0, 2).reshape(z.shape[0], -1)  # (B, G * width)
        return out[:, self.flat_index]


class OIVAEModule(_ObservationMixin):
    """Gaussian encoder q(z | x) and :class:`GroupedDecoder` of the OI-VAE.

    Parameters
    ----------
    encoder : nn.Module
        ``encoder(x_std) -> (mean, log_var)``, e.g.
        :class:`~identrep.models.nn.vae.GaussianEncoder`.
    decoder : GroupedDecoder
    likelihood : {"gaussian", "bernoulli", "categorical"}
    x_mean, x_scale : Tensor of shape (n_features,)
    learn_var : bool, default=False
    obs_var : float, default=1.0
    """

    def __init__(
        self,
        encoder: nn.Module,
        decoder: GroupedDecoder,
        likelihood: str,
        x_mean: Tensor,
        x_scale: Tensor,
        learn_var: bool = False,
        obs_var: float = 1.0,
    ):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self._init_observation(likelihood, x_mean, x_scale, learn_var, obs_var)

    def encode(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """q(z | x) parameters ``(mean, log_var)`` for raw x."""
        return self.encoder(self.standardize(x))

    def forward(self, x: Tensor, y=None, task=None) -> tuple[Tensor, Tensor]:
        """As :meth:`encode`."""
        return self.encode(x)
