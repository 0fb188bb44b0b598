"""The plain VAE (Kingma and Welling, 2014): the unconditional member of the family.

``p(z) = N(0, I)`` (or a standard Laplace), Gaussian decoder ``x | z ~ N(f(z),
sigma^2 I)`` and encoder ``q(z | x)``. With a Gaussian prior the ELBO is invariant to
rotations of z, so the latents are not identified: the VAE is the comparator that
shows what the conditioning of :class:`~identrep.models.vae.IVAE` buys.
"""

from __future__ import annotations

from collections.abc import Sequence

from identrep._typing import Seed
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    ELBO_CONSTRAINTS,
    LIKELIHOOD_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    BaseVAE,
    check_elbo_weights,
)
from identrep.models.vae._heldout import HeldoutNLLMixin
from identrep.models.vae._objectives import make_elbo_objective

__all__ = ["VAE"]


class VAE(HeldoutNLLMixin, BaseVAE):
    """Plain VAE with a fixed prior p(z) = N(0, I) and encoder q(z | x).

    No auxiliary variable: ``fit(X)`` / ``transform(X)`` need no targets or tasks
    (they are accepted and ignored).

    Parameters
    ----------
    n_latents : int, default=10
        Latent dimension d.
    encoder : {"linear", "mlp"}, default="mlp"
        Encoder architecture; also the decoder's unless ``decoder`` is set.
    decoder : {"linear", "mlp"} or None, default=None
        Decoder architecture (None: as ``encoder``).
    hidden_sizes : sequence of int, optional
        Hidden widths of the MLP encoder/decoder; default one layer of width
        ``max(2 * n_features, 32)``.
    activation : str, default="leaky_relu"
        Hidden activation (see :class:`~identrep.models.nn.mlp.MLP`).
    prior : {"gaussian", "laplace"}, default="gaussian"
        Family of the fixed prior (unit variance).
    decoder_var : float or "learned", default=0.01
        Observation-noise variance of the decoder on the standardised inputs, or a
        learned per-feature variance.
    likelihood : {"gaussian", "bernoulli", "categorical"}, default="gaussian"
        Observation model: Gaussian on the standardised features; Bernoulli on
        0/1 (or [0, 1]) features (the decoder gives logits); categorical =
        multinomial counts over the features (bag of words, user-item rows: a
        softmax across the features, the multinomial coefficient omitted). The
        encoder always sees the standardised features.
    objective : {"elbo", "weighted"}, default="elbo"
        The plain ELBO, or the TC-decomposed weighted objective of
        :func:`~identrep.models.vae._elbo.weighted_elbo_loss` (validation always
        uses the plain ELBO).
    elbo_weights : (float, float, float, float), optional
        (a, b, c, d) of the weighted objective; default (100, 1, 0, 10).
    anneal : bool, default=False
        With ``objective="weighted"``, move the weights linearly to (1, 1, 1, 1)
        over the first ``max_epochs / 1.6`` epochs.
    lr : float, default=1e-3
        Adam learning rate.
    lr_schedule : {None, "cosine"}, default=None
    batch_size : int, default=512
    max_epochs : int, default=100
    patience : int or None, default=10
        Early-stopping patience in epochs (None: run ``max_epochs`` epochs, still
        restoring the best validation epoch).
    val_fraction : float, default=0.1
        Fraction of the samples held out for validation (0: none).
    grad_clip : float, optional
        Clip the gradient norm to this value.
    device : str, default="cpu"
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, Generator or None
        Seeds the initialisation, the validation split, the batch order and the
        reparameterisation noise.
    verbose : bool, default=False

    Attributes
    ----------
    module_ : ConditionalVAE
        The trained model (eval mode), with an empty u.
    history_ : dict
        From :func:`~identrep.training.fit_module` (losses in nats per sample on
        the standardised inputs).
    n_latents_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` had string column names.
    tasks_ : ndarray of shape (1,)
        ``[0]``: the VAE pools all samples.
    n_tasks_ : int
    device_, dtype_
        The resolved torch device and dtype.
    fit_seconds_ : float

    Examples
    --------
    >>> import numpy as np
    >>> from identrep.models.vae import VAE
    >>> X = np.random.default_rng(0).normal(size=(100, 4))
    >>> VAE(n_latents=2, max_epochs=2, random_state=0).fit(X).transform(X).shape
    (100, 2)
    """

    _parameter_constraints: dict[str, list] = {
        **ARCHITECTURE_CONSTRAINTS,
        **ELBO_CONSTRAINTS,
        **TRAINING_CONSTRAINTS,
        **LIKELIHOOD_CONSTRAINTS,
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        encoder: str = "mlp",
        decoder: str | None = None,
        hidden_sizes: Sequence[int] | None = None,
        activation: str = "leaky_relu",
        prior: str = "gaussian",
        decoder_var: float | str = 0.01,
        likelihood: str = "gaussian",
        objective: str = "elbo",
        elbo_weights: Sequence[float] | None = None,
        anneal: bool = False,
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
        self.encoder = encoder
        self.decoder = decoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.prior = prior
        self.decoder_var = decoder_var
        self.likelihood = likelihood
        self.objective = objective
        self.elbo_weights = elbo_weights
        self.anneal = anneal
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
        check_elbo_weights(self)

    def _make_loss(self, n_train: int):
        return make_elbo_objective(
            self.objective, self.elbo_weights, self.anneal, self.max_epochs, n_train
        )
