"""The ``nn.Module``s of the VAE family: encoder, decoder, factorised prior,
conditioner and the (conditional) VAE that holds them.

Every ``forward`` returns distribution parameters, never a sample or a loss: the
stochastic pass (one reparameterised z) and the ELBO terms are pure functions in
:mod:`identrep.models.vae._elbo`. Every density is parameterised by its
**log-variance** (also the Laplace one), so encoder, prior and decoder outputs plug
into any log-density there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from identrep.models.nn.mlp import MLP, Standardize

__all__ = [
    "ConditionalPrior",
    "ConditionalVAE",
    "Conditioner",
    "GaussianDecoder",
    "GaussianEncoder",
    "TaskPrior",
    "Whiten",
    "soft_clamp",
]

PRIOR_FAMILIES = ("gaussian", "laplace")
#: Observation models of :class:`ConditionalVAE` (as the Sparse VAE's and VSC's).
LIKELIHOODS = ("gaussian", "bernoulli", "categorical")


def soft_clamp(x: Tensor, bound: float) -> Tensor:
    """``bound * tanh(x / bound)``: a smooth clamp to (-bound, bound).

    Used on log-variances, which otherwise can blow up or underflow (baselines.md
    1.6); unlike a hard clamp it keeps a gradient everywhere.
    """
    return bound * torch.tanh(x / bound)


def _net(in_features: int, hidden: Sequence[int], out: int, activation: str) -> MLP:
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
    Laplace with the same mean and variance (its log-density is
    :func:`~identrep.models.vae._elbo.prior_log_prob`). The log-variance is
    soft-clamped to ``(-log_var_bound, log_var_bound)``. The mean is 0 (the iVAE
    code) unless ``learn_mean=True``. With ``cond_features=0`` the prior is the
    fixed standard one (mean 0, variance 1): a plain VAE.

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
        if dist not in PRIOR_FAMILIES:
            raise ValueError(f"dist must be one of {PRIOR_FAMILIES}; got {dist!r}.")
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


class TaskPrior(nn.Module):
    """Factorised prior with free per-task parameters (Chen et al., 2024, App. C).

    ``p(z_j | y, t) = N(a_tj y + b_tj, exp(s_tj))`` for task t and standardised
    target y (``use_target=True``), or ``N(b_tj, exp(s_tj))`` without the target:
    3 d (or 2 d) free numbers per task, learned with the rest of the model, in
    place of a network of (y, task embedding). ``dist="laplace"`` gives a Laplace
    with the same mean and variance. The log-variance is soft-clamped to
    ``(-log_var_bound, log_var_bound)``. Every parameter starts at 0 (the
    standard prior N(0, 1) in every task), so building it draws no random numbers.

    ``forward(u)`` reads u as built by a :class:`Conditioner` with
    ``task_mode="index"``: the standardised target in column 0 (when
    ``use_target``) and the task code in the last column.

    Parameters
    ----------
    n_tasks : int
    n_latents : int
    use_target : bool, default=True
    dist : {"gaussian", "laplace"}, default="gaussian"
    log_var_bound : float, default=8.0

    Attributes
    ----------
    slope, offset, log_var : Parameter of shape (n_tasks, n_latents)
        a, b and s above (``slope`` is zero and unused without the target).

    Examples
    --------
    >>> import torch
    >>> prior = TaskPrior(3, 2)
    >>> mean, log_var = prior(torch.tensor([[0.5, 0.0], [1.0, 2.0]]))
    >>> mean.shape, log_var.shape
    (torch.Size([2, 2]), torch.Size([2, 2]))
    """

    def __init__(
        self,
        n_tasks: int,
        n_latents: int,
        use_target: bool = True,
        dist: str = "gaussian",
        log_var_bound: float = 8.0,
    ):
        super().__init__()
        if dist not in PRIOR_FAMILIES:
            raise ValueError(f"dist must be one of {PRIOR_FAMILIES}; got {dist!r}.")
        self.n_tasks, self.n_latents = int(n_tasks), int(n_latents)
        self.use_target, self.dist = bool(use_target), dist
        self.log_var_bound = float(log_var_bound)
        shape = (self.n_tasks, self.n_latents)
        self.slope = nn.Parameter(torch.zeros(shape), requires_grad=self.use_target)
        self.offset = nn.Parameter(torch.zeros(shape))
        self.log_var = nn.Parameter(torch.zeros(shape))

    def forward(self, u: Tensor) -> tuple[Tensor, Tensor]:
        """``(mean, log_var)`` of shape (batch, n_latents) for u of shape (batch, c)
        (target in column 0, task code in the last column)."""
        task = u[:, -1].round().long()
        mean = self.offset[task]
        if self.use_target:
            mean = mean + self.slope[task] * u[:, :1]
        return mean, soft_clamp(self.log_var[task], self.log_var_bound)


class Conditioner(nn.Module):
    """Builds the auxiliary variable u from the target y and the task t.

    ``u = concat[(y - y_mean) / y_scale if use_target, task part]`` where the task
    part is a one-hot code (``task_mode="onehot"``), a learnable embedding row
    ``E_t`` (``task_mode="embedding"``, an ``nn.Embedding(n_tasks,
    embedding_dim)``), the task code itself as one float column
    (``task_mode="index"``, for priors with free per-task parameters such as
    :class:`TaskPrior`, which read it back as an index) or absent (``None``).
    With neither part, u has 0 columns.

    Parameters
    ----------
    use_target : bool
    task_mode : {None, "onehot", "embedding", "index"}
    n_tasks : int, default=1
    embedding_dim : int, default=0
    y_mean, y_scale : float, default=0.0 and 1.0
        Target standardisation (float64 buffers, see
        :class:`~identrep.models.nn.mlp.Standardize`).

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
        if task_mode not in (None, "onehot", "embedding", "index"):
            raise ValueError(
                "task_mode must be None, 'onehot', 'embedding' or 'index'; got "
                f"{task_mode!r}."
            )
        self.use_target, self.task_mode = bool(use_target), task_mode
        self.n_tasks = int(n_tasks)
        # float64 statistics: a target with a large offset keeps its signal
        self.target = Standardize(
            torch.tensor([float(y_mean)], dtype=torch.float64),
            torch.tensor([float(y_scale)], dtype=torch.float64),
        )
        self.embedding = (
            nn.Embedding(self.n_tasks, int(embedding_dim))
            if task_mode == "embedding"
            else None
        )
        task_dim = {
            None: 0,
            "onehot": self.n_tasks,
            "embedding": int(embedding_dim),
            "index": 1,
        }
        self.out_features = int(self.use_target) + task_dim[task_mode]

    def forward(self, y: Tensor, task: Tensor) -> Tensor:
        """u of shape (batch, out_features) for y (batch,) and task codes (batch,)."""
        parts = []
        if self.use_target:
            parts.append(self.target(y[:, None]))
        if self.task_mode == "onehot":
            parts.append(
                nn.functional.one_hot(task, self.n_tasks).to(self.target.out_dtype)
            )
        elif self.task_mode == "embedding":
            parts.append(self.embedding(task))
        elif self.task_mode == "index":
            parts.append(task[:, None].to(self.target.out_dtype))
        if not parts:
            return self.target.mean.new_zeros(task.shape[0], 0).to(
                self.target.out_dtype
            )
        return torch.cat(parts, -1)


class Whiten(Standardize):
    """Fixed linear map ``(x - mean) @ matrix.T`` in float64 (buffers, not trained).

    The whitening counterpart of :class:`~identrep.models.nn.mlp.Standardize`
    (same float64 evaluation, output dtype and clipping): ``matrix`` of shape
    (n_out, n_features) maps the centred input to ``n_out`` coordinates, e.g. the
    ZCA map ``C^(-1/2)`` of the input covariance C, or a whitened projection on
    its top principal components (n_out < n_features).

    Parameters
    ----------
    mean : Tensor of shape (n_features,)
    matrix : Tensor of shape (n_out, n_features)

    Examples
    --------
    >>> import torch
    >>> w = Whiten(torch.tensor([1.0, 0.0]), torch.tensor([[2.0, 0.0]]))
    >>> w(torch.tensor([[2.0, 5.0]], dtype=torch.float64))
    tensor([[2.]])
    """

    _STATS = ("mean", "matrix")

    def forward(self, x: Tensor) -> Tensor:
        """Whitened input of shape (batch, n_out), in :attr:`out_dtype`."""
        z = (x.to(torch.float64) - self.mean) @ self.matrix.T
        bound = torch.finfo(self._out.dtype).max ** 0.5
        return z.clamp(-bound, bound).to(self._out.dtype)


class ConditionalVAE(nn.Module):
    """Encoder, decoder, prior and conditioner, with x's standardisation built in.

    The module of every Gaussian VAE of the family: with a conditioner of 0
    columns and an unconditional :class:`ConditionalPrior` it is the plain VAE,
    otherwise an iVAE. ``forward(x, y, task)`` (= :meth:`encode`) returns the
    parameters of q(z | x, u) for raw ``x``; one full stochastic pass (sample,
    decode, prior) is :func:`identrep.models.vae._elbo.vae_pass`.

    Parameters
    ----------
    encoder : GaussianEncoder
    decoder : GaussianDecoder
    prior : nn.Module
        ``prior(u) -> (mean, log_var)`` with a ``dist`` attribute, e.g.
        :class:`ConditionalPrior`.
    conditioner : Conditioner
    x_mean, x_scale : Tensor of shape (n_features,)
        Input standardisation.
    condition_encoder : bool, default=True
        Feed u to the encoder (q(z | x, u), the iVAE encoder); otherwise q(z | x).
    prior_conditioner : Conditioner, optional
        Builds the prior's own u (e.g. ``task_mode="index"`` for a
        :class:`TaskPrior`); default: the prior sees the encoder's u.
    likelihood : {"gaussian", "bernoulli", "categorical"}, default="gaussian"
        What the decoder's first output is: the Gaussian mean of standardised x,
        per-feature Bernoulli logits of raw x, or logits over the features
        (multinomial counts, softmax across features); see :meth:`target`.
    """

    def __init__(
        self,
        encoder: GaussianEncoder,
        decoder: GaussianDecoder,
        prior: nn.Module,
        conditioner: Conditioner,
        x_mean: Tensor,
        x_scale: Tensor,
        condition_encoder: bool = True,
        prior_conditioner: Conditioner | None = None,
        likelihood: str = "gaussian",
    ):
        super().__init__()
        if likelihood not in LIKELIHOODS:
            raise ValueError(
                f"likelihood must be one of {LIKELIHOODS}; got {likelihood!r}."
            )
        self.likelihood = likelihood
        self.standardize = Standardize(x_mean, x_scale)
        self.encoder, self.decoder, self.prior = encoder, decoder, prior
        self.conditioner = conditioner
        self.condition_encoder = bool(condition_encoder)
        self.prior_conditioner = prior_conditioner

    def prior_input(self, u: Tensor, y: Tensor, task: Tensor) -> Tensor:
        """The prior's u: the shared ``u`` unless a prior conditioner is set."""
        if self.prior_conditioner is None:
            return u
        return self.prior_conditioner(y, task)

    def target(self, x: Tensor) -> Tensor:
        """What the decoder reconstructs: standardised (or whitened) x for the
        Gaussian likelihood, raw x (in the module's dtype) otherwise."""
        if self.likelihood == "gaussian":
            return self.standardize(x)
        return x.to(self.standardize.out_dtype)

    def encode(self, x: Tensor, y: Tensor, task: Tensor) -> tuple[Tensor, Tensor]:
        """q(z | x, u) parameters ``(mean, log_var)`` for raw x (batch, p)."""
        xs = self.standardize(x)
        u = self.conditioner(y, task) if self.condition_encoder else None
        return self.encoder(xs, u)

    def forward(self, x: Tensor, y: Tensor, task: Tensor) -> tuple[Tensor, Tensor]:
        """q(z | x, u) parameters ``(mean, log_var)``, as :meth:`encode`."""
        return self.encode(x, y, task)
