"""Synthetic multi-task processes of Chen et al. (2024), numpy only.

The latent process (both tables): every task t has ``n_causal`` causal latents drawn
without replacement; causal latents are N(0, 1); the target is
``y = w_t . z_causal + eps``, ``w ~ N(0, 1)``, ``eps ~ N(0, s_t^2)``, ``s_t ~ U(2, 3)``;
each spurious latent is an effect of the target, ``z_j = gamma_tj y + N(0, 0.1^2)``,
``gamma ~ U(-1, 1)``; finally every latent is standardised within its task
(population std). ``y`` is neither centred nor scaled.
"""

from __future__ import annotations

import numpy as np

from identrep._typing import Seed
from identrep.datasets.bundle import TaskData
from identrep.utils.seeding import check_random_state

__all__ = ["make_linear_tasks", "make_task_latents"]

_MIXINGS = ("identity", "orthogonal", "random")


def _check_counts(n_tasks, n_samples, n_latents, n_causal):
    for name, v, lo in (
        ("n_tasks", n_tasks, 1),
        ("n_samples", n_samples, 2),
        ("n_latents", n_latents, 1),
        ("n_causal", n_causal, 0),
    ):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}; got {v!r}.")
    if n_causal > n_latents:
        raise ValueError(
            f"n_causal must be <= n_latents ({n_latents}); got {n_causal}."
        )


def make_task_latents(
    n_tasks: int = 200,
    n_samples: int = 100,
    n_latents: int = 10,
    n_causal: int = 2,
    *,
    noise_range: tuple[float, float] = (2.0, 3.0),
    spurious_noise: float = 0.1,
    standardize: bool = True,
    random_state: Seed = None,
):
    """Latents and targets of the Table 1/2 process, before any mixing.

    Returns
    -------
    Z : ndarray of shape (n_tasks * n_samples, n_latents)
    y : ndarray of shape (n_tasks * n_samples,)
    task_ids : ndarray of shape (n_tasks * n_samples,)
    causal, gammas, weights : ndarray of shape (n_tasks, n_latents)
    noise_std : ndarray of shape (n_tasks,)
    """
    _check_counts(n_tasks, n_samples, n_latents, n_causal)
    lo, hi = noise_range
    if not 0 <= lo <= hi:
        raise ValueError(
            f"noise_range must satisfy 0 <= low <= high; got {noise_range}."
        )
    rng = check_random_state(random_state)
    T, n, d, k = int(n_tasks), int(n_samples), int(n_latents), int(n_causal)

    causal = np.zeros((T, d))
    for t in range(T):
        causal[t, rng.choice(d, size=k, replace=False)] = 1.0
    is_c = causal.astype(bool)
    gammas = np.where(is_c, 0.0, rng.uniform(-1.0, 1.0, size=(T, d)))
    weights = np.where(is_c, rng.standard_normal((T, d)), 0.0)
    noise_std = rng.uniform(lo, hi, size=T)

    zc = rng.standard_normal((T, n, d))
    y = np.einsum("tnd,td->tn", zc * is_c[:, None, :], weights)
    y += noise_std[:, None] * rng.standard_normal((T, n))
    zs = y[:, :, None] * gammas[:, None, :] + spurious_noise * rng.standard_normal(
        (T, n, d)
    )
    Z = np.where(is_c[:, None, :], zc, zs)
    if standardize:
        Z = (Z - Z.mean(axis=1, keepdims=True)) / Z.std(axis=1, keepdims=True)
    task_ids = np.repeat(np.arange(T), n)
    return (
        Z.reshape(T * n, d),
        y.reshape(T * n),
        task_ids,
        causal,
        gammas,
        weights,
        noise_std,
    )


def make_mixing(n_observed: int, n_latents: int, kind: str, rng: np.random.Generator):
    """Mixing matrix of shape (n_observed, n_latents): identity, orthogonal or random.

    "random" has i.i.d. N(0, 1) entries (not normalised, as in the paper);
    "orthogonal" is U V^T from the SVD of such a matrix (orthonormal columns);
    "identity" needs n_observed == n_latents.
    """
    if kind not in _MIXINGS:
        raise ValueError(f"mixing must be one of {_MIXINGS}; got {kind!r}.")
    G = rng.standard_normal((n_observed, n_latents))
    if kind == "identity":
        if n_observed != n_latents:
            raise ValueError(
                "mixing='identity' needs n_observed == n_latents; got "
                f"n_observed={n_observed}, n_latents={n_latents}."
            )
        return np.eye(n_latents)
    if kind == "orthogonal":
        U, _, Vt = np.linalg.svd(G, full_matrices=False)
        return U @ Vt
    return G


def make_linear_tasks(
    n_tasks: int = 200,
    n_samples: int = 100,
    n_latents: int = 10,
    n_causal: int = 2,
    *,
    n_observed: int | None = None,
    mixing: str | np.ndarray = "random",
    obs_noise: float = 0.01,
    noise_range: tuple[float, float] = (2.0, 3.0),
    spurious_noise: float = 0.1,
    random_state: Seed = None,
) -> TaskData:
    """The linear multi-task process of Chen et al. (2024), Table 1.

    Parameters
    ----------
    n_tasks : int
        Number of tasks T.
    n_samples : int
        Samples per task.
    n_latents : int
        Latent dimension d.
    n_causal : int
        Causal latents per task k (drawn without replacement for each task).
    n_observed : int, optional
        Observed dimension p (default ``n_latents``).
    mixing : {"random", "orthogonal", "identity"} or ndarray of shape (p, d)
        Mixing matrix: i.i.d. N(0, 1) entries, orthonormal columns, the identity, or
        a given matrix.
    obs_noise : float
        Standard deviation of the Gaussian observation noise (paper: 0.01).
    noise_range : (float, float)
        Range of the per-task target-noise standard deviation (paper: U(2, 3)).
    spurious_noise : float
        Standard deviation of the noise of spurious latents (paper: 0.1).
    random_state : int, Generator or None
        Seed; the only source of randomness.

    Returns
    -------
    TaskData
        Long-format bundle with ``X = Z A^T + noise``; ``.to_wide()`` gives (X, Y).

    Examples
    --------
    >>> from identrep.datasets import make_linear_tasks
    >>> data = make_linear_tasks(n_tasks=20, n_samples=50, n_latents=5, random_state=0)
    >>> data.X.shape, data.causal.sum(axis=1)[:3]
    ((1000, 5), array([2., 2., 2.]))
    """
    p = n_latents if n_observed is None else n_observed
    if not isinstance(p, (int, np.integer)) or p < 1:
        raise ValueError(f"n_observed must be a positive integer; got {n_observed!r}.")
    if obs_noise < 0:
        raise ValueError(f"obs_noise must be >= 0; got {obs_noise}.")
    rng = check_random_state(random_state)
    if isinstance(mixing, str):
        A = make_mixing(int(p), int(n_latents), mixing, rng)
    else:
        A = np.asarray(mixing, dtype=float)
        if A.shape != (int(p), int(n_latents)) or not np.all(np.isfinite(A)):
            raise ValueError(
                f"mixing given as an array must be finite with shape (n_observed, "
                f"n_latents) = ({p}, {n_latents}); got shape {A.shape}."
            )
    Z, y, t, causal, gammas, weights, noise_std = make_task_latents(
        n_tasks,
        n_samples,
        n_latents,
        n_causal,
        noise_range=noise_range,
        spurious_noise=spurious_noise,
        random_state=rng,
    )
    X = Z @ A.T + obs_noise * rng.standard_normal((Z.shape[0], int(p)))
    params = dict(
        n_tasks=n_tasks,
        n_samples=n_samples,
        n_latents=n_latents,
        n_causal=n_causal,
        n_observed=int(p),
        mixing=mixing,
        obs_noise=obs_noise,
        noise_range=tuple(noise_range),
        spurious_noise=spurious_noise,
    )
    return TaskData(
        X=X,
        y=y,
        task_ids=t,
        Z=Z,
        causal=causal,
        gammas=gammas,
        weights=weights,
        mixing=A,
        noise_std=noise_std,
        params=params,
    )
