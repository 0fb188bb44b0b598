"""Shared pieces of the (conditional) VAE baselines: iVAE, MT-iVAE, iCaRL, plain VAE.

Three layers (STYLE.md rule 2):

* **pure functions** on tensors: :func:`gaussian_log_prob`, :func:`laplace_log_prob`,
  :func:`reparameterize`, :func:`kl_diag_gaussians`, :func:`soft_clamp`, and the
  negative ELBO :func:`neg_elbo_loss`;
* **modules** whose ``forward`` returns distribution parameters, never losses:
  :class:`GaussianEncoder` q(z | x, u), :class:`GaussianDecoder` p(x | z),
  :class:`ConditionalPrior` p(z | u), :class:`Conditioner` (builds u from the target
  and the task) and :class:`ConditionalVAE` (all of them, with the standardisation of
  ``x`` folded in);
* the **estimator base** :class:`ConditionalVAEEstimator`, which validates
  hyperparameters and data (long or wide layout), standardises, splits, batches,
  trains with :func:`identrep.training.fit_module` and implements ``transform``.
  Subclasses choose the conditioning and may replace the module and the loss through
  the hooks :meth:`~ConditionalVAEEstimator._build_module` and
  :meth:`~ConditionalVAEEstimator._make_loss`.

Every density is parameterised by its **log-variance** (also the Laplace one), so
encoder, prior and decoder outputs plug into any log-density here. All log-densities
and KLs are summed over the last dimension (one value per sample).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.models._base import IdentrepEstimator
from identrep.models.nn.mlp import _ACTIVATIONS, MLP, Standardize
from identrep.training.loop import IndexBatches, fit_module, split_within_tasks
from identrep.utils.seeding import check_random_state, seeded, torch_seed_from
from identrep.utils.torch import resolve_device, resolve_dtype
from identrep.utils.validation import (
    MultiTaskArrays,
    check_array,
    check_multitask,
    check_task_ids,
    encode_task_ids,
)

__all__ = [
    "Conditioner",
    "ConditionalPrior",
    "ConditionalVAE",
    "ConditionalVAEEstimator",
    "GaussianDecoder",
    "GaussianEncoder",
    "VAEBatch",
    "VAEOutput",
    "gaussian_log_prob",
    "kl_diag_gaussians",
    "laplace_log_prob",
    "neg_elbo_loss",
    "reparameterize",
    "soft_clamp",
]

_LOG_2PI = math.log(2.0 * math.pi)
_PRIORS = ("gaussian", "laplace")
_ARCHS = ("linear", "mlp")


# =========================================================== pure functions
def gaussian_log_prob(x: Tensor, mean: Tensor, log_var: Tensor) -> Tensor:
    """Log-density of a diagonal Gaussian, summed over the last dimension.

    ``sum_k -0.5 * (log 2pi + log_var_k + (x_k - mean_k)^2 / exp(log_var_k))``.

    Parameters
    ----------
    x, mean, log_var : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    return -0.5 * (_LOG_2PI + log_var + (x - mean).square() * torch.exp(-log_var)).sum(
        -1
    )


def laplace_log_prob(x: Tensor, loc: Tensor, log_var: Tensor) -> Tensor:
    """Log-density of independent Laplace variables given their log-variances.

    A Laplace(loc, b) variable has variance ``2 b^2``, so ``b = sqrt(exp(log_var) /
    2)`` and the density is ``exp(-|x - loc| / b) / (2 b)``; summed over the last
    dimension.

    Parameters
    ----------
    x, loc, log_var : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...)
    """
    log_b = 0.5 * (log_var - math.log(2.0))
    return -(math.log(2.0) + log_b + (x - loc).abs() * torch.exp(-log_b)).sum(-1)


def reparameterize(mean: Tensor, log_var: Tensor, eps: Tensor | None = None) -> Tensor:
    """One reparameterised sample ``mean + exp(log_var / 2) * eps``.

    Parameters
    ----------
    mean, log_var : Tensor of shape (..., n)
    eps : Tensor of shape (..., n), optional
        Standard-normal noise. If omitted it is drawn with ``torch.randn_like``
        from torch's global generator (estimators seed it with
        :func:`identrep.utils.seeding.seeded`).

    Returns
    -------
    Tensor of shape (..., n)
    """
    if eps is None:
        eps = torch.randn_like(mean)
    return mean + torch.exp(0.5 * log_var) * eps


def kl_diag_gaussians(
    mean_q: Tensor, log_var_q: Tensor, mean_p: Tensor, log_var_p: Tensor
) -> Tensor:
    """KL(q || p) between diagonal Gaussians, summed over the last dimension.

    ``0.5 * sum_k [log_var_p - log_var_q + (var_q + (mean_q - mean_p)^2) / var_p - 1]``.

    Parameters
    ----------
    mean_q, log_var_q, mean_p, log_var_p : Tensor of broadcastable shapes (..., n)

    Returns
    -------
    Tensor of shape (...), non-negative.
    """
    return 0.5 * (
        log_var_p
        - log_var_q
        + (torch.exp(log_var_q) + (mean_q - mean_p).square()) * torch.exp(-log_var_p)
        - 1.0
    ).sum(-1)


def soft_clamp(x: Tensor, bound: float) -> Tensor:
    """``bound * tanh(x / bound)``: a smooth clamp to (-bound, bound).

    Used on log-variances, which otherwise can blow up or underflow (baselines.md
    1.6); unlike a hard clamp it keeps a gradient everywhere.
    """
    return bound * torch.tanh(x / bound)


# ================================================================= modules
def _net(in_features: int, hidden: Sequence[int], out: int, activation: str):
    """An MLP, or a single Linear layer when ``hidden`` is empty."""
    return MLP(in_features, tuple(hidden), out, activation=activation)


class GaussianEncoder(nn.Module):
    """Diagonal-Gaussian encoder q(z | x, u) = N(mean(x, u), diag(exp(log_var(x, u)))).

    One network (linear when ``hidden_sizes`` is empty, else an
    :class:`~identrep.models.nn.mlp.MLP`) maps ``concat[x, u]`` to ``2 * n_latents``
    outputs: the mean head and the log-variance head (soft-clamped to
    ``(-log_var_bound, log_var_bound)``).

    Parameters
    ----------
    in_features : int
        Dimension of x.
    cond_features : int
        Dimension of u (0: the encoder sees x only).
    n_latents : int
    hidden_sizes : sequence of int, default=()
    activation : str, default="leaky_relu"
    log_var_bound : float, default=10.0

    Examples
    --------
    >>> import torch
    >>> enc = GaussianEncoder(5, 2, 3, hidden_sizes=[16])
    >>> mean, log_var = enc(torch.zeros(4, 5), torch.zeros(4, 2))
    >>> mean.shape, log_var.shape
    (torch.Size([4, 3]), torch.Size([4, 3]))
    """

    def __init__(
        self,
        in_features: int,
        cond_features: int,
        n_latents: int,
        hidden_sizes: Sequence[int] = (),
        activation: str = "leaky_relu",
        log_var_bound: float = 10.0,
    ):
        super().__init__()
        self.in_features, self.cond_features = int(in_features), int(cond_features)
        self.n_latents = int(n_latents)
        self.log_var_bound = float(log_var_bound)
        self.net = _net(
            self.in_features + self.cond_features,
            hidden_sizes,
            2 * self.n_latents,
            activation,
        )

    def forward(self, x: Tensor, u: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(mean, log_var)``, each of shape (batch, n_latents)."""
        h = x if u is None or self.cond_features == 0 else torch.cat([x, u], -1)
        mean, raw = self.net(h).chunk(2, dim=-1)
        return mean, soft_clamp(raw, self.log_var_bound)


class GaussianDecoder(nn.Module):
    """Gaussian decoder p(x | z) = N(f(z), diag(obs_var)).

    ``f`` is linear (``hidden_sizes`` empty) or an MLP. The observation variance is
    fixed to ``obs_var`` (a buffer), or a learned per-feature log-variance
    initialised at ``log(obs_var)`` when ``learn_var=True`` (baselines.md 1.6: a
    learned variance can trade reconstruction against KL and collapse posteriors).

    Parameters
    ----------
    n_latents : int
    out_features : int
    hidden_sizes : sequence of int, default=()
    activation : str, default="leaky_relu"
    obs_var : float, default=0.01
    learn_var : bool, default=False

    Examples
    --------
    >>> import torch
    >>> dec = GaussianDecoder(3, 5)
    >>> mean, log_var = dec(torch.zeros(4, 3))
    >>> mean.shape, log_var.shape
    (torch.Size([4, 5]), torch.Size([5]))
    """

    def __init__(
        self,
        n_latents: int,
        out_features: int,
        hidden_sizes: Sequence[int] = (),
        activation: str = "leaky_relu",
        obs_var: float = 0.01,
        learn_var: bool = False,
    ):
        super().__init__()
        self.net = _net(n_latents, hidden_sizes, out_features, activation)
        init = torch.full((int(out_features),), math.log(float(obs_var)))
        if learn_var:
            self.log_var = nn.Parameter(init)
        else:
            self.register_buffer("log_var", init)

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """``(mean, log_var)``: (batch, out_features) and (out_features,)."""
        return self.net(z), self.log_var


class ConditionalPrior(nn.Module):
    """Factorised prior p(z | u) with log-variance (and optionally mean) = MLP(u).

    ``dist="gaussian"``: z_k | u ~ N(m_k(u), exp(l_k(u))); ``dist="laplace"``: a
    Laplace with the same mean and variance. The log-variance is soft-clamped to
    ``(-log_var_bound, log_var_bound)``. The mean is 0 (the iVAE code) unless
    ``learn_mean=True``. With ``cond_features=0`` the prior is the fixed standard one
    (mean 0, variance 1): a plain VAE.

    Parameters
    ----------
    cond_features : int
        Dimension of u (0: unconditional).
    n_latents : int
    hidden_sizes : sequence of int, default=(32,)
    activation : str, default="leaky_relu"
    learn_mean : bool, default=False
    dist : {"gaussian", "laplace"}, default="gaussian"
    log_var_bound : float, default=8.0

    Examples
    --------
    >>> import torch
    >>> prior = ConditionalPrior(2, 3)
    >>> mean, log_var = prior(torch.zeros(4, 2))
    >>> mean.shape, log_var.shape
    (torch.Size([4, 3]), torch.Size([4, 3]))
    """

    def __init__(
        self,
        cond_features: int,
        n_latents: int,
        hidden_sizes: Sequence[int] = (32,),
        activation: str = "leaky_relu",
        learn_mean: bool = False,
        dist: str = "gaussian",
        log_var_bound: float = 8.0,
    ):
        super().__init__()
        if dist not in _PRIORS:
            raise ValueError(f"dist must be one of {_PRIORS}; got {dist!r}.")
        self.cond_features, self.n_latents = int(cond_features), int(n_latents)
        self.learn_mean, self.dist = bool(learn_mean), dist
        self.log_var_bound = float(log_var_bound)
        n_out = (2 if self.learn_mean else 1) * self.n_latents
        self.net = (
            _net(self.cond_features, hidden_sizes, n_out, activation)
            if self.cond_features > 0
            else None
        )

    def forward(self, u: Tensor) -> tuple[Tensor, Tensor]:
        """``(mean, log_var)`` of shape (batch, n_latents) for u of shape (batch, c)."""
        if self.net is None:
            zeros = u.new_zeros(u.shape[0], self.n_latents)
            return zeros, zeros
        out = self.net(u)
        if self.learn_mean:
            mean, raw = out.chunk(2, dim=-1)
        else:
            mean, raw = torch.zeros_like(out), out
        return mean, soft_clamp(raw, self.log_var_bound)

    def log_prob(self, z: Tensor, mean: Tensor, log_var: Tensor) -> Tensor:
        """log p(z | u) summed over latents, given ``forward``'s parameters."""
        if self.dist == "laplace":
            return laplace_log_prob(z, mean, log_var)
        return gaussian_log_prob(z, mean, log_var)


class Conditioner(nn.Module):
    """Builds the auxiliary variable u from the target y and the task t.

    ``u = concat[(y - y_mean) / y_scale if use_target, task part]`` where the task
    part is a one-hot code (``task_mode="onehot"``), a learnable embedding row
    ``E_t`` (``task_mode="embedding"``, an ``nn.Embedding(n_tasks,
    embedding_dim)``) or absent (``None``). With neither part, u has 0 columns.

    Parameters
    ----------
    use_target : bool
    task_mode : {None, "onehot", "embedding"}
    n_tasks : int, default=1
    embedding_dim : int, default=0
    y_mean, y_scale : float, default=0.0 and 1.0
        Target standardisation (buffers).

    Examples
    --------
    >>> import torch
    >>> c = Conditioner(True, "onehot", n_tasks=3)
    >>> c(torch.tensor([0.5, 1.0]), torch.tensor([0, 2])).shape
    torch.Size([2, 4])
    """

    def __init__(
        self,
        use_target: bool,
        task_mode: str | None,
        n_tasks: int = 1,
        embedding_dim: int = 0,
        y_mean: float = 0.0,
        y_scale: float = 1.0,
    ):
        super().__init__()
        if task_mode not in (None, "onehot", "embedding"):
            raise ValueError(
                f"task_mode must be None, 'onehot' or 'embedding'; got {task_mode!r}."
            )
        self.use_target, self.task_mode = bool(use_target), task_mode
        self.n_tasks = int(n_tasks)
        self.register_buffer("y_mean", torch.tensor(float(y_mean)))
        self.register_buffer("y_scale", torch.tensor(float(y_scale)))
        self.embedding = (
            nn.Embedding(self.n_tasks, int(embedding_dim))
            if task_mode == "embedding"
            else None
        )
        task_dim = {None: 0, "onehot": self.n_tasks, "embedding": int(embedding_dim)}
        self.out_features = int(self.use_target) + task_dim[task_mode]

    def forward(self, y: Tensor, task: Tensor) -> Tensor:
        """u of shape (batch, out_features) for y (batch,) and task codes (batch,)."""
        parts = []
        if self.use_target:
            parts.append(((y - self.y_mean) / self.y_scale)[:, None])
        if self.task_mode == "onehot":
            parts.append(
                nn.functional.one_hot(task, self.n_tasks).to(self.y_mean.dtype)
            )
        elif self.task_mode == "embedding":
            parts.append(self.embedding(task))
        if not parts:
            return self.y_mean.new_zeros(task.shape[0], 0)
        return torch.cat(parts, -1)


class VAEBatch(NamedTuple):
    """A minibatch: raw inputs x (B, p), raw targets y (B,), task codes (B,) int64."""

    x: Tensor
    y: Tensor
    task: Tensor


class VAEOutput(NamedTuple):
    """Distribution parameters of one forward pass of :class:`ConditionalVAE`.

    All of shape (batch, n_latents) except ``x`` and ``x_mean`` (batch, n_features)
    and ``x_log_var`` (n_features,) or (batch, n_features). ``x`` is the
    standardised input the decoder reconstructs; ``z`` one reparameterised sample.
    """

    x: Tensor
    z: Tensor
    z_mean: Tensor
    z_log_var: Tensor
    x_mean: Tensor
    x_log_var: Tensor
    prior_mean: Tensor
    prior_log_var: Tensor


class ConditionalVAE(nn.Module):
    """Encoder, decoder, prior and conditioner, with x's standardisation built in.

    ``forward(x, y, task)`` standardises ``x`` (fixed buffers), builds u with the
    conditioner, encodes, draws one reparameterised sample z, decodes it and
    evaluates the prior parameters at u; it returns a :class:`VAEOutput`.

    Parameters
    ----------
    encoder : GaussianEncoder
    decoder : GaussianDecoder
    prior : ConditionalPrior
    conditioner : Conditioner
    x_mean, x_scale : Tensor of shape (n_features,)
        Input standardisation.
    condition_encoder : bool, default=True
        Feed u to the encoder (q(z | x, u), the iVAE encoder); otherwise q(z | x).
    """

    def __init__(
        self,
        encoder: GaussianEncoder,
        decoder: GaussianDecoder,
        prior: ConditionalPrior,
        conditioner: Conditioner,
        x_mean: Tensor,
        x_scale: Tensor,
        condition_encoder: bool = True,
    ):
        super().__init__()
        self.standardize = Standardize(x_mean, x_scale)
        self.encoder, self.decoder, self.prior = encoder, decoder, prior
        self.conditioner = conditioner
        self.condition_encoder = bool(condition_encoder)

    def encode(self, x: Tensor, y: Tensor, task: Tensor) -> tuple[Tensor, Tensor]:
        """q(z | x, u) parameters ``(mean, log_var)`` for raw x (batch, p)."""
        xs = self.standardize(x)
        u = self.conditioner(y, task) if self.condition_encoder else None
        return self.encoder(xs, u)

    def forward(self, x: Tensor, y: Tensor, task: Tensor) -> VAEOutput:
        """One stochastic pass; see :class:`VAEOutput`."""
        xs = self.standardize(x)
        u = self.conditioner(y, task)
        z_mean, z_log_var = self.encoder(xs, u if self.condition_encoder else None)
        z = reparameterize(z_mean, z_log_var)
        x_mean, x_log_var = self.decoder(z)
        p_mean, p_log_var = self.prior(u)
        return VAEOutput(xs, z, z_mean, z_log_var, x_mean, x_log_var, p_mean, p_log_var)


def neg_elbo_loss(
    module: ConditionalVAE, batch: VAEBatch, *, analytic_kl: bool = True
) -> tuple[Tensor, Tensor]:
    """Negative ELBO per sample, averaged over the batch, with one sample of z.

    ``-ELBO(x, u) = -E_q[log p(x | z)] + KL(q(z | x, u) || p(z | u))``, the first
    term estimated with one reparameterised sample. The KL is exact for a Gaussian
    prior when ``analytic_kl`` (lower variance), otherwise the one-sample estimate
    ``log q(z | x, u) - log p(z | u)`` (always for a Laplace prior). Units: nats per
    sample on the standardised inputs.

    Returns
    -------
    loss : Tensor, scalar
    n : int
        Batch size (its weight in epoch means).
    """
    out = module(batch.x, batch.y, batch.task)
    rec = gaussian_log_prob(out.x, out.x_mean, out.x_log_var)
    if analytic_kl and module.prior.dist == "gaussian":
        kl = kl_diag_gaussians(
            out.z_mean, out.z_log_var, out.prior_mean, out.prior_log_var
        )
    else:
        kl = gaussian_log_prob(
            out.z, out.z_mean, out.z_log_var
        ) - module.prior.log_prob(out.z, out.prior_mean, out.prior_log_var)
    return (kl - rec).mean(), batch.x.shape[0]


# =============================================================== estimator
def _scale(a: np.ndarray, mean) -> np.ndarray:
    """Population std, replaced by 1 where (numerically) zero."""
    sd = a.std(axis=0)
    return np.where(sd > 1e-12 * np.maximum(np.abs(mean), 1.0), sd, 1.0)


class ConditionalVAEEstimator(IdentrepEstimator):
    """Base class of the conditional-VAE estimators (iVAE, MT-iVAE, VAE, iCaRL).

    Not used directly. Subclasses set their hyperparameters in ``__init__`` (at
    least those listed under Parameters) and define the conditioning through
    :meth:`_uses_target` and :meth:`_task_mode`. The base class then provides:

    * ``fit(X, y=None, *, task_ids=None)``: long (``y``, ``task_ids``) or wide
      (``Y`` with NaN = unobserved; every observed (row, task) pair is one training
      pair (x, u)) data, checked by
      :func:`~identrep.utils.validation.check_multitask`. ``task_ids`` may be
      omitted when the task is not part of u (all samples pool into one task), and
      ``y`` when the target is not. ``X`` is standardised (pooled mean and
      population std) and ``y`` too, inside the module, so ``module_`` maps raw
      data. A random ``val_fraction`` of each task's samples is held out; training
      runs :func:`~identrep.training.fit_module` (Adam) with early stopping on the
      validation loss and restores the best epoch.
    * ``transform(X, y=None, *, task_ids=None)``: the encoder mean E[z | x, u].
      **The encoder needs the conditioning**: pass the same kind of ``y`` and
      ``task_ids`` as in fit (tasks seen in fit) unless the estimator was built with
      ``condition_encoder=False`` (then only ``X`` is used).

    Hooks for subclasses: :meth:`_build_module` (default :class:`ConditionalVAE`),
    :meth:`_make_loss` (default :func:`neg_elbo_loss`) and :meth:`_set_fitted`
    (extra fitted attributes). A module returned by ``_build_module`` must provide
    ``encode(x, y, task) -> (mean, log_var)``.

    Parameters
    ----------
    n_latents : int
    encoder : {"linear", "mlp"}
        Architecture of the encoder and (unless ``decoder`` is given) the decoder.
    decoder : {"linear", "mlp"} or None
    hidden_sizes : sequence of int or None
        Hidden widths of the MLPs (encoder, decoder, prior network); default one
        hidden layer of width ``max(2 * n_features, 32)``.
    activation : str
    prior : {"gaussian", "laplace"}
    learn_prior_mean : bool
    decoder_var : float or "learned"
    condition_encoder : bool
    lr, batch_size, max_epochs, patience, val_fraction, grad_clip, device, dtype,
    random_state, verbose
        As in :class:`~identrep.MTRN`.
    lr_schedule : {None, "cosine"}, optional
        Read with ``getattr`` (absent means None), passed to ``fit_module``.
    """

    # ---------------------------------------------------------- conditioning
    def _uses_target(self) -> bool:
        """Whether u contains the (standardised) target y."""
        raise NotImplementedError

    def _task_mode(self) -> str | None:
        """None, "onehot" or "embedding": how the task enters u."""
        raise NotImplementedError

    def _embedding_dim(self) -> int:
        return 0

    def _desc(self) -> str:
        return type(self).__name__

    # -------------------------------------------------------------- params
    @staticmethod
    def _pos_int(name, value) -> None:
        if (
            not isinstance(value, (int, np.integer))
            or isinstance(value, bool)
            or value < 1
        ):
            raise ValueError(f"{name} must be a positive integer; got {value!r}.")

    @staticmethod
    def _pos_float(name, value) -> None:
        if not (
            isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool)
            and np.isfinite(value)
            and value > 0
        ):
            raise ValueError(f"{name} must be a positive number; got {value!r}.")

    def _validate_params(self) -> None:
        """Check the shared hyperparameters; subclasses extend it."""
        self._pos_int("n_latents", self.n_latents)
        self._pos_int("batch_size", self.batch_size)
        self._pos_int("max_epochs", self.max_epochs)
        if self.patience is not None:
            self._pos_int("patience", self.patience)
        if self.encoder not in _ARCHS:
            raise ValueError(f"encoder must be one of {_ARCHS}; got {self.encoder!r}.")
        if self.decoder is not None and self.decoder not in _ARCHS:
            raise ValueError(
                f"decoder must be one of {_ARCHS} or None; got {self.decoder!r}."
            )
        if self.hidden_sizes is not None:
            if isinstance(self.hidden_sizes, (str, bytes)) or not hasattr(
                self.hidden_sizes, "__iter__"
            ):
                raise TypeError(
                    "hidden_sizes must be a sequence of positive ints or None; got "
                    f"{type(self.hidden_sizes).__name__}."
                )
            for h in self.hidden_sizes:
                self._pos_int("each of hidden_sizes", h)
        if self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}; got "
                f"{self.activation!r}."
            )
        if self.prior not in _PRIORS:
            raise ValueError(f"prior must be one of {_PRIORS}; got {self.prior!r}.")
        if not isinstance(self.decoder_var, str):
            self._pos_float("decoder_var (a number or 'learned')", self.decoder_var)
        elif self.decoder_var != "learned":
            raise ValueError(
                f"decoder_var must be a positive number or 'learned'; got "
                f"{self.decoder_var!r}."
            )
        self._pos_float("lr", self.lr)
        schedule = getattr(self, "lr_schedule", None)
        if schedule not in (None, "cosine"):
            raise ValueError(f"lr_schedule must be None or 'cosine'; got {schedule!r}.")
        if not (
            isinstance(self.val_fraction, (int, float, np.floating))
            and 0 <= self.val_fraction < 1
        ):
            raise ValueError(
                f"val_fraction must lie in [0, 1); got {self.val_fraction!r}."
            )
        if self.grad_clip is not None:
            self._pos_float("grad_clip (or None)", self.grad_clip)

    # ---------------------------------------------------------------- data
    def _check_fit_data(self, X, y, task_ids) -> MultiTaskArrays:
        """Validated data; y or task_ids may be absent when u does not need them."""
        needs_task = self._task_mode() is not None
        if y is None:
            if self._uses_target():
                raise DataError(
                    f"{type(self).__name__} conditions on the target: pass y of "
                    "shape (n_samples,) (with task_ids) or a wide Y of shape "
                    "(n_samples, n_tasks)."
                )
            Xa = check_array(X, "X")
            n = Xa.shape[0]
            if task_ids is None:
                if needs_task:
                    raise DataError(
                        f"{type(self).__name__} conditions on the task: pass "
                        "task_ids of shape (n_samples,)."
                    )
                codes, labels = np.zeros(n, dtype=np.int64), np.array([0])
            else:
                codes, labels = encode_task_ids(task_ids, n)
            return MultiTaskArrays(
                Xa, np.zeros(n), codes, np.arange(n, dtype=np.int64), labels, "long"
            )
        if task_ids is None and not needs_task and np.ndim(y) == 1:
            task_ids = np.zeros(np.shape(y)[0], dtype=np.int64)
        return check_multitask(X, y, task_ids, min_samples=1, check_constant=False)

    def _check_transform_data(self, X, y, task_ids):
        """(X, y, task codes) for transform, checked against the fit."""
        X = self._check_X(X)
        n = X.shape[0]
        cond = self.condition_encoder
        if cond and self._uses_target():
            if y is None:
                raise DataError(
                    f"{type(self).__name__}.transform needs y: the encoder q(z | x, "
                    "u) is conditioned on the target. Pass y of shape (n_samples,) "
                    "(or fit with condition_encoder=False to encode from X alone)."
                )
            ya = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
            if ya.ndim == 2 and ya.shape[1] == 1:
                ya = ya[:, 0]
            if ya.ndim == 2:
                raise DataError(
                    "transform takes the long layout: y of shape (n_samples,) with "
                    f"task_ids; got y of shape {ya.shape}. Convert wide data "
                    "with identrep.utils.validation.wide_to_long."
                )
            yv = check_array(ya, "y", ndim=1)
            if yv.shape != (n,):
                raise DataError(f"y must have shape ({n},) to match X; got {yv.shape}.")
        else:
            yv = np.zeros(n)
        if cond and self._task_mode() is not None:
            if task_ids is None:
                raise DataError(
                    f"{type(self).__name__}.transform needs task_ids: the encoder "
                    "q(z | x, u) is conditioned on the task. Pass task_ids of shape "
                    "(n_samples,) with tasks seen in fit (or fit with "
                    "condition_encoder=False)."
                )
            codes = check_task_ids(task_ids, n, self.tasks_)
        else:
            codes = np.zeros(n, dtype=np.int64)
        return X, yv, codes

    # --------------------------------------------------------------- hooks
    def _hidden(self, n_features: int) -> tuple[int, ...]:
        if self.hidden_sizes is not None:
            return tuple(int(h) for h in self.hidden_sizes)
        return (max(2 * n_features, 32),)

    def _build_module(
        self,
        n_features: int,
        n_tasks: int,
        x_mean: np.ndarray,
        x_scale: np.ndarray,
        y_mean: float,
        y_scale: float,
    ) -> nn.Module:
        """Build the (untrained) module; called inside ``seeded`` on CPU, float64
        buffers (``fit`` moves it to the device and dtype afterwards)."""
        d = int(self.n_latents)
        hidden = self._hidden(n_features)
        enc_h = hidden if self.encoder == "mlp" else ()
        dec_arch = self.decoder if self.decoder is not None else self.encoder
        dec_h = hidden if dec_arch == "mlp" else ()
        cond = Conditioner(
            self._uses_target(),
            self._task_mode(),
            n_tasks=n_tasks,
            embedding_dim=self._embedding_dim(),
            y_mean=y_mean,
            y_scale=y_scale,
        )
        c = cond.out_features
        learned = isinstance(self.decoder_var, str)
        return ConditionalVAE(
            GaussianEncoder(
                n_features,
                c if self.condition_encoder else 0,
                d,
                enc_h,
                self.activation,
            ),
            GaussianDecoder(
                d,
                n_features,
                dec_h,
                self.activation,
                obs_var=0.1 if learned else float(self.decoder_var),
                learn_var=learned,
            ),
            ConditionalPrior(
                c,
                d,
                hidden,
                self.activation,
                learn_mean=bool(self.learn_prior_mean),
                dist=self.prior,
            ),
            cond,
            torch.as_tensor(x_mean),
            torch.as_tensor(x_scale),
            condition_encoder=self.condition_encoder,
        )

    def _make_loss(
        self, n_train: int
    ) -> tuple[Callable[[nn.Module, Any], Any], Callable[[nn.Module], None] | None]:
        """``(loss_fn, post_epoch)`` for :func:`fit_module`; default the plain
        negative ELBO and no post-epoch hook. ``n_train``: training-set size."""
        return neg_elbo_loss, None

    def _set_fitted(self, data: MultiTaskArrays) -> None:
        """Set subclass-specific fitted attributes (after training)."""

    # ----------------------------------------------------------------- fit
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ):
        """Train by maximising the objective with Adam and early stopping.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks), optional
            Targets in the long layout (with ``task_ids``) or the wide layout (NaN =
            unobserved). Optional when u does not contain the target.
        task_ids : array-like of shape (n_samples,), optional
            Task label of every sample (long layout); optional when u does not
            contain the task.

        Returns
        -------
        self

        Raises
        ------
        DataError
            Non-finite inputs, shape mismatches, or missing ``y``/``task_ids`` that
            the conditioning needs.
        ValueError
            A bad hyperparameter.
        """
        t_start = time.perf_counter()
        self._validate_params()
        data = self._check_fit_data(X, y, task_ids)
        p, T = data.X.shape[1], data.n_tasks
        dev, dt = resolve_device(self.device), resolve_dtype(self.dtype)
        rng = check_random_state(self.random_state)
        init_seed, batch_seed, train_seed = (torch_seed_from(rng) for _ in range(3))

        # one row per observation (wide data repeat a row once per observed task)
        Xo = data.X if data.layout == "long" else data.X[data.rows]
        x_mean = data.X.mean(axis=0)
        x_scale = _scale(data.X, x_mean)
        y_mean = float(data.y.mean()) if data.n_obs else 0.0
        y_scale = float(_scale(data.y[:, None], np.array([y_mean]))[0])

        train_idx, val_idx = split_within_tasks(data.task_ids, self.val_fraction, rng)
        with seeded(init_seed):
            net = self._build_module(p, T, x_mean, x_scale, y_mean, y_scale)
        net = net.to(device=dev, dtype=dt)

        Xt = torch.tensor(Xo, dtype=dt, device=dev)
        yt = torch.tensor(data.y, dtype=dt, device=dev)
        tt = torch.tensor(data.task_ids, dtype=torch.int64, device=dev)

        def collate(obs):
            return lambda i: VAEBatch(Xt[obs[i]], yt[obs[i]], tt[obs[i]])

        bs = int(self.batch_size)
        tr = torch.as_tensor(train_idx, device=dev)
        train_b = IndexBatches(
            len(train_idx), bs, collate=collate(tr), seed=batch_seed, device=dev
        )
        val_b = None
        if val_idx.size:
            va = torch.as_tensor(val_idx, device=dev)
            val_b = IndexBatches(
                len(val_idx), bs, collate=collate(va), shuffle=False, device=dev
            )
        loss_fn, post_epoch = self._make_loss(len(train_idx))
        with seeded(train_seed):
            self.history_ = fit_module(
                net,
                loss_fn,
                train_b,
                lr=float(self.lr),
                max_epochs=int(self.max_epochs),
                val_batches=val_b,
                patience=self.patience,
                grad_clip=self.grad_clip,
                lr_schedule=getattr(self, "lr_schedule", None),
                post_epoch=post_epoch,
                progress=bool(self.verbose),
                desc=self._desc(),
            )
        self.module_ = net.eval()
        self.device_, self.dtype_ = dev, dt
        self.tasks_ = data.tasks
        self.n_tasks_ = T
        self.n_features_in_ = p
        self._set_fitted(data)
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    # ----------------------------------------------------------- transform
    def _encode(self, X, y, codes, chunk_size: int = 8192):
        means, log_vars = [], []
        with torch.no_grad():
            for s in range(0, X.shape[0], chunk_size):
                sl = slice(s, s + chunk_size)
                m, lv = self.module_.encode(
                    torch.tensor(X[sl], dtype=self.dtype_, device=self.device_),
                    torch.tensor(y[sl], dtype=self.dtype_, device=self.device_),
                    torch.as_tensor(codes[sl], device=self.device_),
                )
                means.append(m.detach().cpu().double().numpy())
                log_vars.append(lv.detach().cpu().double().numpy())
        d = int(self.n_latents)
        if not means:
            return np.zeros((0, d)), np.zeros((0, d))
        return np.concatenate(means), np.concatenate(log_vars)

    def transform(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> np.ndarray:
        """The encoder mean E_q[z | x, u] (the representation to score).

        The encoder is conditioned on u, so pass the target ``y`` and/or
        ``task_ids`` that the conditioning uses (as in fit, long layout), unless
        the model was fitted with ``condition_encoder=False``. Inputs not used by
        the conditioning are ignored.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), optional
        task_ids : array-like of shape (n_samples,), optional
            Tasks seen in fit.

        Returns
        -------
        ndarray of shape (n_samples, n_latents), float64

        Raises
        ------
        NotFittedError
            Before fit.
        DataError
            A feature-count mismatch, non-finite values, a missing ``y`` or
            ``task_ids``, or a task id unseen during fit (named in the message).
        """
        X, yv, codes = self._check_transform_data(X, y, task_ids)
        return self._encode(X, yv, codes)[0]

    def encode(
        self,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        task_ids: ArrayLike | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of q(z | x, u), each (n_samples, n_latents).

        Same inputs and errors as :meth:`transform`.
        """
        X, yv, codes = self._check_transform_data(X, y, task_ids)
        mean, log_var = self._encode(X, yv, codes)
        return mean, np.exp(log_var)
