"""The sparse multi-task process of Lachapelle et al. (2023), numpy only.

Latents z ~ N(0, Sigma) with unit variances and all pairwise correlations ``rho``
(fresh samples for every task); every task t draws its support S_t with each latent
in it independently with probability ``support_prob`` (an empty draw is redrawn), and
Gaussian weights w_tj ~ N(0, 1) on S_t (0 elsewhere). Regression targets are
``y = Z_t w_t + eps_t`` with the noise rescaled per task so that
``||eps_t|| = noise_ratio * ||Z_t w_t||`` (the authors' signal-to-noise control).
Observations are the latents pushed through a random invertible map: an injective
leaky-ReLU MLP (``mixing="mlp"``) or a full-column-rank matrix (``"linear"``).

Supports are drawn independently for every task; the authors' sampler
("binomial_gauss") shared ~4 random coordinates across all tasks of a batch, so its
supports were denser than Bernoulli(p) (reference/baselines.md, section 4.5).
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from identrep._typing import Seed
from identrep.datasets.bundle import TaskData
from identrep.exceptions import InvalidParameterError
from identrep.utils._param_validation import Interval, StrOptions, validate_params
from identrep.utils.seeding import check_random_state

__all__ = ["SparseTaskSampler", "TaskDraw", "make_sparse_tasks"]

_LEAK = 0.2


def _random_injective_mlp(d: int, p: int, n_layers: int, rng) -> list[np.ndarray]:
    """Matrices of an injective leaky-ReLU MLP R^d -> R^p: a (p, d) map with
    orthonormal columns, then (p, p) orthogonal maps with singular values in
    [0.5, 1.5] (well conditioned, so invertible with a stable inverse)."""
    Q, _ = np.linalg.qr(rng.standard_normal((p, d)))
    mats = [Q * np.sqrt(p / d)]
    for _ in range(n_layers - 1):
        U, _ = np.linalg.qr(rng.standard_normal((p, p)))
        V, _ = np.linalg.qr(rng.standard_normal((p, p)))
        mats.append(U @ np.diag(rng.uniform(0.5, 1.5, p)) @ V.T)
    return mats


def _apply_mlp(Z: np.ndarray, mats: list[np.ndarray]) -> np.ndarray:
    """``x = A_L lrelu(... lrelu(A_1 z))``: leaky ReLU (slope 0.2) between layers."""
    H = Z @ mats[0].T
    for A in mats[1:]:
        H = np.where(H > 0, H, _LEAK * H) @ A.T
    return H


@validate_params(
    {
        "n_tasks": [Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 2, None, closed="left")],
        "n_latents": [Interval(Integral, 1, None, closed="left")],
        "correlation": [Interval(Real, 0, 1, closed="left")],
        "support_prob": [Interval(Real, 0, 1, closed="right")],
        "noise_ratio": [Interval(Real, 0, None, closed="left")],
        "n_observed": [Interval(Integral, 1, None, closed="left"), None],
        "mixing": [StrOptions({"mlp", "linear"})],
        "n_mixing_layers": [Interval(Integral, 1, None, closed="left")],
        "n_classes": [Interval(Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
    }
)
def make_sparse_tasks(
    n_tasks: int = 1000,
    n_samples: int = 50,
    n_latents: int = 6,
    *,
    correlation: float = 0.9,
    support_prob: float = 0.5,
    noise_ratio: float = 0.1,
    n_observed: int | None = None,
    mixing: str = "mlp",
    n_mixing_layers: int = 3,
    n_classes: int | None = None,
    random_state: Seed = None,
) -> TaskData:
    """Sparse regression (or classification) tasks on correlated latents.

    Parameters
    ----------
    n_tasks : int, default=1000
        Number of tasks T.
    n_samples : int, default=50
        Samples per task.
    n_latents : int, default=6
        Latent dimension d.
    correlation : float in [0, 1), default=0.9
        Pairwise correlation rho of the Gaussian latents.
    support_prob : float in (0, 1], default=0.5
        Probability that a latent is in a task's support (independently per task
        and latent; an empty support is redrawn).
    noise_ratio : float, default=0.1
        ``||eps_t|| / ||Z_t w_t||`` per task (regression only).
    n_observed : int, optional
        Observed dimension p >= d (default ``max(16, n_latents)``).
    mixing : {"mlp", "linear"}, default="mlp"
        A random injective leaky-ReLU (slope 0.2) MLP with ``n_mixing_layers``
        linear maps, or one random matrix with orthonormal columns (scaled).
    n_mixing_layers : int, default=3
        Linear maps of the MLP mixing (leaky ReLU between them).
    n_classes : int, optional
        If given, classification targets: ``y ~ Categorical(softmax(W_t^T z))`` with
        W_t of shape (d, n_classes) whose rows are N(0, I) on the support and 0
        elsewhere (the group-sparse setting); else regression.
    random_state : int, Generator or None

    Returns
    -------
    TaskData
        ``X`` (T n, p), ``y`` (T n,) (float, or int labels), ``task_ids``, ``Z``,
        ``causal`` (T, d) 0/1 supports, ``weights`` (T, d) regression weights (for
        classification the row norms of W_t; the full (T, d, K) array is in
        ``params["class_weights"]``), ``gammas`` zeros, ``noise_std`` (T,) the
        per-task noise standard deviation (0 for classification), ``mixing`` the
        (p, d) matrix for ``"linear"`` else None (the MLP matrices are in
        ``params["decoder"]``).

    Examples
    --------
    >>> from identrep.datasets import make_sparse_tasks
    >>> data = make_sparse_tasks(n_tasks=20, n_samples=10, random_state=0)
    >>> data.X.shape, data.causal.shape, bool(data.causal.sum(1).min() >= 1)
    ((200, 16), (20, 6), True)
    """
    T, n, d = int(n_tasks), int(n_samples), int(n_latents)
    p = max(16, d) if n_observed is None else int(n_observed)
    if p < d:
        raise InvalidParameterError(
            f"n_observed must be >= n_latents ({d}) for an invertible mixing; got {p}."
        )
    rng = check_random_state(random_state)
    if mixing == "mlp":
        mats = _random_injective_mlp(d, p, int(n_mixing_layers), rng)
    else:
        mats = _random_injective_mlp(d, p, 1, rng)

    rho = float(correlation)
    cov = (1 - rho) * np.eye(d) + rho * np.ones((d, d))
    L = np.linalg.cholesky(cov)
    causal = _supports(rng, T, d, support_prob)
    Z = rng.standard_normal((T, n, d)) @ L.T

    params = dict(
        n_tasks=T,
        n_samples=n,
        n_latents=d,
        correlation=rho,
        support_prob=float(support_prob),
        noise_ratio=float(noise_ratio),
        n_observed=p,
        mixing=mixing,
        n_mixing_layers=int(n_mixing_layers),
        n_classes=n_classes,
    )
    if n_classes is None:
        weights = rng.standard_normal((T, d)) * causal
        signal = np.einsum("tnd,td->tn", Z, weights)
        eps = rng.standard_normal((T, n))
        scale = noise_ratio * np.linalg.norm(signal, axis=1)
        scale = scale / np.linalg.norm(eps, axis=1)
        y = (signal + scale[:, None] * eps).reshape(T * n)
        noise_std = scale
    else:
        K = int(n_classes)
        Wc = rng.standard_normal((T, d, K)) * causal[:, :, None]
        logits = np.einsum("tnd,tdk->tnk", Z, Wc)
        P = np.exp(logits - logits.max(-1, keepdims=True))
        P /= P.sum(-1, keepdims=True)
        u = rng.random((T, n, 1))
        y = np.minimum((P.cumsum(-1) < u).sum(-1), K - 1).reshape(T * n)
        weights = np.linalg.norm(Wc, axis=-1)
        noise_std = np.zeros(T)
        params["class_weights"] = Wc
    Zf = Z.reshape(T * n, d)
    X = _apply_mlp(Zf, mats)
    params["decoder"] = mats
    return TaskData(
        X=X,
        y=y,
        task_ids=np.repeat(np.arange(T), n),
        Z=Zf,
        causal=causal.astype(float),
        gammas=np.zeros((T, d)),
        weights=weights,
        mixing=mats[0] if mixing == "linear" else None,
        noise_std=noise_std,
        params=params,
    )


class TaskDraw(NamedTuple):
    """Fresh tasks drawn by :meth:`SparseTaskSampler.sample`.

    ``rows`` (n_tasks, n_samples) indices into the sampler's pool (the rows of the
    ``X`` it was built for), ``y`` (n_tasks, n_samples) targets, ``causal``
    (n_tasks, d) bool supports, ``weights`` (n_tasks, d) regression weights.
    """

    rows: np.ndarray
    y: np.ndarray
    causal: np.ndarray
    weights: np.ndarray


def _supports(rng, n_tasks: int, d: int, prob: float) -> np.ndarray:
    """Bernoulli(prob) supports, empty ones redrawn (as ``make_sparse_tasks``)."""
    causal = rng.random((n_tasks, d)) < prob
    while not causal.any(1).all():
        empty = ~causal.any(1)
        causal[empty] = rng.random((int(empty.sum()), d)) < prob
    return causal


class SparseTaskSampler:
    """New sparse regression tasks on a fixed pool of latents, on demand.

    The authors of the bilevel learner draw new tasks at every outer step; this
    sampler does the same on the latents ``Z`` of a finite pool of inputs (e.g.
    ``data.Z`` of :func:`make_sparse_tasks`, whose rows are those of ``data.X``):
    every task picks ``n_samples`` distinct pool rows uniformly at random, a
    support with each latent in it with probability ``support_prob`` (an empty
    draw is redrawn), N(0, 1) weights on it, and targets ``y = Z w + eps`` with the
    noise rescaled so that ``||eps|| = noise_ratio * ||Z w||``, as in
    :func:`make_sparse_tasks`. Tasks are independent of each other, also within
    one call. Pass it to ``BilevelSparseMTL.fit(..., task_sampler=...)``.

    Parameters
    ----------
    Z : array-like of shape (n_pool, n_latents)
        Latents of the pool rows.
    n_samples : int, default=50
        Samples per task (at most ``n_pool``).
    support_prob : float in (0, 1], default=0.5
    noise_ratio : float, default=0.1

    Examples
    --------
    >>> import numpy as np
    >>> from identrep.datasets import SparseTaskSampler, make_sparse_tasks
    >>> data = make_sparse_tasks(n_tasks=20, n_samples=10, random_state=0)
    >>> sampler = SparseTaskSampler.from_data(data)
    >>> draw = sampler.sample(4, np.random.default_rng(0))
    >>> draw.rows.shape, draw.y.shape, draw.causal.shape
    ((4, 10), (4, 10), (4, 6))
    """

    def __init__(self, Z, *, n_samples=50, support_prob=0.5, noise_ratio=0.1):
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 2 or not np.isfinite(Z).all():
            raise InvalidParameterError(
                f"Z must be a finite 2-D array (n_pool, n_latents); got shape "
                f"{Z.shape}{'' if np.isfinite(Z).all() else ' with non-finite values'}."
            )
        checks = {
            "n_samples": (n_samples, Interval(Integral, 2, Z.shape[0], closed="both")),
            "support_prob": (support_prob, Interval(Real, 0, 1, closed="right")),
            "noise_ratio": (noise_ratio, Interval(Real, 0, None, closed="left")),
        }
        for name, (value, constraint) in checks.items():
            if not constraint.is_satisfied_by(value):
                raise InvalidParameterError(
                    f"SparseTaskSampler: {name} must be {constraint} (the pool has "
                    f"{Z.shape[0]} rows); got {value!r}."
                )
        self.Z = Z
        self.n_samples = int(n_samples)
        self.support_prob = float(support_prob)
        self.noise_ratio = float(noise_ratio)

    @classmethod
    def from_data(cls, data: TaskData, **overrides) -> SparseTaskSampler:
        """The sampler of ``data``'s process (from :func:`make_sparse_tasks`) on
        its latents: same samples per task, support probability and noise ratio
        unless ``overrides`` change them."""
        params = data.params
        if params.get("n_classes") is not None:
            raise InvalidParameterError(
                "SparseTaskSampler draws regression tasks; data has "
                f"n_classes={params['n_classes']}."
            )
        kw = dict(
            n_samples=params["n_samples"],
            support_prob=params["support_prob"],
            noise_ratio=params["noise_ratio"],
        )
        return cls(data.Z, **{**kw, **overrides})

    @property
    def n_pool(self) -> int:
        """Number of pool rows (the rows of the matching ``X``)."""
        return self.Z.shape[0]

    def sample(self, n_tasks: int, rng: np.random.Generator) -> TaskDraw:
        """Draw ``n_tasks`` new tasks with the generator ``rng``."""
        T, n, d = int(n_tasks), self.n_samples, self.Z.shape[1]
        # distinct rows per task: the first n of a random key order would cost
        # O(n_pool) per task; redraw the rare tasks that repeat a row instead
        rows = rng.integers(0, self.n_pool, (T, n))
        dup = _has_duplicates(rows)
        while dup.any():
            rows[dup] = rng.integers(0, self.n_pool, (int(dup.sum()), n))
            dup = _has_duplicates(rows)
        causal = _supports(rng, T, d, self.support_prob)
        weights = rng.standard_normal((T, d)) * causal
        signal = np.einsum("tnd,td->tn", self.Z[rows], weights)
        eps = rng.standard_normal((T, n))
        scale = self.noise_ratio * np.linalg.norm(signal, axis=1)
        y = signal + (scale / np.linalg.norm(eps, axis=1))[:, None] * eps
        return TaskDraw(rows, y, causal, weights)


def _has_duplicates(rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``, whether it repeats a value."""
    s = np.sort(rows, axis=1)
    return (s[:, 1:] == s[:, :-1]).any(1)
