"""The non-stationary (segment) process of iVAE (Khemakhem et al., 2020), numpy only.

Sources are independent Gaussians whose variances change across segments; the
observations mix them through random, well-conditioned layers. With more segments
than sources the variance modulation identifies the sources up to permutation and
scaling (iVAE with the segment as auxiliary variable, or time-contrastive learning),
while an unconditional Gaussian model cannot tell them from any rotation.
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

__all__ = ["make_segment_sources"]

_ACTIVATIONS = ("leaky_relu", "xtanh")
_N_COND_DRAWS = 500  # draws used to set the condition-number threshold


def _activation(H: np.ndarray, kind: str) -> np.ndarray:
    if kind == "leaky_relu":
        return np.where(H > 0, H, 0.2 * H)
    return np.tanh(H) + 0.1 * H  # "xtanh"


def _unit_columns(G: np.ndarray) -> np.ndarray:
    return G / np.linalg.norm(G, axis=-2, keepdims=True)


def _well_conditioned(n_out: int, n_in: int, rng: np.random.Generator) -> np.ndarray:
    """A random (n_out, n_in) matrix with unit-norm columns and a low condition number.

    Entries are N(0, 1) before normalising each column; draws are rejected until
    the condition number is below the 25th percentile of ``_N_COND_DRAWS`` draws
    (the rule of the iVAE data generator, with fewer reference draws).
    """
    ref = _unit_columns(rng.standard_normal((_N_COND_DRAWS, n_out, n_in)))
    threshold = np.percentile(np.linalg.cond(ref), 25)
    while True:
        A = _unit_columns(rng.standard_normal((n_out, n_in)))
        if np.linalg.cond(A) < threshold:
            return A


_COUNT = Interval(Integral, 1, None, closed="left")
_NONNEG = Interval(Real, 0, None, closed="left")


@validate_params(
    {
        "n_segments": [_COUNT],
        "n_per_segment": [_COUNT],
        "n_latents": [_COUNT],
        "n_observed": [_COUNT, None],
        "n_layers": [_COUNT],
        "activation": [StrOptions(_ACTIVATIONS)],
        "std_range": [SequenceOf(Interval(Real, 0, None, closed="neither"))],
        "obs_noise": [_NONNEG],
        "target_noise": [_NONNEG],
        "random_state": ["random_state"],
    }
)
def make_segment_sources(
    n_segments: int = 20,
    n_per_segment: int = 500,
    n_latents: int = 3,
    n_observed: int | None = None,
    *,
    n_layers: int = 1,
    activation: str = "leaky_relu",
    std_range: tuple[float, float] = (0.5, 3.0),
    obs_noise: float = 0.0,
    target_noise: float = 0.5,
    random_state: Seed = None,
) -> TaskData:
    """Variance-modulated Gaussian sources, mixed by random layers (iVAE's process).

    For segment s and source k, ``z_k ~ N(0, lambda_sk^2)`` with std factors
    ``lambda_sk ~ U(std_range)`` (default U[0.5, 3]). The mixing has ``n_layers``
    layers, each a random matrix with unit-norm columns and a low condition number
    (rejection sampling as in the iVAE code); ``activation`` (leaky ReLU with slope
    0.2, or ``tanh(h) + 0.1 h``) acts between layers, none after the last::

        h_0 = z,  h_l = act(A_l h_{l-1}) (l < L),  x = A_L h_{L-1} + obs_noise * eps.

    One layer is a linear mixing x = A z. Layer 1 maps ``n_latents`` to
    ``n_observed`` dimensions, later layers ``n_observed`` to ``n_observed``.

    Segments are the tasks (``task_ids``); iVAE conditions on them
    (:class:`~identrep.models.vae.IVAE` with ``conditioning="task"``). So that
    the bundle also suits target-based estimators, every segment has an auxiliary
    regression target ``y = w_s . z + target_noise * N(0, 1)`` with ``w_s ~ N(0,
    I)``: every source is causal (``causal`` all ones, ``gammas`` zero). ``y`` is
    drawn after ``X`` from its own noise and plays no part in the observations.

    Parameters
    ----------
    n_segments : int, default=20
        Number of segments S (need S > n_latents for identifiability).
    n_per_segment : int, default=500
        Samples per segment.
    n_latents : int, default=3
        Number of sources d.
    n_observed : int, optional
        Observed dimension p >= d; default ``n_latents``.
    n_layers : int, default=1
        Number of mixing layers L (1: linear).
    activation : {"leaky_relu", "xtanh"}, default="leaky_relu"
    std_range : (float, float), default=(0.5, 3.0)
        Range of the per-segment, per-source standard deviations.
    obs_noise : float, default=0.0
        Standard deviation of additive Gaussian observation noise.
    target_noise : float, default=0.5
        Noise standard deviation of the auxiliary target.
    random_state : int, Generator or None
        The only source of randomness: mixing layers first, then std factors,
        sources, observation noise (if any) and the target.

    Returns
    -------
    TaskData
        ``X`` (S * n, p), ``y`` (S * n,), ``task_ids`` (segment of each sample,
        task-major), ``Z`` (S * n, d) the true sources (not standardised: their
        scale is the signal), ``causal`` ones and ``gammas`` zeros (S, d),
        ``weights`` (S, d) the target weights, ``mixing`` the matrix A when
        ``n_layers == 1`` else None, ``noise_std`` (S,) all ``target_noise``.
        ``params`` holds the arguments plus ``std_factors`` (S, d) and
        ``mixing_layers`` (list of the L matrices).

    Examples
    --------
    >>> from identrep.datasets import make_segment_sources
    >>> data = make_segment_sources(n_segments=10, n_per_segment=50, n_latents=3,
    ...                             random_state=0)
    >>> data.X.shape, data.Z.shape, data.n_tasks, data.mixing.shape
    ((500, 3), (500, 3), 10, (3, 3))
    """
    d = int(n_latents)
    p = d if n_observed is None else int(n_observed)
    if p < d:
        raise InvalidParameterError(
            f"n_observed must be >= n_latents ({d}); got {n_observed!r}."
        )
    if len(std_range) != 2 or not 0 < std_range[0] <= std_range[1]:
        raise InvalidParameterError(
            f"std_range must be (low, high) with 0 < low <= high; got {std_range}."
        )
    lo, hi = (float(v) for v in std_range)
    rng = check_random_state(random_state)
    S, n = int(n_segments), int(n_per_segment)

    layers = [_well_conditioned(p, d, rng)]
    layers += [_well_conditioned(p, p, rng) for _ in range(int(n_layers) - 1)]
    std = rng.uniform(lo, hi, size=(S, d))
    task_ids = np.repeat(np.arange(S), n)
    Z = rng.standard_normal((S * n, d)) * std[task_ids]
    H = Z
    for i, A in enumerate(layers):
        H = H @ A.T
        if i < len(layers) - 1:
            H = _activation(H, activation)
    X = H + obs_noise * rng.standard_normal(H.shape) if obs_noise > 0 else H

    weights = rng.standard_normal((S, d))
    y = np.einsum("nd,nd->n", Z, weights[task_ids])
    y += target_noise * rng.standard_normal(S * n)

    for arr in (*layers, std):
        arr.setflags(write=False)
    params = dict(
        n_segments=n_segments,
        n_per_segment=n_per_segment,
        n_latents=n_latents,
        n_observed=p,
        n_layers=n_layers,
        activation=activation,
        std_range=(lo, hi),
        obs_noise=obs_noise,
        target_noise=target_noise,
        std_factors=std,
        mixing_layers=layers,
    )
    return TaskData(
        X=X,
        y=y,
        task_ids=task_ids,
        Z=Z,
        causal=np.ones((S, d)),
        gammas=np.zeros((S, d)),
        weights=weights,
        mixing=layers[0] if len(layers) == 1 else None,
        noise_std=np.full(S, float(target_noise)),
        params=params,
    )
