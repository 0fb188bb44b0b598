"""The ``nn.Module``s of iCaRL (Lu et al., 2022): the non-factorised
exponential-family prior and the module that holds it with the Gaussian encoder and
decoder of :mod:`identrep.models.nn.vae`.

The prior is unnormalised, ``log p~(z | u) = eta(u) . z - 0.5 tau(u) . z^2 +
c(u) . T_NN(z)``; why it is integrable and why T_NN is smooth is explained in
:mod:`identrep.models.vae.icarl`. Its score-matching objective and the iCaRL loss
are pure functions in :mod:`identrep.models.vae._icarl_loss`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from identrep.models.nn.mlp import MLP, Standardize
from identrep.models.nn.vae import Conditioner, GaussianDecoder, GaussianEncoder

__all__ = ["ExpFamPrior", "ICaRLModule", "NaturalParams", "TaskExpFamPrior"]

_SOFTPLUS_INV_1 = math.log(math.e - 1.0)  # softplus(x) = 1


class NaturalParams(NamedTuple):
    """Natural parameters of :class:`ExpFamPrior` at a batch of u.

    ``eta`` (batch, n): coefficients of z; ``precision`` (batch, n) > 0: minus twice
    the coefficients of z^2; ``coupling`` (batch, K): coefficients of T_NN(z).
    """

    eta: Tensor
    precision: Tensor
    coupling: Tensor


class ExpFamPrior(nn.Module):
    """Non-factorised exponential-family prior p~(z | u), unnormalised.

    ``log p~(z | u) = eta(u) . z - 0.5 tau(u) . z^2 + c(u) . T_NN(z)`` with
    ``T_NN(z) = tanh(W_L ... tanh(W_1 z + b_1) ... + b_L)`` (K = last width outputs,
    bounded in (-1, 1)) and ``(eta, tau_raw, c) = MLP(u)``,
    ``tau = softplus(tau_raw) + min_precision``. See the module docstring for why
    it is integrable and why T_NN is smooth. The output layer is initialised so the
    prior starts factorised with unit variances (c = 0 and tau = 1 +
    min_precision for every u; eta starts as a random function of u).

    Parameters
    ----------
    cond_features : int
        Dimension of u (>= 1).
    n_latents : int
    tnn_hidden : sequence of int, default=(50,)
        Widths of the tanh layers of T_NN; the last is K. Empty: no coupling (a
        factorised Gaussian prior with u-dependent mean and precision).
    lambda_hidden : sequence of int, default=(50, 50)
        Hidden widths of the lambda network.
    activation : str, default="leaky_relu"
        Hidden activation of the lambda network.
    min_precision : float, default=1e-3

    Attributes
    ----------
    coupling_scale : Tensor, scalar buffer
        Multiplies c: 1 (default) or 0, which makes the prior factorised and
        gives the coupling parameters zero gradient.

    Examples
    --------
    >>> import torch
    >>> prior = ExpFamPrior(2, 3, tnn_hidden=(8,), lambda_hidden=(8,))
    >>> z, u = torch.randn(4, 3), torch.randn(4, 2)
    >>> prior.log_prob(z, u).shape
    torch.Size([4])
    >>> log_p, score, hess_diag = prior.score_and_hessian_diagonal(z, u)
    >>> score.shape, hess_diag.shape
    (torch.Size([4, 3]), torch.Size([4, 3]))
    """

    def __init__(
        self,
        cond_features: int,
        n_latents: int,
        tnn_hidden: Sequence[int] = (50,),
        lambda_hidden: Sequence[int] = (50, 50),
        activation: str = "leaky_relu",
        min_precision: float = 1e-3,
    ):
        super().__init__()
        if int(cond_features) < 1:
            raise ValueError(
                f"ExpFamPrior needs a conditioning u (cond_features >= 1); got "
                f"{cond_features!r}."
            )
        self.cond_features = int(cond_features)
        self._init_statistics(n_latents, tnn_hidden, min_precision)
        n = self.n_latents
        self.natural = MLP(
            self.cond_features,
            tuple(lambda_hidden),
            2 * n + self.n_stats,
            activation=activation,
        )
        last = self.natural.layers[-1]
        with torch.no_grad():
            last.weight[n:].zero_()  # precision and coupling: constant at init
            last.bias[n : 2 * n].fill_(_SOFTPLUS_INV_1)
            last.bias[2 * n :].zero_()

    def _init_statistics(self, n_latents, tnn_hidden, min_precision) -> None:
        """T_NN's tanh layers (the first parameters created), ``n_stats`` and the
        ``coupling_scale`` buffer: 1, or 0 to switch the coupling off (a
        factorised prior; see the estimators' ``coupling_warmup``)."""
        self.n_latents = int(n_latents)
        self.min_precision = float(min_precision)
        widths = [self.n_latents, *(int(w) for w in tnn_hidden)]
        self.tnn = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True)
        )
        self.n_stats = widths[-1] if len(widths) > 1 else 0
        self.register_buffer("coupling_scale", torch.ones(()))

    # ------------------------------------------------------------ parameters
    def forward(self, u: Tensor) -> NaturalParams:
        """Natural parameters at u of shape (batch, cond_features)."""
        n = self.n_latents
        out = self.natural(u)
        return NaturalParams(
            out[:, :n],
            F.softplus(out[:, n : 2 * n]) + self.min_precision,
            out[:, 2 * n :] * self.coupling_scale,
        )

    def _layer_params(self, detach: bool):
        for layer in self.tnn:
            W, b = layer.weight, layer.bias
            yield (W.detach(), b.detach()) if detach else (W, b)

    def _natural(self, u: Tensor, detach: bool) -> NaturalParams:
        if not detach:
            return self(u)
        with torch.no_grad():
            return NaturalParams(*(p.detach() for p in self(u.detach())))

    # ------------------------------------------------------------- densities
    def statistics(self, z: Tensor, *, detach_params: bool = False) -> Tensor:
        """T_NN(z) of shape (batch, K) (K = 0 without coupling)."""
        h = z
        for W, b in self._layer_params(detach_params):
            h = torch.tanh(F.linear(h, W, b))
        return h if self.n_stats else z.new_zeros(z.shape[0], 0)

    def log_prob(self, z: Tensor, u: Tensor, *, detach_params: bool = False) -> Tensor:
        """Unnormalised log p~(z | u) of shape (batch,).

        With ``detach_params`` every prior parameter and u are treated as constants
        (gradients flow to z only): the prior term of the iCaRL ELBO.
        """
        eta, tau, c = self._natural(u, detach_params)
        out = (eta * z - 0.5 * tau * z.square()).sum(-1)
        if self.n_stats:
            out = out + (c * self.statistics(z, detach_params=detach_params)).sum(-1)
        return out

    def score_and_hessian_diagonal(
        self, z: Tensor, u: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """log p~, its gradient and the exact diagonal of its Hessian in z.

        Closed form, by second-order forward propagation through the tanh layers:
        with ``a = W h + b`` and ``h' = tanh(a)``, for every coordinate j,
        ``dh'/dz_j = tanh'(a) * W dh/dz_j`` and ``d2h'/dz_j2 = tanh''(a) * (W
        dh/dz_j)^2 + tanh'(a) * W d2h/dz_j2`` (only derivatives along the same z_j
        enter, so the diagonal propagates exactly). Cost O(batch * n * sum of
        layer products): about n forward passes of T_NN, no backward pass.
        Differentiable in the prior's parameters and u.

        Parameters
        ----------
        z : Tensor of shape (batch, n)
        u : Tensor of shape (batch, cond_features)

        Returns
        -------
        log_p : Tensor of shape (batch,)
        score : Tensor of shape (batch, n)
        hess_diag : Tensor of shape (batch, n)
        """
        eta, tau, c = self(u)
        log_p = (eta * z - 0.5 * tau * z.square()).sum(-1)
        score = eta - tau * z
        hess = -tau
        if not self.n_stats:
            return log_p, score, hess
        # J, D: (batch, n, width), d/dz_j and d2/dz_j2 of the current layer's input
        # (None at the first layer, whose input is z itself: J = I, D = 0)
        h, J, D = z, None, None
        n_layers = len(self.tnn)
        for i, layer in enumerate(self.tnn):
            W = layer.weight  # (out, in)
            t = torch.tanh(F.linear(h, W, layer.bias))
            d1 = 1.0 - t.square()  # tanh'
            d2 = -2.0 * t * d1  # tanh''
            if i == n_layers - 1:  # contract with c without forming the last J
                g1, g2 = c * d1, c * d2  # (batch, out)
                if J is None:  # a single layer: products with W only
                    score = score + g1 @ W
                    hess = hess + g2 @ W.square()
                else:
                    Ja = J @ W.T  # (batch, n, out)
                    back = (g1 @ W).unsqueeze(1)  # (batch, 1, in)
                    score = score + (J * back).sum(-1)
                    hess = hess + (Ja.square() * g2.unsqueeze(1)).sum(-1)
                    hess = hess + (D * back).sum(-1)
                log_p = log_p + (c * t).sum(-1)
                break
            if J is None:
                J = d1.unsqueeze(1) * W.T  # (batch, n, out)
                D = d2.unsqueeze(1) * W.T.square()
            else:
                Ja = J @ W.T
                D = d2.unsqueeze(1) * Ja.square() + d1.unsqueeze(1) * (D @ W.T)
                J = d1.unsqueeze(1) * Ja
            h = t
        return log_p, score, hess


class TaskExpFamPrior(ExpFamPrior):
    """:class:`ExpFamPrior` whose natural parameters are free per-task numbers.

    For task t and standardised target y: ``eta = a_t y + b_t``, ``tau =
    softplus(s_t) + min_precision`` and coupling ``c_t`` (Chen et al., 2024,
    App. C: the multi-task prior's task parameters are free and learned with
    the rest), with T_NN shared by the tasks. Without the target ``eta = b_t``.
    At initialisation a = b = c = 0 and tau = 1 + min_precision: the standard
    factorised prior in every task (only T_NN draws random numbers).

    ``forward(u)`` reads u as built by a
    :class:`~identrep.models.nn.vae.Conditioner` with ``task_mode="index"``:
    the standardised target in column 0 (when ``use_target``) and the task code
    in the last column.

    Parameters
    ----------
    n_tasks : int
    n_latents : int
    use_target : bool, default=True
    tnn_hidden : sequence of int, default=(50,)
    min_precision : float, default=1e-3

    Examples
    --------
    >>> import torch
    >>> prior = TaskExpFamPrior(3, 2, tnn_hidden=(4,))
    >>> prior(torch.tensor([[0.5, 2.0]])).coupling.shape
    torch.Size([1, 4])
    """

    def __init__(
        self,
        n_tasks: int,
        n_latents: int,
        use_target: bool = True,
        tnn_hidden: Sequence[int] = (50,),
        min_precision: float = 1e-3,
    ):
        nn.Module.__init__(self)
        self._init_statistics(n_latents, tnn_hidden, min_precision)
        self.n_tasks, self.use_target = int(n_tasks), bool(use_target)
        self.cond_features = 1 + int(self.use_target)
        shape = (self.n_tasks, self.n_latents)
        self.slope = nn.Parameter(torch.zeros(shape), requires_grad=self.use_target)
        self.offset = nn.Parameter(torch.zeros(shape))
        self.raw_precision = nn.Parameter(torch.full(shape, _SOFTPLUS_INV_1))
        self.coupling = nn.Parameter(torch.zeros(self.n_tasks, self.n_stats))

    def forward(self, u: Tensor) -> NaturalParams:
        """Natural parameters at u of shape (batch, cond_features)."""
        task = u[:, -1].round().long()
        eta = self.offset[task]
        if self.use_target:
            eta = eta + self.slope[task] * u[:, :1]
        return NaturalParams(
            eta,
            F.softplus(self.raw_precision[task]) + self.min_precision,
            self.coupling[task] * self.coupling_scale,
        )


class ICaRLModule(nn.Module):
    """Encoder, decoder, non-factorised prior and conditioners of iCaRL.

    ``forward`` (= :meth:`encode`) returns the encoder's parameters; one full
    stochastic pass is :func:`identrep.models.vae._icarl_loss.icarl_pass`. Two
    conditioners build u from (y, task): ``conditioner`` feeds the prior
    (trained with the prior by score matching) and ``encoder_conditioner`` the
    encoder (trained by the ELBO; None when the encoder sees x only). Keeping them
    apart keeps the two stop-gradient parameter sets disjoint even with learnable
    task embeddings. Inputs are standardised by fixed buffers.

    Parameters
    ----------
    encoder : GaussianEncoder
    decoder : GaussianDecoder
    prior : ExpFamPrior
    conditioner : Conditioner
    encoder_conditioner : Conditioner or None
    x_mean, x_scale : Tensor of shape (n_features,)
    """

    def __init__(
        self,
        encoder: GaussianEncoder,
        decoder: GaussianDecoder,
        prior: ExpFamPrior,
        conditioner: Conditioner,
        encoder_conditioner: Conditioner | None,
        x_mean: Tensor,
        x_scale: Tensor,
    ):
        super().__init__()
        self.standardize = Standardize(x_mean, x_scale)
        self.encoder, self.decoder, self.prior = encoder, decoder, prior
        self.conditioner = conditioner
        self.encoder_conditioner = encoder_conditioner

    def encode(self, x: Tensor, y: Tensor, task: Tensor) -> tuple[Tensor, Tensor]:
        """q(z | x, u) parameters ``(mean, log_var)`` for raw x (batch, p)."""
        return self.encode_standardized(self.standardize(x), y, task)

    def encode_standardized(
        self, xs: Tensor, y: Tensor, task: Tensor
    ) -> tuple[Tensor, Tensor]:
        """As :meth:`encode` for x already standardised (``self.standardize(x)``)."""
        u = (
            None
            if self.encoder_conditioner is None
            else self.encoder_conditioner(y, task)
        )
        return self.encoder(xs, u)

    def forward(self, x: Tensor, y: Tensor, task: Tensor) -> tuple[Tensor, Tensor]:
        """q(z | x, u) parameters ``(mean, log_var)``, as :meth:`encode`."""
        return self.encode(x, y, task)

    def encoder_decoder_parameters(self):
        """Parameters trained by the ELBO term."""
        mods = [self.encoder, self.decoder, self.encoder_conditioner]
        return [p for m in mods if m is not None for p in m.parameters()]

    def prior_parameters(self):
        """Parameters trained by the score-matching term."""
        return [*self.prior.parameters(), *self.conditioner.parameters()]
