"""iCaRL phase 1 (NF-iVAE; Lu et al., 2022) and its multi-task version MT-iCaRL.

The identifiable VAE of iCaRL replaces iVAE's factorised prior by a
**non-factorised** exponential family conditioned on u (the target, and the task or
environment)::

    p~(z | u) = exp( T(z)^T lambda(u) ) / C(u),
    T(z)      = [ z, z^2, T_NN(z) ],
    log p~    = eta(u) . z  -  0.5 tau(u) . z^2  +  c(u) . T_NN(z)      (+ const),

with ``lambda(u) = (eta, -0.5 tau, c)`` produced by an MLP of u and ``T_NN`` a
small network of z whose outputs are extra sufficient statistics that couple the
latents. Encoder q(z | x, u) and decoder p(x | z) are Gaussian as in iVAE
(:mod:`identrep.models.vae._base`).

**Integrability.** ``tau = softplus(.) + min_precision > 0`` and ``T_NN`` is a
stack of tanh layers, so ``|c . T_NN(z)| <= ||c||_1`` is bounded and p~ is
dominated by a Gaussian: C(u) is finite for every u. (With a non-negative z^2
coefficient the density is not normalisable and score matching runs to -inf.)

**Smooth statistics.** Score matching uses second derivatives of log p~ in z. A
ReLU has zero second derivative almost everywhere, so a ReLU ``T_NN`` would give
the score-matching objective no curvature information from the coupling terms (and
a piecewise-linear score). ``T_NN`` therefore uses tanh, which is smooth and
bounded; the lambda network (a function of u, never differentiated in z) uses the
estimator's ``activation``.

**Training** (one loss for :func:`identrep.training.fit_module`, summed from two
terms whose stop-gradients make them update disjoint parameters):

* the ELBO with the *unnormalised* log prior,
  ``E_q[log p(x | z) + log p~(z | u) - log q(z | x, u)]``, evaluated with the prior
  parameters (and the prior's u) **detached**: it trains the encoder and decoder.
  C(u) does not depend on them, so dropping it does not bias their gradients;
* Hyvarinen score matching of p~(. | u) on the encoder samples z ~ q(z | x, u)
  **detached**: it trains T_NN and lambda (and the prior's task embedding) only.

Adam scales every parameter's step by its own gradient history, so the two terms
need no relative weight. The exact score-matching objective needs the Hessian
diagonal of log p~ in z; :meth:`ExpFamPrior.score_and_hessian_diagonal` computes
it in closed form by propagating, through the tanh layers, the first and second
derivatives along every coordinate direction (a second-order forward mode), with
no extra backward pass. With one tanh layer (the default) that is two products
with the layer's weights, as cheap as the log-density itself; deeper T_NN cost
about n forward passes. ``score_matching="sliced"`` uses sliced score matching
instead (one Hessian-vector product whatever n, noisier); ``"auto"`` picks exact
for one tanh layer or n <= 10, sliced otherwise.

**Identifiability in practice.** As for iVAE (Khemakhem et al., 2020, Theorem 1)
the argument needs the natural parameters to vary enough, about
``dim T + 1 = 2n + K + 1`` distinct values of u in general position, and even then
it identifies T(z) up to a linear map. When T_NN can mimic the cross terms
z_i z_j (a tanh layer approximates them on the data's range), a rotation of
Gaussian-like latents is such a linear map of T, so the coupling can absorb it (a
poor fit on 2 latents recovered the sources rotated by about 45 degrees, their
per-environment correlations explained by the coupling). On the 3-latent process
of ``tests/integration/test_icarl_recovery.py`` (30 environments, mildly
correlated sources, leaky-ReLU mixing; seeds 0-9) MT-iCaRL with K = 8 reached
Pearson MCC 0.74-0.96 (median 0.86) against 0.81-0.99 (median 0.98) for MT-iVAE;
with the coupling switched off for the first third of training
(``coupling_warmup=0.34``, not in the paper) 0.78-0.97 (median 0.95). A small
``tnn_hidden`` is the safer choice when u takes few values (on a 2-latent process
with 20 environments K = 50 did worse than K = 5, seeds 0-3).

**Score matching overfits fixed points.** Fitted to a fixed sample, a flexible
p~ can lower the objective by curvature spikes at the data points (observed on
3000 points per environment: the error of the fitted precision grew with the
number of steps). Here z ~ q(z | x, u) is redrawn every step, which counts
against it, but encoders with tiny posterior variances make the samples nearly
fixed.

Conditioning: :class:`ICaRL` u = the standardised target y pooled over tasks (the
single-task comparison of Chen et al.), optionally with a one-hot task/environment
code; :class:`MTICaRL` u = [y, E_t] with a learnable task embedding E.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from identrep._typing import Seed
from identrep.models.nn.mlp import MLP, Standardize
from identrep.models.vae._base import (
    ConditionalVAEEstimator,
    Conditioner,
    GaussianDecoder,
    GaussianEncoder,
    VAEBatch,
    gaussian_log_prob,
    reparameterize,
)
from identrep.models.vae._score_matching import (
    hyvarinen_score_matching,
    sliced_score_matching,
)
from identrep.utils.validation import MultiTaskArrays

__all__ = [
    "ExpFamPrior",
    "ICaRL",
    "ICaRLModule",
    "MTICaRL",
    "NaturalParams",
    "icarl_loss",
    "icarl_loss_terms",
]

_LOG_2PI = math.log(2.0 * math.pi)
_SCORE_MATCHING = ("exact", "sliced")
_SCORE_MATCHING_OPTIONS = ("auto", *_SCORE_MATCHING)
_AUTO_EXACT_MAX_LATENTS = 10
_SOFTPLUS_INV_1 = math.log(math.e - 1.0)  # softplus(x) = 1


def _widths(value, name: str, n_layers: int) -> tuple[int, ...]:
    """``int w`` -> ``n_layers`` layers of width w; a sequence -> tuple; 0 -> ()."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return () if value == 0 else (int(value),) * n_layers
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a sequence of ints; got {value!r}."
        ) from None
    return out


# ================================================================== modules
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
        self.n_latents, self.cond_features = int(n_latents), int(cond_features)
        self.min_precision = float(min_precision)
        widths = [self.n_latents, *(int(w) for w in tnn_hidden)]
        self.tnn = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True)
        )
        self.n_stats = widths[-1] if len(widths) > 1 else 0
        n = self.n_latents
        self.natural = MLP(
            self.cond_features,
            tuple(lambda_hidden),
            2 * n + self.n_stats,
            activation=activation,
        )
        # 1, or 0 to switch the coupling off (a factorised prior; see the
        # estimators' coupling_warmup)
        self.register_buffer("coupling_scale", torch.ones(()))
        last = self.natural.layers[-1]
        with torch.no_grad():
            last.weight[n:].zero_()  # precision and coupling: constant at init
            last.bias[n : 2 * n].fill_(_SOFTPLUS_INV_1)
            last.bias[2 * n :].zero_()

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

    def score_matching(
        self,
        z: Tensor,
        u: Tensor,
        *,
        method: str = "exact",
        projections: Tensor | None = None,
    ) -> Tensor:
        """Score-matching objective of p~(. | u) at every sample z, shape (batch,).

        ``method="exact"``: Hyvarinen's objective with the closed-form Hessian
        diagonal; ``"sliced"``: sliced score matching with ``projections`` of shape
        (n_projections, batch, n) (variance-reduced, see
        :func:`~identrep.models.vae._score_matching.sliced_score_matching`).
        Gradients flow to the prior's parameters and u, never to z's producer
        (z is detached).
        """
        z = z.detach()
        if method == "exact":
            _, score, hess = self.score_and_hessian_diagonal(z, u)
            return hyvarinen_score_matching(score, hess)
        if method == "sliced":
            if projections is None:
                raise ValueError("method='sliced' needs projections.")
            return sliced_score_matching(lambda v: self.log_prob(v, u), z, projections)
        raise ValueError(f"method must be one of {_SCORE_MATCHING}; got {method!r}.")


class ICaRLModule(nn.Module):
    """Encoder, decoder, non-factorised prior and conditioners of iCaRL.

    Two conditioners build u from (y, task): ``conditioner`` feeds the prior
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
        u = (
            None
            if self.encoder_conditioner is None
            else self.encoder_conditioner(y, task)
        )
        return self.encoder(self.standardize(x), u)

    def forward(self, x: Tensor, y: Tensor, task: Tensor):
        """``(xs, z, z_mean, z_log_var, x_mean, x_log_var, u)``: one stochastic pass
        (standardised x, one reparameterised z, decoder parameters, prior u)."""
        xs = self.standardize(x)
        z_mean, z_log_var = self.encode(x, y, task)
        z = reparameterize(z_mean, z_log_var)
        x_mean, x_log_var = self.decoder(z)
        return xs, z, z_mean, z_log_var, x_mean, x_log_var, self.conditioner(y, task)

    def encoder_decoder_parameters(self):
        """Parameters trained by the ELBO term."""
        mods = [self.encoder, self.decoder, self.encoder_conditioner]
        return [p for m in mods if m is not None for p in m.parameters()]

    def prior_parameters(self):
        """Parameters trained by the score-matching term."""
        return [*self.prior.parameters(), *self.conditioner.parameters()]


# ==================================================================== losses
def icarl_loss_terms(
    module: ICaRLModule,
    batch: VAEBatch,
    *,
    score_matching: str = "exact",
    n_projections: int = 1,
) -> tuple[Tensor, Tensor]:
    """The two per-sample terms of the iCaRL objective, with their stop-gradients.

    * ``neg_elbo = -log p(x | z) - log p~(z | u) - H[q(z | x, u)]`` with one
      reparameterised z, the unnormalised log prior evaluated with detached prior
      parameters and u (gradients reach the encoder through z, and the decoder),
      and the Gaussian entropy ``H = 0.5 sum_k (1 + log 2pi + log_var_k)``;
    * ``sm``: the score-matching objective of p~(. | u) at z detached (gradients
      reach the prior and its conditioner only).

    Parameters
    ----------
    module : ICaRLModule
    batch : VAEBatch
    score_matching : {"exact", "sliced"}, default="exact"
    n_projections : int, default=1
        Random projections per sample for ``"sliced"`` (standard normal, drawn from
        torch's global generator, like the reparameterisation noise).

    Returns
    -------
    neg_elbo, sm : Tensor of shape (batch,)
    """
    xs, z, z_mean, z_log_var, x_mean, x_log_var, u = module(
        batch.x, batch.y, batch.task
    )
    rec = gaussian_log_prob(xs, x_mean, x_log_var)
    log_prior = module.prior.log_prob(z, u, detach_params=True)
    entropy = 0.5 * (1.0 + _LOG_2PI + z_log_var).sum(-1)
    neg_elbo = -(rec + log_prior + entropy)
    v = None
    if score_matching == "sliced":
        v = torch.randn(int(n_projections), *z.shape, dtype=z.dtype, device=z.device)
    sm = module.prior.score_matching(z, u, method=score_matching, projections=v)
    return neg_elbo, sm


def icarl_loss(
    module: ICaRLModule,
    batch: VAEBatch,
    *,
    score_matching: str = "exact",
    n_projections: int = 1,
) -> tuple[Tensor, int]:
    """Training loss of iCaRL: batch mean of ``neg_elbo + sm``
    (:func:`icarl_loss_terms`); the stop-gradients make the first term train the
    encoder/decoder and the second the prior, so one backward pass does both.

    Returns
    -------
    loss : Tensor, scalar
    n : int
        Batch size (its weight in epoch means).
    """
    neg_elbo, sm = icarl_loss_terms(
        module, batch, score_matching=score_matching, n_projections=n_projections
    )
    return (neg_elbo + sm).mean(), batch.x.shape[0]


# ================================================================ estimators
class ICaRL(ConditionalVAEEstimator):
    """iCaRL phase 1: the NF-iVAE of Lu et al. (2022) with a non-factorised prior.

    See the module docstring for the model, the loss and the stop-gradients. Fit
    trains encoder, decoder and prior jointly with one Adam optimiser through
    :func:`identrep.training.fit_module`; ``transform(X, y, task_ids=...)`` returns
    the encoder mean. **The encoder q(z | x, u) needs u at transform time**: pass
    ``y`` (and ``task_ids``, tasks seen in fit, when u contains the task), unless
    ``condition_encoder=False``; an unknown task id raises
    :class:`~identrep.exceptions.DataError`.

    By default training runs ``max_epochs`` epochs with a cosine learning-rate
    schedule and no validation split: the natural validation score would be the
    training objective, whose unnormalised log-prior term has an offset that
    drifts with the prior parameters (the missing log C(u)), so it is a poor early
    stopping criterion. With ``val_fraction > 0`` that objective is still what
    validation monitors and the best epoch by it is restored.

    Parameters
    ----------
    n_latents : int, default=10
        Latent dimension n.
    conditioning : {"target", "task", "target+task"}, default="target"
        u = standardised y pooled over tasks (Chen et al.'s iCaRL), the one-hot
        task (environment) code (the paper's e), or both.
    encoder : {"linear", "mlp"}, default="mlp"
        Encoder architecture; also the decoder's unless ``decoder`` is set.
    decoder : {"linear", "mlp"} or None, default=None
    hidden_sizes : sequence of int, optional
        Hidden widths of the MLP encoder/decoder; default one layer of width
        ``max(2 * n_features, 32)``.
    activation : str, default="leaky_relu"
        Hidden activation of encoder, decoder and lambda network (T_NN is tanh).
    decoder_var : float or "learned", default=0.01
        Decoder noise variance on the standardised inputs.
    condition_encoder : bool, default=True
        Encoder q(z | x, u) (iCaRL) or q(z | x).
    score_matching : {"auto", "exact", "sliced"}, default="auto"
        ``"exact"``: Hyvarinen's objective with the Hessian diagonal in closed
        form (:meth:`ExpFamPrior.score_and_hessian_diagonal`; for one tanh layer
        as cheap as the log-density, for deeper T_NN about n forward passes).
        ``"sliced"``: sliced score matching with ``n_projections`` random
        projections (one Hessian-vector product whatever n; noisier).
        ``"auto"``: exact when T_NN has at most one layer or
        ``n_latents <= 10``, else sliced (``score_matching_`` tells which ran).
    n_projections : int, default=1
    coupling_warmup : float in [0, 1), default=0.0
        Fraction of ``max_epochs`` (rounded up) trained with the coupling
        switched off (c = 0: a factorised prior fitted by score matching, as in
        iVAE) before the non-factorised prior takes over. Not part of the paper
        (0 reproduces it): a guard against the rotated solutions described in
        the module docstring. On the 3-latent process of
        ``tests/integration/test_icarl_recovery.py`` (seeds 0-9) a warm-up of
        0.34 raised the median Pearson MCC from 0.86 to 0.95 (MT-iVAE: 0.98).
    tnn_hidden : int or sequence of int, default=50
        Widths of the tanh layers of T_NN; the last width K is the number of
        coupling statistics. An int w means one layer of width w; the paper's
        appendix uses two, ``(50, 50)``. 0 or () gives a factorised prior (no
        coupling). See "Sufficient variability" in the module docstring: with
        few environments or tasks in u prefer a small K.
    lambda_hidden : int or sequence of int, default=50
        Hidden widths of the lambda network (an int w means (w, w), the paper's
        appendix).
    lr : float, default=1e-3
    lr_schedule : {None, "cosine"}, default="cosine"
    batch_size : int, default=512
    max_epochs : int, default=100
    patience : int or None, default=None
        Early-stopping patience on the validation objective (needs
        ``val_fraction > 0``).
    val_fraction : float, default=0.0
    grad_clip : float, optional
    device : str, default="cpu"
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, Generator or None
        Seeds initialisation, batch order, reparameterisation noise and
        projections.
    verbose : bool, default=False

    Attributes
    ----------
    module_ : ICaRLModule
        The trained model (eval mode); ``module_.prior`` is the
        :class:`ExpFamPrior`.
    history_ : dict
        From :func:`~identrep.training.fit_module` (losses: batch means of
        ``neg_elbo + sm``, see :func:`icarl_loss_terms`).
    score_matching_ : {"exact", "sliced"}
        The score-matching method used.
    tasks_ : ndarray of shape (n_tasks,)
    n_tasks_ : int
    n_features_in_ : int
    fit_seconds_ : float

    References
    ----------
    C. Lu, Y. Wu, J. M. Hernandez-Lobato, B. Scholkopf (2022). Invariant causal
    representation learning for out-of-distribution generalization. ICLR.
    A. Hyvarinen (2005). Estimation of non-normalized statistical models by score
    matching. JMLR.

    Examples
    --------
    >>> import identrep as ir
    >>> from identrep.models.vae import ICaRL
    >>> data = ir.datasets.make_segment_sources(n_segments=5, n_per_segment=40,
    ...     n_latents=2, n_observed=3, random_state=0)
    >>> m = ICaRL(n_latents=2, max_epochs=2, random_state=0).fit(data.X, data.y)
    >>> m.transform(data.X, data.y).shape
    (200, 2)
    """

    _CONDITIONINGS = ("target", "task", "target+task")
    # read by the shared checks of ConditionalVAEEstimator; iCaRL's prior is the
    # ExpFamPrior, whatever these say
    prior = "gaussian"
    learn_prior_mean = False

    def __init__(
        self,
        n_latents: int = 10,
        *,
        conditioning: str = "target",
        encoder: str = "mlp",
        decoder: str | None = None,
        hidden_sizes: Sequence[int] | None = None,
        activation: str = "leaky_relu",
        decoder_var: float | str = 0.01,
        condition_encoder: bool = True,
        score_matching: str = "auto",
        n_projections: int = 1,
        coupling_warmup: float = 0.0,
        tnn_hidden: int | Sequence[int] = 50,
        lambda_hidden: int | Sequence[int] = 50,
        lr: float = 1e-3,
        lr_schedule: str | None = "cosine",
        batch_size: int = 512,
        max_epochs: int = 100,
        patience: int | None = None,
        val_fraction: float = 0.0,
        grad_clip: float | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.conditioning = conditioning
        self.encoder = encoder
        self.decoder = decoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.decoder_var = decoder_var
        self.condition_encoder = condition_encoder
        self.score_matching = score_matching
        self.n_projections = n_projections
        self.coupling_warmup = coupling_warmup
        self.tnn_hidden = tnn_hidden
        self.lambda_hidden = lambda_hidden
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.val_fraction = val_fraction
        self.grad_clip = grad_clip
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    # ---------------------------------------------------------- conditioning
    def _uses_target(self) -> bool:
        return self.conditioning in ("target", "target+task")

    def _task_mode(self) -> str | None:
        return "onehot" if self.conditioning in ("task", "target+task") else None

    def _desc(self) -> str:
        method = self._resolved_score_matching()
        return f"{type(self).__name__}[{self.conditioning}, {method}]"

    # ---------------------------------------------------------------- params
    def _validate_params(self) -> None:
        super()._validate_params()
        if self.conditioning not in self._CONDITIONINGS:
            raise ValueError(
                f"conditioning must be one of {self._CONDITIONINGS} for "
                f"{type(self).__name__}; got {self.conditioning!r}."
            )
        if self.score_matching not in _SCORE_MATCHING_OPTIONS:
            raise ValueError(
                f"score_matching must be one of {_SCORE_MATCHING_OPTIONS}; got "
                f"{self.score_matching!r}."
            )
        self._pos_int("n_projections", self.n_projections)
        w = self.coupling_warmup
        if not (
            isinstance(w, (int, float, np.integer, np.floating))
            and not isinstance(w, bool)
            and 0 <= w < 1
        ):
            raise ValueError(f"coupling_warmup must lie in [0, 1); got {w!r}.")
        for name in ("tnn_hidden", "lambda_hidden"):
            widths = _widths(getattr(self, name), name, 1)
            if any(w < 1 for w in widths):
                raise ValueError(
                    f"{name} must hold positive widths (or be 0 / () for none); got "
                    f"{getattr(self, name)!r}."
                )

    # ----------------------------------------------------------------- hooks
    def _build_module(self, n_features, n_tasks, x_mean, x_scale, y_mean, y_scale):
        # the shared encoder, decoder and conditioner of the conditional VAEs; the
        # factorised prior built with them is replaced by the ExpFamPrior
        vae = super()._build_module(
            n_features, n_tasks, x_mean, x_scale, y_mean, y_scale
        )
        enc_cond = None
        if self.condition_encoder:  # the encoder's own u (own task embedding)
            enc_cond = Conditioner(
                self._uses_target(),
                self._task_mode(),
                n_tasks=n_tasks,
                embedding_dim=self._embedding_dim(),
                y_mean=y_mean,
                y_scale=y_scale,
            )
        prior = ExpFamPrior(
            vae.conditioner.out_features,
            int(self.n_latents),
            tnn_hidden=_widths(self.tnn_hidden, "tnn_hidden", 1),
            lambda_hidden=_widths(self.lambda_hidden, "lambda_hidden", 2),
            activation=self.activation,
        )
        if self._warmup_epochs():
            prior.coupling_scale.zero_()
        return ICaRLModule(
            vae.encoder,
            vae.decoder,
            prior,
            vae.conditioner,
            enc_cond,
            vae.standardize.mean,
            vae.standardize.scale,
        )

    def _resolved_score_matching(self) -> str:
        if self.score_matching != "auto":
            return self.score_matching
        depth = len(_widths(self.tnn_hidden, "tnn_hidden", 1))
        small = int(self.n_latents) <= _AUTO_EXACT_MAX_LATENTS
        return "exact" if depth <= 1 or small else "sliced"

    def _warmup_epochs(self) -> int:
        return math.ceil(float(self.coupling_warmup) * int(self.max_epochs))

    def _make_loss(self, n_train: int):
        method = self._resolved_score_matching()
        n_proj = int(self.n_projections)

        def loss_fn(module, batch):
            return icarl_loss(
                module, batch, score_matching=method, n_projections=n_proj
            )

        n_warm = self._warmup_epochs()
        if not n_warm:
            return loss_fn, None
        done = [0]

        def switch_on_coupling(module) -> None:  # fit_module's post_epoch hook
            done[0] += 1
            if done[0] == n_warm:
                module.prior.coupling_scale.fill_(1.0)

        return loss_fn, switch_on_coupling

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        self.score_matching_ = self._resolved_score_matching()


class MTICaRL(ICaRL):
    """Multi-task iCaRL: u = [y, E_t] with a learnable task embedding E.

    An :class:`ICaRL` whose prior's natural parameters are
    ``lambda(y, t) = MLP([standardised y, E_t])`` (Chen et al., 2024, Section 4):
    the task enters through an explicit embedding table trained with the prior by
    score matching (``task_embeddings_``). The encoder has its own embedding table
    (``encoder_task_embeddings_``), trained by the ELBO, so the two stop-gradient
    parameter sets stay disjoint. Task ids are required in fit and (with
    ``condition_encoder=True``) in transform; an unknown task id raises
    :class:`~identrep.exceptions.DataError`.

    Parameters
    ----------
    n_latents : int, default=10
    conditioning : {"target+task", "task"}, default="target+task"
        u = [y, E_t], or E_t alone (environments as tasks, no target).
    embedding_dim : int, optional
        Dimension of E_t; default ``n_latents``.
    **other parameters
        As in :class:`ICaRL`.

    Attributes
    ----------
    task_embeddings_ : ndarray of shape (n_tasks, embedding_dim)
        The prior's learned E, rows in the order of ``tasks_``.
    encoder_task_embeddings_ : ndarray of shape (n_tasks, embedding_dim) or None
        The encoder's (None with ``condition_encoder=False``).
    module_, history_, tasks_, n_tasks_, n_features_in_, fit_seconds_
        As in :class:`ICaRL`.

    References
    ----------
    W. Chen, J. Horwood, J. Heo, J. M. Hernandez-Lobato (2024). Leveraging task
    structures for improved identifiability in neural network representations. TMLR.

    Examples
    --------
    >>> import identrep as ir
    >>> from identrep.models.vae import MTICaRL
    >>> data = ir.datasets.make_segment_sources(n_segments=5, n_per_segment=40,
    ...     n_latents=2, n_observed=3, random_state=0)
    >>> m = MTICaRL(n_latents=2, max_epochs=2, random_state=0).fit(
    ...     data.X, data.y, task_ids=data.task_ids)
    >>> m.transform(data.X, data.y, task_ids=data.task_ids).shape
    (200, 2)
    >>> m.task_embeddings_.shape
    (5, 2)
    """

    _CONDITIONINGS = ("target+task", "task")

    def __init__(
        self,
        n_latents: int = 10,
        *,
        conditioning: str = "target+task",
        embedding_dim: int | None = None,
        encoder: str = "mlp",
        decoder: str | None = None,
        hidden_sizes: Sequence[int] | None = None,
        activation: str = "leaky_relu",
        decoder_var: float | str = 0.01,
        condition_encoder: bool = True,
        score_matching: str = "auto",
        n_projections: int = 1,
        coupling_warmup: float = 0.0,
        tnn_hidden: int | Sequence[int] = 50,
        lambda_hidden: int | Sequence[int] = 50,
        lr: float = 1e-3,
        lr_schedule: str | None = "cosine",
        batch_size: int = 512,
        max_epochs: int = 100,
        patience: int | None = None,
        val_fraction: float = 0.0,
        grad_clip: float | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        super().__init__(
            n_latents,
            conditioning=conditioning,
            encoder=encoder,
            decoder=decoder,
            hidden_sizes=hidden_sizes,
            activation=activation,
            decoder_var=decoder_var,
            condition_encoder=condition_encoder,
            score_matching=score_matching,
            n_projections=n_projections,
            coupling_warmup=coupling_warmup,
            tnn_hidden=tnn_hidden,
            lambda_hidden=lambda_hidden,
            lr=lr,
            lr_schedule=lr_schedule,
            batch_size=batch_size,
            max_epochs=max_epochs,
            patience=patience,
            val_fraction=val_fraction,
            grad_clip=grad_clip,
            device=device,
            dtype=dtype,
            random_state=random_state,
            verbose=verbose,
        )
        self.embedding_dim = embedding_dim

    def _task_mode(self) -> str | None:
        return "embedding"

    def _embedding_dim(self) -> int:
        return int(self.n_latents if self.embedding_dim is None else self.embedding_dim)

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.embedding_dim is not None:
            self._pos_int("embedding_dim", self.embedding_dim)

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        super()._set_fitted(data)

        def table(cond):
            if cond is None:
                return None
            return cond.embedding.weight.detach().cpu().double().numpy()

        self.task_embeddings_ = table(self.module_.conditioner)
        self.encoder_task_embeddings_ = table(self.module_.encoder_conditioner)
