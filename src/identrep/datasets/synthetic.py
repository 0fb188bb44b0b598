"""Synthetic multi-task processes of Chen et al. (2024), numpy only.

The latent process (both tables): every task t has ``n_causal`` causal latents drawn
without replacement; causal latents are N(0, 1); the target is
``y = w_t . z_causal + eps``, ``w ~ N(0, 1)``, ``eps ~ N(0, s_t^2)``, ``s_t ~ U(2, 3)``;
each spurious latent is an effect of the target, ``z_j = gamma_tj y + N(0, 0.1^2)``,
``gamma ~ U(-1, 1)``; finally every latent is standardised within its task
(population std). ``y`` is neither centred nor scaled.

Table 1 mixes the latents linearly (:func:`make_linear_tasks`); Table 2 pushes them
through a random one-hidden-layer ReLU network (:func:`make_nonlinear_tasks`).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from identrep._typing import Seed
from identrep.datasets.bundle import TaskData
from identrep.exceptions import InvalidParameterError
from identrep.utils._param_validation import (
    Interval,
    SequenceOf,
    StrOptions,
    validate_params,
)
from identrep.utils.seeding import check_random_state

__all__ = ["make_linear_tasks", "make_nonlinear_tasks", "make_task_latents"]

_MIXINGS = ("identity", "orthogonal", "random")


_COUNT = Interval(Integral, 1, None, closed="left")
_NONNEG = Interval(Real, 0, None, closed="left")
#: Declared constraints of the latent process's arguments (shared by the makers).
_LATENT_PROCESS = {
    "n_tasks": [_COUNT],
    "n_samples": [Interval(Integral, 2, None, closed="left")],
    "n_latents": [_COUNT],
    "n_causal": [Interval(Integral, 0, None, closed="left")],
    "noise_range": [SequenceOf(_NONNEG)],
    "spurious_noise": [_NONNEG],
    "random_state": ["random_state"],
}


def _check_latent_process(n_latents, n_causal, noise_range) -> tuple[float, float]:
    """The rules that involve several arguments; returns ``noise_range``."""
    if n_causal > n_latents:
        raise InvalidParameterError(
            f"n_causal must be <= n_latents ({n_latents}); got {n_causal}."
        )
    if len(noise_range) != 2 or not noise_range[0] <= noise_range[1]:
        raise InvalidParameterError(
            f"noise_range must be (low, high) with 0 <= low <= high; got {noise_range}."
        )
    return float(noise_range[0]), float(noise_range[1])


@validate_params({**_LATENT_PROCESS, "standardize": ["boolean"]})
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
    lo, hi = _check_latent_process(n_latents, n_causal, noise_range)
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


@validate_params(
    {
        **_LATENT_PROCESS,
        "n_observed": [_COUNT, None],
        "mixing": [StrOptions(_MIXINGS), np.ndarray, list, tuple],
        "obs_noise": [_NONNEG],
    }
)
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
    _check_latent_process(n_latents, n_causal, noise_range)
    p = n_latents if n_observed is None else n_observed
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


def _random_mlp_decoder(n_latents: int, n_observed: int, rng: np.random.Generator):
    """Weights of Linear(d -> p) -> ReLU -> Linear(p -> p), PyTorch-default-style.

    Every weight and bias of a layer with ``fan_in`` inputs is drawn i.i.d. from
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (the range of ``torch.nn.Linear``'s default
    initialisation), in the order W1, b1, W2, b2.
    """
    d, p = int(n_latents), int(n_observed)
    b_in, b_hid = 1.0 / np.sqrt(d), 1.0 / np.sqrt(p)
    W1 = rng.uniform(-b_in, b_in, size=(p, d))
    b1 = rng.uniform(-b_in, b_in, size=p)
    W2 = rng.uniform(-b_hid, b_hid, size=(p, p))
    b2 = rng.uniform(-b_hid, b_hid, size=p)
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}


def _apply_mlp_decoder(Z: np.ndarray, decoder: dict) -> np.ndarray:
    """``relu(Z W1^T + b1) W2^T + b2`` for Z of shape (n_samples, n_latents)."""
    H = np.maximum(Z @ decoder["W1"].T + decoder["b1"], 0.0)
    return H @ decoder["W2"].T + decoder["b2"]


@validate_params({**_LATENT_PROCESS, "n_observed": [_COUNT], "obs_noise": [_NONNEG]})
def make_nonlinear_tasks(
    n_tasks: int = 500,
    n_samples: int = 200,
    n_latents: int = 20,
    n_causal: int = 4,
    *,
    n_observed: int = 100,
    obs_noise: float = 0.0,
    noise_range: tuple[float, float] = (2.0, 3.0),
    spurious_noise: float = 0.1,
    random_state: Seed = None,
) -> TaskData:
    """The non-linear multi-task process of Chen et al. (2024), Table 2.

    Latents and targets follow the Table 1 process (:func:`make_task_latents`); the
    observations are the latents pushed through a random, fixed, one-hidden-layer
    ReLU network of width ``n_observed``::

        x = W2 relu(W1 z + b1) + b2 + obs_noise * N(0, I),

    with ``W1`` of shape (p, d), ``W2`` of shape (p, p), and every weight and bias of
    a layer with ``fan_in`` inputs drawn i.i.d. from U(+-1/sqrt(fan_in)) (PyTorch's
    default ``nn.Linear`` initialisation, as in the paper; drawn here from numpy).

    Parameters
    ----------
    n_tasks : int, default=500
        Number of tasks T.
    n_samples : int, default=200
        Samples per task.
    n_latents : int, default=20
        Latent dimension d.
    n_causal : int, default=4
        Causal latents per task k (drawn without replacement for each task).
    n_observed : int, default=100
        Observed dimension p (also the decoder's hidden width).
    obs_noise : float, default=0.0
        Standard deviation of Gaussian observation noise (the paper uses none).
    noise_range : (float, float), default=(2, 3)
        Range of the per-task target-noise standard deviation.
    spurious_noise : float, default=0.1
        Standard deviation of the noise of spurious latents.
    random_state : int, Generator or None
        Seed; the only source of randomness. The decoder is drawn first, then the
        latents, then the observation noise (only if ``obs_noise > 0``).

    Returns
    -------
    TaskData
        Long-format bundle with ``X`` of shape (n_tasks * n_samples, n_observed) and
        ``mixing=None``. The decoder is stored in ``params["decoder"]``, a dict of
        arrays ``W1`` (p, d), ``b1`` (p,), ``W2`` (p, p), ``b2`` (p,), so that
        ``X = relu(Z @ W1.T + b1) @ W2.T + b2`` (+ noise).

    Examples
    --------
    >>> from identrep.datasets import make_nonlinear_tasks
    >>> data = make_nonlinear_tasks(n_tasks=10, n_samples=20, n_latents=3,
    ...                             n_causal=1, n_observed=8, random_state=0)
    >>> data.X.shape, data.Z.shape, data.mixing is None
    ((200, 8), (200, 3), True)
    """
    _check_latent_process(n_latents, n_causal, noise_range)
    rng = check_random_state(random_state)
    decoder = _random_mlp_decoder(int(n_latents), int(n_observed), rng)
    Z, y, t, causal, gammas, weights, noise_std = make_task_latents(
        n_tasks,
        n_samples,
        n_latents,
        n_causal,
        noise_range=noise_range,
        spurious_noise=spurious_noise,
        random_state=rng,
    )
    X = _apply_mlp_decoder(Z, decoder)
    if obs_noise > 0:
        X = X + obs_noise * rng.standard_normal(X.shape)
    for arr in decoder.values():
        arr.setflags(write=False)
    params = dict(
        n_tasks=n_tasks,
        n_samples=n_samples,
        n_latents=n_latents,
        n_causal=n_causal,
        n_observed=int(n_observed),
        mixing="mlp",
        obs_noise=obs_noise,
        noise_range=tuple(noise_range),
        spurious_noise=spurious_noise,
        decoder=decoder,
    )
    return TaskData(
        X=X,
        y=y,
        task_ids=t,
        Z=Z,
        causal=causal,
        gammas=gammas,
        weights=weights,
        mixing=None,
        noise_std=noise_std,
        params=params,
    )
