"""iVAE (Khemakhem et al., 2020) and MT-iVAE (Chen et al., 2024).

The identifiable VAE observes an auxiliary variable u and models

* prior ``p(z | u) = prod_k N(z_k; m_k(u), exp(l_k(u)))`` (or Laplace), with
  ``m = 0`` (the authors' code) or learned, and ``l = MLP(u)`` soft-clamped;
* decoder ``x | z ~ N(f(z), sigma^2 I)`` with fixed ``sigma^2`` (or learned);
* encoder ``q(z | x, u) = N(g(x, u), diag(exp(h(x, u))))``.

When u takes enough distinct values that modulate the prior variances (e.g. more
segments than latents, variance-modulated sources), z is identified up to
permutation and component-wise affine maps (Khemakhem et al., Theorem 1): score it
with Pearson :func:`~identrep.metrics.mcc`. A plain VAE (u absent, p(z) = N(0, I))
is rotation-invariant and does not identify z.

How u is built (``conditioning``):

* :class:`IVAE`: ``"target"`` (default) u = y, pooling all tasks (Chen et al.'s
  comparison); ``"task"`` u = one-hot task code (the original iVAE: a segment or
  environment label); ``"target+task"`` u = [y, one-hot task].
* :class:`MTIVAE`: the task enters through a learnable embedding ``E_t``:
  ``"target+task"`` (default) u = [y, E_t]; ``"task"`` u = E_t.
* :class:`~identrep.models.vae.VAE` (its own module): no u.

The targets are standardised (pooled over tasks) before they enter u, and the
inputs are standardised before the encoder; both maps live in ``module_``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from identrep._typing import Seed
from identrep.models.nn.vae import (
    ConditionalPrior,
    ConditionalVAE,
    TaskPrior,
    soft_clamp,
)
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    ELBO_CONSTRAINTS,
    STEP_BUDGET_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    check_elbo_weights,
)
from identrep.models.vae._conditional import (
    ConditionalVAEEstimator,
    TaskEmbeddingMixin,
)
from identrep.models.vae._elbo import aggregate_posterior_log_probs, weighted_elbo_loss
from identrep.models.vae._objectives import make_elbo_objective
from identrep.utils._param_validation import StrOptions
from identrep.utils.validation import MultiTaskArrays

__all__ = [
    "IVAE",
    "MTIVAE",
    # the weighted objective's terms, defined in identrep.models.vae._elbo
    "aggregate_posterior_log_probs",
    "weighted_elbo_loss",
]


# =============================================================== estimators
class IVAE(ConditionalVAEEstimator):
    """Identifiable VAE (Khemakhem et al., 2020) conditioned on the target or task.

    See the module docstring for the model. ``fit`` maximises the ELBO (or the
    authors' weighted objective) with Adam on minibatches, early-stopping on the
    validation negative ELBO (:func:`identrep.training.fit_module`).
    ``transform(X, y, task_ids=...)`` returns the encoder mean: **the encoder
    q(z | x, u) needs u at transform time**, i.e. ``y`` for target conditioning
    and ``task_ids`` (tasks seen in fit) for task conditioning, unless
    ``condition_encoder=False`` (encoder q(z | x), transform from ``X`` alone).

    Parameters
    ----------
    n_latents : int, default=10
        Latent dimension d.
    conditioning : {"target", "task", "target+task"}, default="target"
        What u is: the target y (standardised, pooled over tasks), the one-hot task
        (segment) code, or both concatenated.
    encoder : {"linear", "mlp"}, default="mlp"
        Encoder architecture (linear: the mean and log-variance are affine in
        [x, u]); also the decoder's unless ``decoder`` is set. Use "linear" for a
        linear mixing (Table 1), "mlp" otherwise.
    decoder : {"linear", "mlp"} or None, default=None
        Decoder architecture (None: as ``encoder``).
    hidden_sizes : sequence of int, optional
        Hidden widths of the MLP encoder/decoder and of the prior network (an MLP
        whatever ``encoder`` is); default one layer of width
        ``max(2 * n_features, 32)``.
    activation : str, default="leaky_relu"
        Hidden activation (see :class:`~identrep.models.nn.mlp.MLP`).
    prior : {"gaussian", "laplace"}, default="gaussian"
        Family of the factorised prior p(z | u).
    learn_prior_mean : bool, default=False
        Also learn the prior mean m(u) (the authors' code fixes it to 0).
    decoder_var : float or "learned", default=0.01
        Observation-noise variance of the decoder on the standardised inputs
        (0.01 as in the icebeem iVAE), or a learned per-feature variance.
    condition_encoder : bool, default=True
        Feed u to the encoder (the iVAE encoder q(z | x, u)).
    objective : {"elbo", "weighted"}, default="elbo"
        The plain ELBO, or the authors' TC-decomposed weighted objective
        (:func:`weighted_elbo_loss`). Validation always uses the plain ELBO.
    elbo_weights : (float, float, float, float), optional
        (a, b, c, d) of the weighted objective; default (100, 1, 0, 10), the
        authors' ``configs/ivae.yaml``.
    anneal : bool, default=False
        With ``objective="weighted"``, move the weights linearly to (1, 1, 1, 1)
        over the first ``max_epochs / 1.6`` epochs (a simplification of the
        icebeem schedule), then train on the plain ELBO.
    lr : float, default=1e-3
        Adam learning rate.
    lr_schedule : {None, "cosine"}, default=None
        Constant learning rate, or cosine annealing to 1% of ``lr`` over
        ``max_epochs`` (see :func:`~identrep.training.fit_module`); the latter
        suits a fixed epoch budget.
    batch_size : int, default=512
    max_epochs : int, default=100
    steps_per_epoch : int or None, default=None
        Epochs of exactly this many optimiser steps instead of one pass over the
        training rows (:func:`~identrep.training.fit_module`), so that fits on
        data of different sizes can take the same number of steps.
    patience : int or None, default=10
        Early-stopping patience in epochs (None: run ``max_epochs`` epochs, still
        restoring the best validation epoch).
    val_fraction : float, default=0.1
        Fraction of each task's samples held out for validation (0: none).
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
        The trained model (in eval mode); ``module_.encode(x, y, task)`` maps raw
        tensors to the encoder parameters.
    history_ : dict
        From :func:`~identrep.training.fit_module` (losses in nats per sample on
        the standardised inputs).
    tasks_ : ndarray of shape (n_tasks,)
        Task labels seen in fit (one task ``[0]`` when fitted without task ids).
    n_tasks_ : int
    n_latents_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` had string column names.
    device_, dtype_
        The resolved torch device and dtype.
    fit_seconds_ : float

    Notes
    -----
    Measured on the segment process (:func:`identrep.datasets.make_segment_sources`,
    3 sources, 15 segments x 400, linear mixing, u = segment): with
    ``decoder_var=0.1`` the encoder mean reached Pearson MCC 0.94-0.99 in 80 epochs
    (lr 1e-2, cosine), with 0.01 the rotation towards the sources was several times
    slower. A larger fixed variance also biases the solution (the model adds
    isotropic noise the data may not have), and the mean-field posterior favours
    orthogonal mixings, so MCC can plateau below 1. A linear encoder cannot make
    its mean depend on u multiplicatively, as the exact posterior mean does; on
    that process (``decoder_var=0.03``, 60 epochs) ``encoder="linear"`` plateaued
    at MCC 0.71 on a seed where the MLP encoder reached 0.95.

    References
    ----------
    I. Khemakhem, D. P. Kingma, R. P. Monti, A. Hyvarinen (2020). Variational
    autoencoders and nonlinear ICA: a unifying framework. AISTATS.

    Examples
    --------
    >>> import identrep as ir
    >>> from identrep.models.vae import IVAE
    >>> data = ir.datasets.make_segment_sources(n_segments=5, n_per_segment=40,
    ...     n_latents=2, n_observed=3, random_state=0)
    >>> m = IVAE(n_latents=2, conditioning="task", max_epochs=2,
    ...          random_state=0).fit(data.X, task_ids=data.task_ids)
    >>> m.transform(data.X, task_ids=data.task_ids).shape
    (200, 2)
    """

    _parameter_constraints: dict[str, list] = {
        **ARCHITECTURE_CONSTRAINTS,
        **ELBO_CONSTRAINTS,
        **TRAINING_CONSTRAINTS,
        **STEP_BUDGET_CONSTRAINTS,
        "conditioning": [StrOptions({"target", "task", "target+task"})],
        "learn_prior_mean": ["boolean"],
        "condition_encoder": ["boolean"],
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
        prior: str = "gaussian",
        learn_prior_mean: bool = False,
        decoder_var: float | str = 0.01,
        condition_encoder: bool = True,
        objective: str = "elbo",
        elbo_weights: Sequence[float] | None = None,
        anneal: bool = False,
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 512,
        max_epochs: int = 100,
        steps_per_epoch: int | None = None,
        patience: int | None = 10,
        val_fraction: float = 0.1,
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
        self.prior = prior
        self.learn_prior_mean = learn_prior_mean
        self.decoder_var = decoder_var
        self.condition_encoder = condition_encoder
        self.objective = objective
        self.elbo_weights = elbo_weights
        self.anneal = anneal
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

    def _build_prior(self, cond_features: int, n_features: int) -> nn.Module:
        return ConditionalPrior(
            cond_features,
            int(self.n_latents),
            self._hidden(n_features),
            self.activation,
            learn_mean=bool(self.learn_prior_mean),
            dist=self.prior,
        )

    def _check_param_combinations(self) -> None:
        check_elbo_weights(self)

    def _standardize_once(self) -> bool:
        return True  # its losses read x through standardized_input (vae_pass)

    def _make_loss(self, n_train: int):
        return make_elbo_objective(
            self.objective, self.elbo_weights, self.anneal, self.max_epochs, n_train
        )


class MTIVAE(TaskEmbeddingMixin, IVAE):
    """Multi-task iVAE (Chen et al., 2024): an iVAE whose prior has per-task
    parameters.

    With ``task_prior="free"`` (default; the paper's Appendix C: the task
    parameters are free and learned with the rest) the prior is
    :class:`~identrep.models.nn.vae.TaskPrior`,

    ``p(z_j | y, t) = N(a_tj y + b_tj, exp(s_tj))``,

    with y the standardised target and 3 d free numbers per task; the encoder
    sees u = [y, E_t] with a learnable task embedding E. With
    ``task_prior="embedding"`` the prior is iVAE's network of the same u (mean 0
    unless ``learn_prior_mean``). Within a task every latent of Chen et al.'s
    process has unit variance, so what separates the latents across tasks is how
    each one moves with y: the slope a_t carries it, a zero-mean prior cannot
    (measurements: docs/notes.md, "MT-iVAE's free task prior").

    ``whiten="zca"`` replaces the per-feature standardisation of x by the pooled
    ZCA whitening (``"pca"``: the top ``n_latents`` principal components,
    whitened, for p > d); on a linear mixing that makes the unmixing nearly
    orthogonal, which the mean-field posterior favours. Task ids are required in
    fit and (with ``condition_encoder=True``) in transform.

    Parameters
    ----------
    n_latents : int, default=10
    conditioning : {"target+task", "task"}, default="target+task"
        u = [standardised y, task], or the task alone (e.g. segments as tasks,
        no target; the free prior is then ``N(b_tj, exp(s_tj))``).
    embedding_dim : int, optional
        Dimension of E_t; default ``n_latents``.
    task_prior : {"free", "embedding"}, default="free"
        Free per-task prior parameters, or a prior network of [y, E_t].
    whiten : {None, "zca", "pca"}, default=None
        Input map: per-feature standardisation (None), ZCA whitening, or
        whitened principal components (``n_latents`` of them).
        ZCA keeps all p directions at unit variance. On Chen et al.'s
        non-linear process (20 latents, noiseless MLP mixing; MT-iVAE with a
        learned decoder variance and lr 1e-2, k = 4, seed 0) it gave per-task
        MCC 0.95 / 0.94 at p = 50 / 100 and collapsed at p = 200 (0.43; at
        k = 8 and 12: 0.94 and 0.73), where ``"pca"`` gave 0.93 (0.72 / 0.90
        at p = 50 / 100). When p is many times ``n_latents``, compare the two
        (``docs/results/icarl_family_probe_s44/README.md``, stop 50).
    **other parameters
        As in :class:`IVAE`.

    Attributes
    ----------
    task_embeddings_ : ndarray of shape (n_tasks, embedding_dim)
        The learned E, rows in the order of ``tasks_`` (with the free prior: the
        encoder's).
    task_prior_params_ : dict or None
        With ``task_prior="free"``: ``"slope"``, ``"offset"``, ``"log_var"``
        arrays of shape (n_tasks, n_latents) (a, b and the clamped s; rows in the
        order of ``tasks_``, a in units of latent per standardised-target unit).
    module_, history_, tasks_, n_tasks_, n_latents_, n_features_in_, fit_seconds_
        As in :class:`IVAE`.

    References
    ----------
    W. Chen, J. Horwood, J. Heo, J. M. Hernandez-Lobato (2024). Leveraging task
    structures for improved identifiability in neural network representations. TMLR.

    Examples
    --------
    >>> import identrep as ir
    >>> from identrep.models.vae import MTIVAE
    >>> data = ir.datasets.make_segment_sources(n_segments=5, n_per_segment=40,
    ...     n_latents=2, n_observed=3, random_state=0)
    >>> m = MTIVAE(n_latents=2, max_epochs=2, random_state=0).fit(
    ...     data.X, data.y, task_ids=data.task_ids)
    >>> m.transform(data.X, data.y, task_ids=data.task_ids).shape
    (200, 2)
    >>> m.task_embeddings_.shape
    (5, 2)
    """

    _parameter_constraints: dict[str, list] = {
        **IVAE._parameter_constraints,
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
        prior: str = "gaussian",
        learn_prior_mean: bool = False,
        decoder_var: float | str = 0.01,
        condition_encoder: bool = True,
        objective: str = "elbo",
        elbo_weights: Sequence[float] | None = None,
        anneal: bool = False,
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 512,
        max_epochs: int = 100,
        steps_per_epoch: int | None = None,
        patience: int | None = 10,
        val_fraction: float = 0.1,
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
            prior=prior,
            learn_prior_mean=learn_prior_mean,
            decoder_var=decoder_var,
            condition_encoder=condition_encoder,
            objective=objective,
            elbo_weights=elbo_weights,
            anneal=anneal,
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
        """The embedding variant: :meth:`IVAE._build_module`. The free prior:
        parameters created in the order conditioner, encoder, decoder (the
        :class:`~identrep.models.nn.vae.TaskPrior` starts at zero)."""
        if not self._free_task_prior():
            return super()._build_module(
                n_features, n_tasks, x_mean, x_scale, y_mean, y_scale
            )
        cond = self._build_conditioner(n_tasks, y_mean, y_scale)
        enc_c = cond.out_features if self._condition_encoder() else 0
        return ConditionalVAE(
            self._build_encoder(n_features, enc_c),
            self._build_decoder(n_features),
            TaskPrior(n_tasks, int(self.n_latents), self._uses_target(), self.prior),
            cond,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
            condition_encoder=self._condition_encoder(),
            prior_conditioner=self._build_prior_conditioner(n_tasks, y_mean, y_scale),
        )

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        emb: nn.Embedding = self.module_.conditioner.embedding
        self.task_embeddings_ = emb.weight.detach().cpu().double().numpy()
        self.task_prior_params_ = None
        prior = self.module_.prior
        if isinstance(prior, TaskPrior):
            log_var = soft_clamp(prior.log_var, prior.log_var_bound)
            self.task_prior_params_ = {
                name: v.detach().cpu().double().numpy()
                for name, v in (
                    ("slope", prior.slope),
                    ("offset", prior.offset),
                    ("log_var", log_var),
                )
            }
