"""The beta-VAE (Higgins et al., 2017): the VAE with the KL weighted by beta.

``beta > 1`` trades reconstruction for a posterior closer to the factorised prior
(more "disentangled" but still not identified); ``beta = 1`` is the
:class:`~identrep.models.vae.VAE`, draw for draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from numbers import Real

from identrep._typing import Seed
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    ELBO_CONSTRAINTS,
    LIKELIHOOD_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    BaseVAE,
)
from identrep.models.vae._elbo import neg_elbo_loss
from identrep.models.vae._heldout import HeldoutNLLMixin
from identrep.utils._param_validation import Interval

__all__ = ["BetaVAE"]


class BetaVAE(HeldoutNLLMixin, BaseVAE):
    """beta-VAE: loss ``-E_q[log p(x | z)] + beta KL(q(z | x) || p(z))``.

    Parameters
    ----------
    n_latents : int, default=10
    beta : float, default=4.0
        Weight of the KL term (> 0; 1 is the VAE). The Sparse VAE paper swept
        {2, 4, 6, 8, 16}.
    encoder, decoder, hidden_sizes, activation, prior, decoder_var, likelihood
        As :class:`~identrep.models.vae.VAE`.
    lr, lr_schedule, batch_size, max_epochs, patience, val_fraction, grad_clip,
    device, dtype, random_state, verbose
        As :class:`~identrep.models.vae.VAE`.

    Attributes
    ----------
    module_, history_, n_latents_, n_features_in_, feature_names_in_, tasks_,
    n_tasks_, device_, dtype_, fit_seconds_
        As :class:`~identrep.models.vae.VAE` (validation losses are the
        beta-weighted objective).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 4))
    >>> BetaVAE(n_latents=2, max_epochs=2, random_state=0).fit(X).transform(X).shape
    (100, 2)
    """

    _parameter_constraints: dict[str, list] = {
        **ARCHITECTURE_CONSTRAINTS,
        "prior": ELBO_CONSTRAINTS["prior"],
        **TRAINING_CONSTRAINTS,
        **LIKELIHOOD_CONSTRAINTS,
        "beta": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        beta: float = 4.0,
        encoder: str = "mlp",
        decoder: str | None = None,
        hidden_sizes: Sequence[int] | None = None,
        activation: str = "leaky_relu",
        prior: str = "gaussian",
        decoder_var: float | str = 0.01,
        likelihood: str = "gaussian",
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 512,
        max_epochs: int = 100,
        patience: int | None = 10,
        val_fraction: float = 0.1,
        grad_clip: float | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.beta = beta
        self.encoder = encoder
        self.decoder = decoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.prior = prior
        self.decoder_var = decoder_var
        self.likelihood = likelihood
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

    def _make_loss(self, n_train: int):
        return partial(neg_elbo_loss, beta=float(self.beta)), None
