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

import numpy as np

from identrep._typing import Seed
from identrep.datasets.bundle import TaskData
from identrep.exceptions import InvalidParameterError
from identrep.utils._param_validation import Interval, StrOptions, validate_params
from identrep.utils.seeding import check_random_state

__all__ = ["make_sparse_tasks"]

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
    causal = rng.random((T, d)) < support_prob
    while not causal.any(1).all():
        empty = ~causal.any(1)
        causal[empty] = rng.random((int(empty.sum()), d)) < support_prob
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
