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
(:mod:`identrep.models.nn.vae`); the prior and the module are in
:mod:`identrep.models.nn.icarl`, the loss in :mod:`identrep.models.vae._icarl_loss`.

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
Gaussian-like latents is such a linear map of T, so the coupling can absorb it and
the sources come out rotated. A warm-up without the coupling
(``coupling_warmup``, not in the paper) guards against it, and a small
``tnn_hidden`` is the safer choice when u takes few values (measurements:
docs/notes.md, "iCaRL's coupling and its warm-up").

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
from functools import partial
from numbers import Integral, Real

import torch
from torch.nn import functional as F

from identrep._typing import Seed
from identrep.models.nn.icarl import (
    ExpFamPrior,
    ICaRLModule,
    NaturalParams,
    TaskExpFamPrior,
)
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    STEP_BUDGET_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
)
from identrep.models.vae._conditional import (
    ConditionalVAEEstimator,
    TaskEmbeddingMixin,
)
from identrep.models.vae._icarl_loss import (
    SCORE_MATCHING_METHODS,
    icarl_loss,
    icarl_loss_terms,
)
from identrep.utils._param_validation import Interval, SequenceOf, StrOptions
from identrep.utils.validation import MultiTaskArrays

__all__ = [
    "ICaRL",
    "MTICaRL",
    # the modules (identrep.models.nn.icarl) and losses (._icarl_loss), also here
    "ExpFamPrior",
    "ICaRLModule",
    "NaturalParams",
    "TaskExpFamPrior",
    "icarl_loss",
    "icarl_loss_terms",
]

_AUTO_EXACT_MAX_LATENTS = 10
# an int w (0: none) or a sequence of positive widths
_WIDTHS = [
    Interval(Integral, 0, None, closed="left"),
    SequenceOf(Interval(Integral, 1, None, closed="left"), allow_empty=True),
]


def _widths(value, n_layers: int) -> tuple[int, ...]:
    """``int w`` -> ``n_layers`` layers of width w; a sequence -> tuple; 0 -> ()."""
    if isinstance(value, Integral):
        return () if value == 0 else (int(value),) * n_layers
    return tuple(int(v) for v in value)


def _skip_linear_init(sizes: Sequence[int]) -> None:
    """Advance torch's global generator past the initialisation of Linear layers
    ``sizes[0] -> sizes[1] -> ...`` (weight, then bias, per layer) without
    building them.

    Before the VAE family was split by layer, iCaRL also built iVAE's factorised
    prior network here and discarded it. Its draws are consumed so that fixed-seed
    fits stay bit-identical to earlier releases; removing this call changes every
    iCaRL initialisation (not its distribution).
    """
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        torch.empty(fan_out, fan_in).uniform_()  # nn.Linear: kaiming_uniform_
        torch.empty(fan_out).uniform_()  # then the bias


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
        the module docstring (its effect: docs/notes.md).
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
    steps_per_epoch : int or None, default=None
        Epochs of exactly this many optimiser steps instead of one pass over the
        training rows (:func:`~identrep.training.fit_module`), so that fits on
        data of different sizes can take the same number of steps.
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
    n_latents_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` had string column names.
    device_, dtype_
        The resolved torch device and dtype.
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

    _parameter_constraints: dict[str, list] = {
        **ARCHITECTURE_CONSTRAINTS,
        **TRAINING_CONSTRAINTS,
        **STEP_BUDGET_CONSTRAINTS,
        "conditioning": [StrOptions({"target", "task", "target+task"})],
        "condition_encoder": ["boolean"],
        "score_matching": [StrOptions({"auto", *SCORE_MATCHING_METHODS})],
        "n_projections": [Interval(Integral, 1, None, closed="left")],
        "coupling_warmup": [Interval(Real, 0, 1, closed="left")],
        "tnn_hidden": _WIDTHS,
        "lambda_hidden": _WIDTHS,
    }

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
        steps_per_epoch: int | None = None,
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
        self.steps_per_epoch = steps_per_epoch
        self.patience = patience
        self.val_fraction = val_fraction
        self.grad_clip = grad_clip
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _desc(self) -> str:
        method = self._resolved_score_matching()
        return f"{type(self).__name__}[{self.conditioning}, {method}]"

    # ----------------------------------------------------------------- hooks
    def _build_module(self, n_features, n_tasks, x_mean, x_scale, y_mean, y_scale):
        """:class:`~identrep.models.nn.icarl.ICaRLModule`; parameters created in
        the order prior conditioner, encoder, decoder, encoder conditioner, prior."""
        cond = self._build_conditioner(n_tasks, y_mean, y_scale)
        c = cond.out_features
        encoder = self._build_encoder(n_features, c if self._condition_encoder() else 0)
        decoder = self._build_decoder(n_features)
        _skip_linear_init([c, *self._hidden(n_features), int(self.n_latents)])
        enc_cond = None
        if self._condition_encoder():  # the encoder's own u (own task embedding)
            enc_cond = self._build_conditioner(n_tasks, y_mean, y_scale)
        prior = ExpFamPrior(
            c,
            int(self.n_latents),
            tnn_hidden=_widths(self.tnn_hidden, 1),
            lambda_hidden=_widths(self.lambda_hidden, 2),
            activation=self.activation,
        )
        if self._warmup_epochs():
            prior.coupling_scale.zero_()
        return ICaRLModule(
            encoder,
            decoder,
            prior,
            cond,
            enc_cond,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
        )

    def _resolved_score_matching(self) -> str:
        if self.score_matching != "auto":
            return self.score_matching
        depth = len(_widths(self.tnn_hidden, 1))
        small = int(self.n_latents) <= _AUTO_EXACT_MAX_LATENTS
        return "exact" if depth <= 1 or small else "sliced"

    def _standardize_once(self) -> bool:
        return True  # icarl_pass reads x through standardized_input

    def _warmup_epochs(self) -> int:
        return math.ceil(float(self.coupling_warmup) * int(self.max_epochs))

    def _make_loss(self, n_train: int):
        loss_fn = partial(
            icarl_loss,
            score_matching=self._resolved_score_matching(),
            n_projections=int(self.n_projections),
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


class MTICaRL(TaskEmbeddingMixin, ICaRL):
    """Multi-task iCaRL (Chen et al., 2024): an iCaRL whose prior has per-task
    parameters.

    With ``task_prior="free"`` (default; the paper's Appendix C: the task
    parameters are free and learned with the rest) the prior is
    :class:`~identrep.models.nn.icarl.TaskExpFamPrior`: natural parameters
    ``eta = a_t y + b_t``, ``tau = softplus(s_t) + min_precision`` and coupling
    ``c_t`` free per task (y the standardised target), T_NN shared, all trained
    by score matching. With ``task_prior="embedding"`` they are
    ``lambda(y, t) = MLP([y, E_t])`` with a task embedding trained with the prior
    (``task_embeddings_``). The encoder has its own embedding table
    (``encoder_task_embeddings_``), trained by the ELBO, so the two stop-gradient
    parameter sets stay disjoint. ``whiten`` as in
    :class:`~identrep.models.vae.MTIVAE`. Task ids are required in fit and (with
    ``condition_encoder=True``) in transform; an unknown task id raises
    :class:`~identrep.exceptions.DataError`.

    Parameters
    ----------
    n_latents : int, default=10
    conditioning : {"target+task", "task"}, default="target+task"
        u = [y, task], or the task alone (environments as tasks, no target).
    embedding_dim : int, optional
        Dimension of E_t; default ``n_latents``.
    task_prior : {"free", "embedding"}, default="free"
        Free per-task natural parameters, or a network of [y, E_t].
    whiten : {None, "zca", "pca"}, default=None
        Input map: per-feature standardisation (None), ZCA whitening, or
        whitened principal components (``n_latents`` of them).
        See :class:`~identrep.models.vae.ivae.MTIVAE` on ZCA when p is many
        times ``n_latents``; MT-iCaRL on the same runs: per-task MCC 0.79 at
        p = 50 and 100, 0.43 at p = 200 (``"pca"``: 0.64 / 0.70 / 0.75).
    **other parameters
        As in :class:`ICaRL`.

    Attributes
    ----------
    task_embeddings_ : ndarray of shape (n_tasks, embedding_dim) or None
        The prior's learned E, rows in the order of ``tasks_`` (None with the
        free prior).
    task_prior_params_ : dict or None
        With ``task_prior="free"``: ``"slope"``, ``"offset"``, ``"precision"``
        (n_tasks, n_latents) and ``"coupling"`` (n_tasks, K): a, b, tau and c,
        rows in the order of ``tasks_``.
    encoder_task_embeddings_ : ndarray of shape (n_tasks, embedding_dim) or None
        The encoder's (None with ``condition_encoder=False``).
    module_, history_, tasks_, n_tasks_, n_latents_, n_features_in_, fit_seconds_
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
    >>> m.task_prior_params_["slope"].shape
    (5, 2)
    """

    _parameter_constraints: dict[str, list] = {
        **ICaRL._parameter_constraints,
        **TaskEmbeddingMixin._embedding_constraints,
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        conditioning: str = "target+task",
        embedding_dim: int | None = None,
        task_prior: str = "free",
        whiten: str | None = None,
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
        steps_per_epoch: int | None = None,
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
            steps_per_epoch=steps_per_epoch,
            patience=patience,
            val_fraction=val_fraction,
            grad_clip=grad_clip,
            device=device,
            dtype=dtype,
            random_state=random_state,
            verbose=verbose,
        )
        self.embedding_dim = embedding_dim
        self.task_prior = task_prior
        self.whiten = whiten

    def _build_module(self, n_features, n_tasks, x_mean, x_scale, y_mean, y_scale):
        """The embedding variant: :meth:`ICaRL._build_module`. The free prior:
        parameters created in the order encoder conditioner, encoder, decoder,
        prior (T_NN; the task parameters start at fixed values)."""
        if not self._free_task_prior():
            return super()._build_module(
                n_features, n_tasks, x_mean, x_scale, y_mean, y_scale
            )
        enc_cond = None
        if self._condition_encoder():
            enc_cond = self._build_conditioner(n_tasks, y_mean, y_scale)
        encoder = self._build_encoder(
            n_features, 0 if enc_cond is None else enc_cond.out_features
        )
        decoder = self._build_decoder(n_features)
        prior = TaskExpFamPrior(
            n_tasks,
            int(self.n_latents),
            self._uses_target(),
            tnn_hidden=_widths(self.tnn_hidden, 1),
        )
        if self._warmup_epochs():
            prior.coupling_scale.zero_()
        return ICaRLModule(
            encoder,
            decoder,
            prior,
            self._build_prior_conditioner(n_tasks, y_mean, y_scale),
            enc_cond,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
        )

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        super()._set_fitted(data)
        self.task_prior_params_ = None
        prior = self.module_.prior
        if isinstance(prior, TaskExpFamPrior):
            with torch.no_grad():
                tau = F.softplus(prior.raw_precision) + prior.min_precision
            self.task_prior_params_ = {
                name: v.detach().cpu().double().numpy()
                for name, v in (
                    ("slope", prior.slope),
                    ("offset", prior.offset),
                    ("precision", tau),
                    ("coupling", prior.coupling * prior.coupling_scale),
                )
            }

        def table(cond):
            if cond is None or cond.embedding is None:
                return None
            return cond.embedding.weight.detach().cpu().double().numpy()

        self.task_embeddings_ = table(self.module_.conditioner)
        self.encoder_task_embeddings_ = table(self.module_.encoder_conditioner)
