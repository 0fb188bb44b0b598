"""Variational sparse coding (VSC; Tonolini, Jensen and Murray-Smith).

A VAE whose prior and posterior are spike-and-slab, so each sample uses a few
latents: ``p(z_j) = alpha N(0, 1) + (1 - alpha) delta_0``. Trained on the negative
ELBO with the closed-form spike-and-slab KL and the relaxed selector of
:mod:`identrep.models.vae._vsc_loss`, with the paper's two schedules: the selector's
inverse temperature c annealed linearly from ``c_start`` to ``c_end``, and spike
warm-up (the code is the binary selector alone before ``warmup_start``, the slab
blended in linearly until ``warmup_end``; fractions of ``max_epochs``). The
paper's fixed prior is the default; ``prior="pseudo_inputs"`` is the
pseudo-input (VampPrior-like) prior of the authors' TensorFlow code and of the
Sparse VAE authors' port (baselines.md 3.4), with the bound of
:func:`~identrep.models.vae._vsc_loss.pseudo_input_kl`.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np
import torch

from identrep._typing import Seed
from identrep.exceptions import InvalidParameterError
from identrep.models.nn.sparse_coding import LIKELIHOODS, VSCModule
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    BaseVAE,
)
from identrep.models.vae._heldout import HeldoutNLLMixin
from identrep.models.vae._vsc_loss import (
    pseudo_input_log_prior,
    spike_slab_log_density,
    spike_slab_log_ratio,
    vsc_loss,
)
from identrep.utils._param_validation import Interval, StrOptions

__all__ = ["VSC", "VSCObjective"]

_POS = Interval(Real, 0, None, closed="neither")
_FRACTION = Interval(Real, 0, 1, closed="both")
#: The priors of z: the paper's fixed spike-and-slab, or the authors' code's.
PRIORS = ("spike_slab", "pseudo_inputs")


class VSCObjective:
    """Training loss on the schedule; validation at the final schedule.

    In train mode the loss uses the current c and slab weight; ``step`` (the
    ``post_epoch`` hook) advances the epoch counter. In eval mode (validation and
    model selection) it uses ``c_end`` and the full slab, so validation losses are
    comparable across epochs.
    """

    def __init__(self, est: VSC):
        self.alpha = float(est.alpha)
        self.kl_weight = float(est.kl_weight)
        # Only the pseudo-input prior has a sparsity penalty.
        self.extra = (
            {"sparsity_weight": float(est.prior_sparsity_weight)}
            if est.prior == "pseudo_inputs"
            else {}
        )
        self.c_start, self.c_end = float(est.c_start), float(est.c_end)
        self.max_epochs = int(est.max_epochs)
        self.w0 = float(est.warmup_start) * self.max_epochs
        self.w1 = float(est.warmup_end) * self.max_epochs
        self.epoch = 0

    def schedule(self, epoch: int) -> tuple[float, float]:
        """``(c, slab_weight)`` in epoch ``epoch`` (0-based)."""
        frac = epoch / max(self.max_epochs - 1, 1)
        c = self.c_start + min(frac, 1.0) * (self.c_end - self.c_start)
        if epoch >= self.w1:
            w = 1.0
        elif epoch < self.w0:
            w = 0.0
        else:
            w = (epoch - self.w0) / max(self.w1 - self.w0, 1e-12)
        return c, min(max(w, 0.0), 1.0)

    def __call__(self, module, batch):
        kw = {"alpha": self.alpha, "kl_weight": self.kl_weight, **self.extra}
        if not module.training:
            return vsc_loss(module, batch, c=self.c_end, **kw)
        c, w = self.schedule(self.epoch)
        return vsc_loss(module, batch, c=c, slab_weight=w, **kw)

    def step(self, module) -> None:
        self.epoch += 1


class VSC(HeldoutNLLMixin, BaseVAE):
    """Variational sparse coding: spike-and-slab prior and posterior.

    Parameters
    ----------
    n_latents : int, default=10
    alpha : float in (0, 1), default=0.1
        Prior probability that a latent is active (the sparsity level); with
        the pseudo-input prior, the target of the prior's average spike
        probability.
    prior : {"spike_slab", "pseudo_inputs"}, default="spike_slab"
        The paper's fixed prior ``alpha N(0, 1) + (1 - alpha) delta_0`` per
        latent, or the authors' code's mixture of the posteriors of
        ``n_pseudo_inputs`` learned pseudo-inputs, with a softmax selector of
        its components from x (KL bounded as in
        :func:`~identrep.models.vae._vsc_loss.pseudo_input_kl`).
    n_pseudo_inputs : int >= 1, default=10
        J, the pseudo-input prior's components (the authors' 10).
    prior_sparsity_weight : float >= 0, default=1.0
        Multiplier of the pseudo-input prior's sparsity penalty ``K KL(Bern(
        pi_bar) || Bern(alpha))`` (1: the TensorFlow original's weight; the
        Sparse VAE authors' port uses the feature count instead of K).
    c_start, c_end : float, default=50.0 and 200.0
        Inverse temperature of the relaxed selector, annealed linearly over
        ``max_epochs`` (the paper's 50 -> 200).
    warmup_start, warmup_end : float in [0, 1], default=0.0 and 0.2
        Spike warm-up as fractions of ``max_epochs``: binary codes (selector
        only) before ``warmup_start``, slab blended in linearly until
        ``warmup_end``. (0, 0): no warm-up.
    kl_weight : float > 0, default=1.0
        Weight c of the spike-and-slab KL in the per-datum loss
        ``-log p(x | z) + c KL(q(z | x) || p(z))`` (training and validation).
        1 is the ELBO; the Sparse VAE authors' code averages the KL over the K
        latents, i.e. ``c = 1 / K`` (the real-data tables' ``VSC_KL1overK`` row).
    likelihood : {"gaussian", "bernoulli", "categorical"}, default="gaussian"
        Gaussian on standardised features, Bernoulli on 0/1 features, or
        multinomial counts over the features.
    encoder, decoder : {"linear", "mlp"}, default "mlp" and None
        Architecture (the decoder follows the encoder when None).
    hidden_sizes : sequence of int, optional
        Hidden widths of encoder and decoder (mirrored); default one layer of
        ``max(2 * n_features, 32)``.
    activation : str, default="relu"
    decoder_var : float or "learned", default=1.0
        Gaussian noise variance on standardised features, or learned per feature.
    lr, lr_schedule, batch_size, max_epochs, patience, val_fraction, grad_clip,
    device, dtype, random_state, verbose
        As :class:`~identrep.models.vae.VAE` (``max_epochs`` 100, ``patience``
        None: the schedules run to the end).

    Attributes
    ----------
    module_ : VSCModule
    history_ : dict
        Losses in nats per sample (validation at ``c_end``, full slab).
    n_latents_, n_features_in_, feature_names_in_, tasks_, n_tasks_, device_,
    dtype_, fit_seconds_
        As :class:`~identrep.models.vae.VAE`.

    Notes
    -----
    ``transform`` returns the posterior mean ``gamma * mu``;
    :meth:`spike_probabilities` gives gamma.

    The relaxed selector passes gradient to gamma only for draws within about
    ``4 / c`` of its threshold, so with the paper's c (50 -> 200) the spike
    probabilities learn slowly (the authors train for 200k iterations). On the
    sparse-coding data of ``tests/integration/test_vsc_recovery.py`` a fixed
    ``c = 10`` without warm-up made gamma track the true active codes within 60
    epochs (Spearman 0.58-0.78 over 10 seeds), while c 50 -> 200 over 150 epochs
    gave -0.02 and 0.73 on two seeds.

    References
    ----------
    Tonolini, F., Jensen, B. S. and Murray-Smith, R. Variational sparse coding.
    UAI 2019 (PMLR 115, 2020).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(100, 6))
    >>> m = VSC(n_latents=3, max_epochs=2, random_state=0).fit(X)
    >>> m.transform(X).shape, m.spike_probabilities(X).shape
    ((100, 3), (100, 3))
    """

    _parameter_constraints: dict[str, list] = {
        **ARCHITECTURE_CONSTRAINTS,
        **TRAINING_CONSTRAINTS,
        "likelihood": [StrOptions(set(LIKELIHOODS))],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "c_start": [_POS],
        "c_end": [_POS],
        "warmup_start": [_FRACTION],
        "warmup_end": [_FRACTION],
        "kl_weight": [_POS],
        "prior": [StrOptions(set(PRIORS))],
        "n_pseudo_inputs": [Interval(Integral, 1, None, closed="left")],
        "prior_sparsity_weight": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        alpha: float = 0.1,
        c_start: float = 50.0,
        c_end: float = 200.0,
        warmup_start: float = 0.0,
        warmup_end: float = 0.2,
        kl_weight: float = 1.0,
        prior: str = "spike_slab",
        n_pseudo_inputs: int = 10,
        prior_sparsity_weight: float = 1.0,
        likelihood: str = "gaussian",
        encoder: str = "mlp",
        decoder: str | None = None,
        hidden_sizes: Sequence[int] | None = None,
        activation: str = "relu",
        decoder_var: float | str = 1.0,
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 128,
        max_epochs: int = 100,
        patience: int | None = None,
        val_fraction: float = 0.1,
        grad_clip: float | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.alpha = alpha
        self.c_start = c_start
        self.c_end = c_end
        self.warmup_start = warmup_start
        self.warmup_end = warmup_end
        self.kl_weight = kl_weight
        self.prior = prior
        self.n_pseudo_inputs = n_pseudo_inputs
        self.prior_sparsity_weight = prior_sparsity_weight
        self.likelihood = likelihood
        self.encoder = encoder
        self.decoder = decoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.decoder_var = decoder_var
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

    def _check_param_combinations(self) -> None:
        if self.warmup_end < self.warmup_start:
            raise InvalidParameterError(
                "The 'warmup_end' parameter of VSC must be at least warmup_start="
                f"{self.warmup_start!r}; got {self.warmup_end!r}."
            )

    def _build_module(self, n_features, n_tasks, x_mean, x_scale, y_mean, y_scale):
        arch = self.decoder if self.decoder is not None else self.encoder
        hidden = self._hidden(n_features) if "mlp" in (self.encoder, arch) else ()
        learned = isinstance(self.decoder_var, str)
        return VSCModule(
            n_features,
            int(self.n_latents),
            hidden,
            self.activation,
            self.likelihood,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
            learn_var=learned,
            obs_var=1.0 if learned else float(self.decoder_var),
            n_pseudo_inputs=(
                int(self.n_pseudo_inputs) if self.prior == "pseudo_inputs" else 0
            ),
        )

    def _make_loss(self, n_train: int):
        obj = VSCObjective(self)
        return obj, obj.step

    def spike_probabilities(self, X) -> np.ndarray:
        """gamma: the posterior probability that each latent is active,
        ndarray of shape (n_samples, n_latents)."""
        X, _, _ = self._check_transform_data(X, None, None)
        out = self._predict_chunks(
            lambda x: torch.sigmoid(self.module_.encode_parts(x)[2]),
            [X],
            dtypes=[self._x_dtype()],
        )
        return out[0] if isinstance(out, tuple) else out

    # ------------------------------------------------- held-out likelihood
    def _posterior_draws(self, x, n_particles):
        """Exact spike-and-slab draws (S, B, K) and their log p(z) - log q(z | x)."""
        mean, log_var, logits = self.module_.encode_parts(x)
        shape = (n_particles, *mean.shape)
        eps = torch.randn(shape, dtype=mean.dtype, device=mean.device)
        u = torch.rand(shape, dtype=mean.dtype, device=mean.device)
        active = u < torch.sigmoid(logits)
        z = torch.where(active, mean + torch.exp(0.5 * log_var) * eps, 0.0)
        if self.module_.n_pseudo_inputs == 0:
            return z, spike_slab_log_ratio(
                z, active, mean, log_var, logits, float(self.alpha)
            )
        log_p = pseudo_input_log_prior(z, active, self.module_.prior_parts())
        return z, log_p - spike_slab_log_density(z, active, mean, log_var, logits)
