"""The Sparse VAE (Moran, Sridhar, Wang and Blei, TMLR 2022).

Each feature j is generated from a masked copy of the latents,
``x_j ~ p(x_j | f_j(w_j * z))`` with ``z ~ N(0, I)``, a shared network and a
per-feature head (:class:`~identrep.models.nn.sparse_vae.MaskedFeatureDecoder`). The
masks W carry a Spike-and-Slab Lasso prior (:mod:`identrep.models.vae._ssl`), fitted
by the paper's EM-flavoured amortised VI: before every gradient step on a training
minibatch the E-step sets the inclusion probabilities p* and the M-step the rates
eta in closed form; the gradient step then descends the per-datum negative ELBO plus
the weighted W penalty / N (:func:`~identrep.models.vae._ssl.sparse_vae_loss`),
after a warm-up without the prior, on a decoder whose shared network has fixed
scales (so that the penalty on W cannot be escaped by rescaling). With anchor
features (two per factor that depend on it alone) the factors are identified up to
permutation and per-factor transformations (the paper's Theorems 1-2).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import torch

from identrep._typing import Seed
from identrep.exceptions import DataError
from identrep.models.nn.sparse_vae import (
    LIKELIHOODS,
    MaskedFeatureDecoder,
    SparseVAEModule,
)
from identrep.models.nn.vae import GaussianEncoder
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    BaseVAE,
)
from identrep.models.vae._elbo import VAEBatch
from identrep.models.vae._heldout import HeldoutNLLMixin
from identrep.models.vae._ssl import (
    noise_prior_scale,
    sparse_vae_loss,
    ssl_inclusion_probs,
    ssl_update_eta,
)
from identrep.utils._param_validation import Interval, SequenceOf, StrOptions
from identrep.utils.numerics import safe_scale
from identrep.utils.seeding import check_random_state, seeded
from identrep.utils.validation import MultiTaskArrays, as_float64_csr

__all__ = ["SparseVAE"]

_POS = Interval(Real, 0, None, closed="neither")
_ROWS = 4096  # rows densified at a time for sparse input


class SSLObjective:
    """Training loss with the SSL E-step before every training minibatch.

    In train mode (``fit_module``'s optimisation steps) it first sets p* and eta
    from the current W (:func:`~identrep.models.vae._ssl.ssl_inclusion_probs`,
    :func:`~identrep.models.vae._ssl.ssl_update_eta`), then returns
    :func:`~identrep.models.vae._ssl.sparse_vae_loss`; in eval mode (validation) it
    only evaluates the loss.
    """

    def __init__(self, est: SparseVAE, n_data: int, noise_prior):
        self.lambda0, self.lambda1 = float(est.lambda0), float(est.lambda1)
        self.a, self.legacy = float(est.a), bool(est.legacy_estep)
        self.b = None if est.b is None else float(est.b)
        self.n_data, self.noise_prior = int(n_data), noise_prior
        self.mult = float(est.prior_weight)
        self.kl_weight = float(est.kl_weight)
        per_epoch = -(-int(n_data) // int(est.batch_size))
        total = int(est.max_epochs) * per_epoch
        self.warmup_steps = round(float(est.ssl_warmup) * total)
        self.anneal_steps = round(float(est.lambda0_anneal) * total)
        self.ramp_steps = round(float(est.ssl_ramp) * total)
        self.step = 0

    def spike(self) -> float:
        """lambda0 at the current step: after the warm-up it grows geometrically
        from lambda1 to lambda0 over ``anneal_steps`` (Rockova and George's
        dynamic posterior exploration), then stays at lambda0."""
        if self.anneal_steps <= 0:
            return self.lambda0
        frac = min(1.0, (self.step - self.warmup_steps) / self.anneal_steps)
        frac = max(0.0, frac)
        return self.lambda1 * (self.lambda0 / self.lambda1) ** frac

    def ramp(self) -> float:
        """Fraction of the prior weight at the current step: it grows linearly
        from 0 to 1 over ``ramp_steps`` after the warm-up."""
        if self.ramp_steps <= 0:
            return 1.0
        return min(1.0, max(0.0, (self.step - self.warmup_steps) / self.ramp_steps))

    def e_step(self, module: SparseVAEModule) -> None:
        with torch.no_grad():
            W = module.decoder.W
            b = float(W.shape[0]) if self.b is None else self.b
            p = ssl_inclusion_probs(
                W, module.eta, self.spike(), self.lambda1, legacy=self.legacy
            )
            module.p_star.copy_(p)
            module.eta.copy_(ssl_update_eta(p, self.a, b))

    def __call__(self, module: SparseVAEModule, batch: VAEBatch):
        warm = self.step < self.warmup_steps
        if module.training:
            self.step += 1
            if not warm:
                self.e_step(module)
        return sparse_vae_loss(
            module,
            batch,
            n_data=self.n_data,
            lambda0=self.spike(),
            lambda1=self.lambda1,
            noise_prior=self.noise_prior,
            penalty_weight=0.0 if warm else self.mult * self.ramp(),
            kl_weight=self.kl_weight,
        )


class SparseVAE(HeldoutNLLMixin, BaseVAE):
    """Sparse VAE: per-feature decoder masks with a Spike-and-Slab Lasso prior.

    Parameters
    ----------
    n_latents : int, default=5
        Number of latents K (an overestimate is fine: the SSL prior empties the
        mask columns of unused latents).
    likelihood : {"gaussian", "bernoulli", "categorical"}, default="gaussian"
        Gaussian on standardised features with learned per-feature variances;
        Bernoulli on 0/1 (or [0, 1]) features; categorical = multinomial counts
        over the features (bag of words; softmax across features).
    lambda0 : float, default=10.0
        Spike rate of the SSL prior (large: pushes masks to 0).
    lambda1 : float, default=1.0
        Slab rate (small: leaves large masks nearly unpenalised).
    a : float, default=1.0
    b : float or None, default=None
        Beta(a, b) prior of the inclusion rates eta_k; None is ``n_features``
        (the paper's choice).
    legacy_estep : bool, default=False
        Drop the lambda / 2 constants from the E-step, as the authors' code does
        (inflates the slab odds by lambda0 / lambda1); for replication only.
    noise_df : float or None, default=3.0
        Degrees of freedom of the scaled inverse-chi^2 prior of the Gaussian noise
        variances, calibrated as in the paper (5% quantile of the feature variances
        at its 90% quantile); None: no prior.
    prior_weight : float, default=50.0
        Weight of the SSL penalty in the per-datum objective: the loss is the
        negative ELBO per datum plus ``prior_weight * penalty / N``. 1 is the
        exact MAP objective, in which the prior on W counts once against N data
        points and barely separates a sparse decoder from a rotated dense one at
        N = 1,000; the authors' loss scaling amounts to about
        ``n_features * N / batch_size`` (70 on the synthetic data). See
        docs/notes.md ("Sparse VAE on the synthetic process").
    kl_weight : float, default=1.0
        Weight c of the KL term: the per-datum loss is
        ``mean_i [-log p(x_i | z_i, W) + c KL(q(z | x_i) || p(z))]
        + prior_weight * penalty / N``. 1 is the ELBO (the unweighted
        objective); the authors' code averages the KL over the K latents, i.e.
        ``c = 1 / K`` (what the real-data tables' ``SVAE_KL1overK`` row uses).
        Smaller values sharpen the posteriors (less collapse), lowering the
        one-draw reconstruction NLL while loosening the bound.
    fix_scale : bool, default=True
        Give the shared decoder network fixed scales (the first layer's columns
        and every later layer's weight keep their norms at initialisation), so
        that the masks W alone carry the scale of each latent's effect; without
        it W can shrink against a growing first layer at no cost in fit, which
        empties the penalty of meaning.
    fix_head : bool, default=False
        Also keep every per-feature head row at its initial norm, so that (with
        ``fix_scale``) a feature's gain in z is bounded by a constant times
        |w_j| and a head cannot grow to let its mask shrink under the spike.
    lambda0_anneal : float in [0, 1], default=0.0
        Fraction of ``max_epochs`` after the warm-up over which the spike rate
        grows geometrically from ``lambda1`` to ``lambda0`` (0: off).
    ssl_ramp : float in [0, 1], default=0.0
        Fraction of ``max_epochs`` after the warm-up over which the prior weight
        grows linearly from 0 to ``prior_weight`` (0: off).
    n_restarts : int, default=1
        Fits from different initialisations (seeds drawn from ``random_state``);
        the one with the lowest :meth:`training_objective` on the training data
        is kept. On the correlated synthetic process, 4 restarts with
        ``prior_corr="learned"`` recovered the factors where single fits failed
        (docs/notes.md).
    ssl_warmup : float in [0, 1], default=0.2
        Fraction of ``max_epochs`` trained as a plain masked VAE (no penalty, no
        E-step, p* = eta = 0.5) before the SSL prior joins; without it a latent
        that the early network ignores loses its masks to the spike and its
        inclusion rate to 0 for good.
    prior_corr : {"identity", "learned"}, default="identity"
        Prior z ~ N(0, Sigma) with Sigma = I (the paper's experiments) or a
        learned correlation matrix (the paper's Eq. 1, KL of Appendix B.2); on
        the synthetic process the learned one broke rho = 0 in 2 of 3 seeds
        (docs/notes.md).
    encoder : {"linear", "mlp"}, default="mlp"
    hidden_sizes : sequence of int, default=(50, 50)
        Widths of the encoder MLP and of the decoder's shared network.
    activation : str, default="relu"
    decoder_var : float or "learned", default="learned"
        Gaussian noise variance on standardised features (fixed) or learned.
    chunk_size : int, optional
        Features per decoder block (memory bound); default automatic.
    lr : float, default=1e-2
    lr_schedule : {None, "cosine"}, default="cosine"
    batch_size : int, default=100
    max_epochs : int, default=200
    patience : int or None, default=None
        Early-stopping patience (None: all ``max_epochs``, restoring the best
        validation epoch when ``val_fraction > 0``).
    val_fraction : float, default=0.0
    grad_clip : float, optional
    device : str, default="cpu"
    dtype : {"float32", "float64"}, default="float32"
    random_state : int, Generator or None
    verbose : bool, default=False

    Attributes
    ----------
    module_ : SparseVAEModule
    mask_ : ndarray of shape (n_features_in_, n_latents)
        The learned masks W.
    inclusion_ : ndarray of shape (n_features_in_, n_latents)
        The final E-step's P(gamma_jk = 1 | w_jk, eta_k).
    inclusion_rates_ : ndarray of shape (n_latents,)
        eta.
    support_ : ndarray of shape (n_features_in_, n_latents), bool
        ``inclusion_ > 0.5``: feature j uses latent k.
    restart_objectives_ : ndarray of shape (n_restarts,)
        The training objective of every restart (only with ``n_restarts > 1``).
    best_restart_ : int
        Index of the kept restart (only with ``n_restarts > 1``).
    history_ : dict
        Losses in nats per datum (Gaussian: on the standardised features).
    n_latents_, n_features_in_, feature_names_in_, device_, dtype_, fit_seconds_

    Notes
    -----
    ``heldout_nll``, ``score`` and ``reconstruct`` are the VAE family's
    (:mod:`identrep.models.vae._heldout`), through the masked decoder; sparse rows
    are densified a block at a time.

    References
    ----------
    Moran, G. E., Sridhar, D., Wang, Y. and Blei, D. M. (2022). Identifiable deep
    generative models via sparse decoding. TMLR.

    Examples
    --------
    >>> from identrep.datasets import make_sparse_factors
    >>> data = make_sparse_factors(200, random_state=0)
    >>> m = SparseVAE(n_latents=2, max_epochs=2, random_state=0).fit(data.X)
    >>> m.transform(data.X).shape, m.mask_.shape
    ((200, 2), (7, 2))
    """

    _parameter_constraints: dict[str, list] = {
        **{
            k: ARCHITECTURE_CONSTRAINTS[k]
            for k in ("n_latents", "encoder", "activation", "decoder_var")
        },
        "hidden_sizes": [SequenceOf(Interval(Integral, 1, None, closed="left"))],
        **TRAINING_CONSTRAINTS,
        "likelihood": [StrOptions(set(LIKELIHOODS))],
        "lambda0": [_POS],
        "lambda1": [_POS],
        "a": [_POS],
        "b": [_POS, None],
        "legacy_estep": ["boolean"],
        "noise_df": [_POS, None],
        "chunk_size": [Interval(Integral, 1, None, closed="left"), None],
        "weight_decay": [Interval(Real, 0, None, closed="left")],
        "prior_corr": [StrOptions({"identity", "learned"})],
        "ssl_warmup": [Interval(Real, 0, 1, closed="both")],
        "prior_weight": [_POS],
        "kl_weight": [_POS],
        "fix_scale": ["boolean"],
        "fix_head": ["boolean"],
        "lambda0_anneal": [Interval(Real, 0, 1, closed="both")],
        "ssl_ramp": [Interval(Real, 0, 1, closed="both")],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_latents: int = 5,
        *,
        likelihood: str = "gaussian",
        lambda0: float = 10.0,
        lambda1: float = 1.0,
        a: float = 1.0,
        b: float | None = None,
        legacy_estep: bool = False,
        noise_df: float | None = 3.0,
        prior_weight: float = 50.0,
        kl_weight: float = 1.0,
        fix_scale: bool = True,
        fix_head: bool = False,
        lambda0_anneal: float = 0.0,
        ssl_ramp: float = 0.0,
        n_restarts: int = 1,
        ssl_warmup: float = 0.2,
        prior_corr: str = "identity",
        encoder: str = "mlp",
        hidden_sizes=(50, 50),
        activation: str = "relu",
        decoder_var: float | str = "learned",
        chunk_size: int | None = None,
        lr: float = 1e-2,
        weight_decay: float = 0.0,
        lr_schedule: str | None = "cosine",
        batch_size: int = 100,
        max_epochs: int = 200,
        patience: int | None = None,
        val_fraction: float = 0.0,
        grad_clip: float | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.likelihood = likelihood
        self.lambda0 = lambda0
        self.lambda1 = lambda1
        self.a = a
        self.b = b
        self.legacy_estep = legacy_estep
        self.noise_df = noise_df
        self.prior_weight = prior_weight
        self.kl_weight = kl_weight
        self.fix_scale = fix_scale
        self.fix_head = fix_head
        self.lambda0_anneal = lambda0_anneal
        self.ssl_ramp = ssl_ramp
        self.n_restarts = n_restarts
        self.ssl_warmup = ssl_warmup
        self.prior_corr = prior_corr
        self.encoder = encoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.decoder_var = decoder_var
        self.chunk_size = chunk_size
        self.lr = lr
        self.weight_decay = weight_decay
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

    # ------------------------------------------------------------------- fit
    def fit(self, X, y=None, *, task_ids=None):
        """Fit ``n_restarts`` times from different initialisations and keep the
        fit with the lowest training objective (:meth:`training_objective` on
        ``X``); with one restart, a single fit."""
        self._validate_params()
        if int(self.n_restarts) <= 1:
            return super().fit(X, y, task_ids=task_ids)
        rng = check_random_state(self.random_state)
        seeds = rng.integers(0, 2**31 - 1, size=int(self.n_restarts))
        best, objectives = None, []
        for seed in seeds:
            est = self.__class__(**{**self.get_params(), "n_restarts": 1})
            est.set_params(random_state=int(seed)).fit(X, y, task_ids=task_ids)
            objectives.append(est.training_objective(X))
            if best is None or objectives[-1] < min(objectives[:-1]):
                best = est
        fitted = {k: v for k, v in best.__dict__.items() if k not in self.get_params()}
        self.__dict__.update(fitted)
        self.restart_objectives_ = np.asarray(objectives)
        self.best_restart_ = int(np.argmin(objectives))
        return self

    def training_objective(self, X, *, n_draws: int = 8) -> float:
        """The training objective at the fitted parameters: the per-datum
        negative ELBO on ``X`` (``n_draws`` reparameterised z per row, a fixed
        torch seed; its KL weighed by ``kl_weight``) plus the weighted SSL
        penalty and the noise prior over N = the rows of ``X``, at the final
        E-step's p*; lower is better. It is what ``n_restarts`` compares."""
        self._check_fitted()
        Xc = self._check_transform_data(X, None, None)[0]
        n, m = Xc.shape[0], self.module_
        loss = SSLObjective(self, n, self._make_loss(n)[0].noise_prior)
        loss.step = loss.warmup_steps + loss.ramp_steps + loss.anneal_steps
        total = 0.0
        with torch.no_grad(), seeded(0):
            for s in range(0, n, _ROWS):
                block = Xc[s : s + _ROWS]
                x = self._tensor(
                    block.toarray() if sp.issparse(block) else block, self._x_dtype()
                )
                zeros = x.new_zeros(x.shape[0])
                for _ in range(int(n_draws)):
                    value, rows = loss(m, VAEBatch(x, zeros, zeros.long()))
                    total += float(value) * rows
        return total / (n * int(n_draws))

    # ------------------------------------------------------------------ data
    def _check_fit_input(self, X, *, min_samples: int = 1) -> None:
        if not sp.issparse(X):
            super()._check_fit_input(X, min_samples=min_samples)

    def _sparse(self, X, name: str = "X") -> sp.csr_matrix:
        """Sparse input as float64 CSR (a copy) with finite stored values."""
        Xs = as_float64_csr(X)
        if Xs.shape[0] < 1 or Xs.shape[1] < 1:
            raise DataError(
                f"{name} must have at least one row and one column; got shape "
                f"{Xs.shape}."
            )
        bad = ~np.isfinite(Xs.data)
        if bad.any():
            raise DataError(
                f"{name} contains {int(bad.sum())} non-finite stored values; drop or "
                "impute them before fit."
            )
        return Xs

    def _check_fit_data(self, X, y, task_ids) -> MultiTaskArrays:
        if not sp.issparse(X):
            return super()._check_fit_data(X, y, task_ids)
        Xs = self._sparse(X)
        n = Xs.shape[0]
        zeros = np.zeros(n, dtype=np.int64)
        ids = np.arange(n, dtype=np.int64)
        return MultiTaskArrays(Xs, np.zeros(n), zeros, ids, np.array([0]), "long")

    def _check_transform_data(self, X, y, task_ids):
        if not sp.issparse(X):
            return super()._check_transform_data(X, y, task_ids)
        self._check_fitted()
        Xs = self._sparse(X)
        if Xs.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {Xs.shape[1]} features, but SparseVAE is expecting "
                f"{self.n_features_in_} features as input: it was fitted with "
                f"n_features_in_={self.n_features_in_}."
            )
        n = Xs.shape[0]
        return Xs, np.zeros(n), np.zeros(n, dtype=np.int64)

    def _input_stats(self, X):
        if not sp.issparse(X):
            return super()._input_stats(X)
        mean = np.asarray(X.mean(axis=0)).ravel()
        sq = np.asarray(X.multiply(X).mean(axis=0)).ravel()
        return mean, safe_scale(np.sqrt(np.maximum(sq - mean**2, 0.0)), mean)

    def _make_collate(self, Xo, data):
        if not sp.issparse(Xo):
            return super()._make_collate(Xo, data)
        y0 = self._tensor(np.zeros(1))
        t0 = self._tensor(np.zeros(1, dtype=np.int64), torch.int64)

        def collate(obs):
            rows = obs.detach().cpu().numpy()
            x = self._tensor(Xo[rows].toarray())
            n = x.shape[0]
            return VAEBatch(x, y0.expand(n), t0.expand(n))

        return collate

    def _encode(self, X, y, codes):
        if not sp.issparse(X):
            return super()._encode(X, y, codes)
        parts = [
            super(SparseVAE, self)._encode(
                X[s : s + _ROWS].toarray(), y[s : s + _ROWS], codes[s : s + _ROWS]
            )
            for s in range(0, X.shape[0], _ROWS)
        ]
        return tuple(np.concatenate(p) for p in zip(*parts, strict=True))

    # ----------------------------------------------------------------- hooks
    def _build_module(self, n_features, n_tasks, x_mean, x_scale, y_mean, y_scale):
        hidden = tuple(int(h) for h in self.hidden_sizes) or (50,)
        enc_hidden = hidden if self.encoder == "mlp" else ()
        encoder = GaussianEncoder(
            n_features, 0, int(self.n_latents), enc_hidden, self.activation
        )
        decoder = MaskedFeatureDecoder(
            int(self.n_latents),
            n_features,
            hidden,
            self.activation,
            self.chunk_size,
            unit_first=bool(self.fix_scale),
            unit_head=bool(self.fix_head),
        )
        learned = isinstance(self.decoder_var, str)
        return SparseVAEModule(
            encoder,
            decoder,
            self.likelihood,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
            learn_var=learned,
            obs_var=1.0 if learned else float(self.decoder_var),
            learn_prior_corr=self.prior_corr == "learned",
        )

    def _make_loss(self, n_train: int):
        prior = None
        if self.likelihood == "gaussian" and self.noise_df is not None:
            # on standardised features every sample variance is 1
            df = float(self.noise_df)
            prior = (df / 2.0, noise_prior_scale(np.ones(1), df=df))
        return SSLObjective(self, n_train, prior), None

    def _set_fitted(self, data) -> None:
        m = self.module_
        self.mask_ = m.decoder.W.detach().cpu().double().numpy()
        self.inclusion_ = m.p_star.detach().cpu().double().numpy()
        self.inclusion_rates_ = m.eta.detach().cpu().double().numpy()
        self.support_ = self.inclusion_ > 0.5

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
