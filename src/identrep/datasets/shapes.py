"""A procedural 3D-shapes-like image process and sparse regression tasks on it.

DeepMind's 3D Shapes (Burgess & Kim, 2018) is not available offline, so this
module renders a look-alike in numpy: a 64 x 64 RGB image of an object standing on
a floor in front of a wall, controlled by six factors in the data set's order:

===============  ==================  =====================================
factor           range               what changes
===============  ==================  =====================================
``floor_hue``    [0, 0.9]            hue of the floor (lower part)
``wall_hue``     [0, 0.9]            hue of the back wall (upper part)
``object_hue``   [0, 0.9]            hue of the object
``scale``        [0.75, 1.25]        height and width of the object
``shape``        {0, 1, 2, 3}        cube, cylinder, sphere, capsule
``orientation``  [-30, 30] degrees   rotation about the vertical axis
===============  ==================  =====================================

Hues stop at 0.9 (as in 3D Shapes) because hue is circular: 0 and 1 are the same
colour. The object is two-toned along its surface longitude, the boundary sitting
at the longitude of the object's own front meridian: for the cube this is the edge
between its two visible faces, for the round shapes a terminator line, so the
orientation changes every shape's image (in 3D Shapes a rotated sphere looks the
same). Edges are anti-aliased from signed distances, so the image is a continuous
function of the continuous factors. Rendering is array operations over a batch of
images (no per-pixel Python loop), chunked to bound memory, and deterministic.

:func:`make_shapes_tasks` is the semi-synthetic regression process of Lachapelle
et al. (2023), section 6, on these images.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from scipy.special import ndtr

from identrep._typing import Seed
from identrep.datasets.bundle import TaskData
from identrep.utils._param_validation import Interval, validate_params
from identrep.utils.seeding import check_random_state

__all__ = [
    "SHAPES_FACTORS",
    "SHAPES_IMAGE_SHAPE",
    "SHAPES_NAMES",
    "SHAPES_RANGES",
    "make_shapes_tasks",
    "render_shapes",
    "sample_shapes_factors",
]

#: Factor names, in the column order of every factor array.
SHAPES_FACTORS = (
    "floor_hue",
    "wall_hue",
    "object_hue",
    "scale",
    "shape",
    "orientation",
)
#: Range of each factor (``shape`` takes the integers 0..3).
SHAPES_RANGES = {
    "floor_hue": (0.0, 0.9),
    "wall_hue": (0.0, 0.9),
    "object_hue": (0.0, 0.9),
    "scale": (0.75, 1.25),
    "shape": (0, 3),
    "orientation": (-30.0, 30.0),
}
#: Names of the values of the ``shape`` factor.
SHAPES_NAMES = ("cube", "cylinder", "sphere", "capsule")
#: (height, width, channels) of one image; ``X`` rows are these, flattened (C order).
SHAPES_IMAGE_SHAPE = (64, 64, 3)

_SIZE = SHAPES_IMAGE_SHAPE[0]
_HORIZON = 0.58  # wall above, floor below (fraction of the height from the top)
_BASE = 0.86  # where the object stands
_HEIGHT = 0.36  # object height at scale 1 (fraction of the image)
_SAT, _VAL = 0.75, 0.95  # saturation and value of every surface colour
_SHAPE_IDX = SHAPES_FACTORS.index("shape")


# ------------------------------------------------------------------ sampling
@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "rho": [Interval(Real, 0, 1, closed="left")],
        "random_state": ["random_state"],
    }
)
def sample_shapes_factors(
    n_samples: int, *, rho: float = 0.0, random_state: Seed = None
) -> np.ndarray:
    """Factors with every pair correlated through a Gaussian copula.

    ``g ~ N(0, (1 - rho) I + rho 1 1^T)``, ``u = Phi(g)`` (uniform marginals, the
    Spearman correlation of every pair is ``(6 / pi) asin(rho / 2)``, within 0.02
    of ``rho``), then each ``u`` is mapped onto its factor's range: linearly for
    the continuous factors, ``floor(4 u)`` for ``shape``. The authors sample the
    discrete 3D Shapes grid with probabilities from a correlated Gaussian and add
    uniform jitter to break the grid; a rendered image has no grid, so the
    continuous factors are drawn continuously (a grid value plus within-cell
    jitter, in law) and only ``shape`` stays discrete.

    Parameters
    ----------
    n_samples : int
    rho : float in [0, 1)
        Correlation of every pair of the underlying Gaussians.
    random_state : int, Generator or None

    Returns
    -------
    ndarray of shape (n_samples, 6)
        Raw factors in the order of :data:`SHAPES_FACTORS` (float64; ``shape``
        holds integer values).
    """
    rng = check_random_state(random_state)
    d = len(SHAPES_FACTORS)
    # g = sqrt(rho) * common + sqrt(1 - rho) * own: the equicorrelated Gaussian
    common = rng.standard_normal((int(n_samples), 1))
    own = rng.standard_normal((int(n_samples), d))
    u = ndtr(np.sqrt(rho) * common + np.sqrt(1.0 - rho) * own)
    out = np.empty_like(u)
    for j, name in enumerate(SHAPES_FACTORS):
        lo, hi = SHAPES_RANGES[name]
        if name == "shape":
            out[:, j] = np.minimum(np.floor(u[:, j] * (hi + 1)), hi)
        else:
            out[:, j] = lo + (hi - lo) * u[:, j]
    return out


# ------------------------------------------------------------------ rendering
def _hsv_to_rgb(h: np.ndarray, s: float, v: float) -> np.ndarray:
    """RGB in [0, 1] of hues ``h`` (any shape) at fixed saturation and value;
    returns shape ``h.shape + (3,)``."""
    k = (np.array([5.0, 3.0, 1.0]) + 6.0 * h[..., None]) % 6.0
    return v - v * s * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def _coverage(sd: np.ndarray) -> np.ndarray:
    """Anti-aliased inside-ness from a signed distance in pixels (< 0 inside)."""
    return np.clip(0.5 - sd, 0.0, 1.0)


def _box_sd(x, y, half_w, half_h, cy):
    """Signed distance (pixels) to an axis-aligned box centred at (0, cy)."""
    return np.maximum(np.abs(x) - half_w, np.abs(y - cy) - half_h)


def _object(x, y, a, shape, theta):
    """Coverage, two-tone side weight (in [0, 1]) and longitude shading.

    ``x`` (pixels right of the object's axis), ``y`` (pixels above its base) have
    shape (1, H, W); ``a`` (height in pixels), ``shape`` and ``theta`` (radians)
    have shape (n, 1, 1). Returns three arrays of shape (n, H, W).
    """
    sin, cos = np.sin(theta), np.cos(theta)
    # cube turned about the vertical axis: two faces of widths a|cos|, a|sin|
    half_cube = 0.5 * a * (np.abs(cos) + np.abs(sin))
    edge_cube = np.where(theta >= 0, -half_cube + a * cos, half_cube - a * cos)
    sd_cube = _box_sd(x, y, half_cube, a / 2, a / 2)
    # upright cylinder, width a
    sd_cyl = _box_sd(x, y, a / 2, a / 2, a / 2)
    # sphere of diameter a resting on the floor
    r_sph = a / 2
    sd_sph = np.sqrt(x**2 + (y - r_sph) ** 2) - r_sph
    # upright capsule: radius a/3 around the segment from y=a/3 to y=2a/3
    r_cap = a / 3
    ys = np.clip(y, r_cap, a - r_cap)
    sd_cap = np.sqrt(x**2 + (y - ys) ** 2) - r_cap
    sd = np.choose(shape.astype(int), [sd_cube, sd_cyl, sd_sph, sd_cap])

    # half-width of the round shapes on each row, for the surface longitude
    hw_sph = np.sqrt(np.clip(r_sph**2 - (y - r_sph) ** 2, 1e-6, None))
    hw_cap = np.sqrt(np.clip(r_cap**2 - (y - ys) ** 2, 1e-6, None))
    hw = np.choose(shape.astype(int), [half_cube, a / 2, hw_sph, hw_cap])
    lon = np.arcsin(np.clip(x / np.maximum(hw, 1e-6), -1.0, 1.0))
    # the object's front meridian (round shapes) sits at screen longitude theta,
    # i.e. at x = hw sin(theta) on each row; anti-aliased like the silhouette
    edge = np.where(shape == 0, edge_cube, hw * sin)
    side = _coverage(edge - x)
    light = np.where(shape == 0, 1.0, 0.8 + 0.2 * np.cos(lon + 0.6))
    return _coverage(sd), side, light


def _render_chunk(f: np.ndarray, size: int = _SIZE) -> np.ndarray:
    """Images of shape (n, size, size, 3) for raw factors ``f`` of shape (n, 6)."""
    n = f.shape[0]
    rows = (np.arange(size) + 0.5)[None, :, None]  # (1, H, 1), pixel centres
    cols = (np.arange(size) + 0.5)[None, None, :]  # (1, 1, W)
    col = lambda j: f[:, j][:, None, None]  # noqa: E731 - (n, 1, 1)

    floor_rgb = _hsv_to_rgb(col(0), _SAT, _VAL)  # (n, 1, 1, 3)
    wall_rgb = _hsv_to_rgb(col(1), _SAT, _VAL)
    obj_rgb = _hsv_to_rgb(col(2), _SAT, _VAL)

    horizon = _HORIZON * size
    is_floor = _coverage(horizon - rows)  # (1, H, 1): 1 below the horizon
    floor_shade = 0.62 + 0.38 * np.clip((rows - horizon) / (size - horizon), 0, 1)
    wall_shade = 0.78 + 0.22 * cols / size  # lit from the right
    scene = (
        is_floor[..., None] * floor_shade[..., None] * floor_rgb
        + (1 - is_floor[..., None]) * wall_shade[..., None] * wall_rgb
    )  # (n, H, W, 3)

    a = _HEIGHT * size * col(3)
    x = cols - size / 2
    y = _BASE * size - rows
    # soft contact shadow on the floor under the object
    shadow = np.sqrt((x / (0.75 * a)) ** 2 + (y / (0.12 * a)) ** 2)
    scene = scene * (1.0 - 0.35 * np.clip(1.0 - shadow, 0.0, 1.0))[..., None]

    cover, side, light = _object(x, y, a, col(4), np.deg2rad(col(5)))
    shade = (0.95 - 0.33 * side) * light
    img = scene + cover[..., None] * (shade[..., None] * obj_rgb - scene)
    return np.clip(img, 0.0, 1.0).astype(np.float32).reshape(n, size, size, 3)


def render_shapes(
    factors, *, chunk_size: int = 256, image_size: int = 64
) -> np.ndarray:
    """Render images from raw factors.

    Parameters
    ----------
    factors : array-like of shape (n_samples, 6)
        Raw factors in the order of :data:`SHAPES_FACTORS`, within
        :data:`SHAPES_RANGES` (``shape`` in {0, 1, 2, 3}).
    chunk_size : int, default=256
        Images rendered per vectorised step (bounds the temporary memory to a
        few tens of MB).
    image_size : int, default=64
        Height and width in pixels (3D Shapes: 64). The scene is the same at any
        size (coordinates scale with it); smaller images are cheaper to render
        and to encode (e.g. 32 for CPU runs).

    Returns
    -------
    ndarray of shape (n_samples, image_size, image_size, 3), float32 in [0, 1]

    Raises
    ------
    ValueError
        If ``factors`` has the wrong shape, is not finite, lies outside the
        ranges, or ``shape`` is not an integer in {0, 1, 2, 3}.
    """
    f = np.asarray(factors, dtype=float)
    d = len(SHAPES_FACTORS)
    if f.ndim != 2 or f.shape[1] != d:
        raise ValueError(
            f"factors must have shape (n_samples, {d}) in the order "
            f"{SHAPES_FACTORS}; got shape {f.shape}."
        )
    if not np.all(np.isfinite(f)):
        raise ValueError("factors contains non-finite values; pass finite factors.")
    for j, name in enumerate(SHAPES_FACTORS):
        lo, hi = SHAPES_RANGES[name]
        bad = (f[:, j] < lo - 1e-9) | (f[:, j] > hi + 1e-9)
        if name == "shape":
            bad |= f[:, j] != np.round(f[:, j])
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"factor {name!r} must lie in [{lo}, {hi}]"
                + (" and be an integer" if name == "shape" else "")
                + f"; got {f[row, j]!r} in row {row}."
            )
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}.")
    size = int(image_size)
    if size < 8:
        raise ValueError(f"image_size must be >= 8 pixels; got {image_size!r}.")
    out = np.empty((f.shape[0], size, size, 3), dtype=np.float32)
    for start in range(0, f.shape[0], int(chunk_size)):
        stop = start + int(chunk_size)
        out[start:stop] = _render_chunk(f[start:stop], size)
    return out


# ------------------------------------------------------------------ tasks
def _sparse_task_weights(
    n_tasks: int, d: int, support_prob: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Supports ~ Bernoulli(p) per task and factor (an empty support is drawn
    again) and Gaussian weights on them; both of shape (n_tasks, d)."""
    support = rng.random((n_tasks, d)) < support_prob
    empty = ~support.any(axis=1)
    while empty.any():
        support[empty] = rng.random((int(empty.sum()), d)) < support_prob
        empty = ~support.any(axis=1)
    weights = np.where(support, rng.standard_normal((n_tasks, d)), 0.0)
    return support.astype(float), weights


@validate_params(
    {
        "n_tasks": [Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 2, None, closed="left")],
        "rho": [Interval(Real, 0, 1, closed="left")],
        "support_prob": [Interval(Real, 0, 1, closed="right")],
        "noise_ratio": [Interval(Real, 0, None, closed="left")],
        "image_size": [Interval(Integral, 8, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_shapes_tasks(
    n_tasks: int = 50,
    n_samples: int = 50,
    *,
    rho: float = 0.0,
    support_prob: float = 0.5,
    noise_ratio: float = 0.1,
    image_size: int = 64,
    random_state: Seed = None,
) -> TaskData:
    """Sparse linear regression tasks on the factors of rendered 3D-shapes images.

    Every task t draws its own ``n_samples`` images (factors from
    :func:`sample_shapes_factors` with correlation ``rho``), a support
    ``S_t ~ Bernoulli(support_prob)`` per factor (independently per task; an empty
    support is drawn again) and weights ``w_tj ~ N(0, 1)`` on it. With ``Z`` the
    factors standardised over the whole data set,
    ``y_t = Z_t w_t + eps_t`` where ``eps_t`` is Gaussian noise rescaled so that
    ``||eps_t|| = noise_ratio * ||Z_t w_t||`` (the authors' SNR control).

    Memory: 48 KiB per image (float32), e.g. 120 MiB for 50 tasks x 50 samples.

    Parameters
    ----------
    n_tasks : int, default=50
    n_samples : int, default=50
        Images per task (the authors use 25 support + 25 query points).
    rho : float in [0, 1), default=0.0
        Pairwise correlation of the factors (paper: up to 0.99).
    support_prob : float in (0, 1], default=0.5
        Probability that a factor is in a task's support; 1 gives every task the
        full support, which violates the sufficient-variability assumption.
    noise_ratio : float, default=0.1
        Noise norm over signal norm within each task.
    image_size : int, default=64
        Image height and width (see :func:`render_shapes`).
    random_state : int, Generator or None

    Returns
    -------
    TaskData
        ``X`` (n_tasks * n_samples, 3 * image_size**2) float32 flattened images
        (reshape to (n, image_size, image_size, 3)); ``y``; ``task_ids``
        (task-major); ``Z`` (n, 6) the standardised factors (over the whole
        data set, not per task);
        ``causal`` (n_tasks, 6) the supports as 0/1; ``weights`` (n_tasks, 6);
        ``gammas`` zeros (no spurious factors); ``mixing`` None (rendering);
        ``noise_std`` (n_tasks,) the per-sample noise scale ``||eps_t|| /
        sqrt(n)``; ``params`` the arguments plus ``factors`` (the raw factors).

    Examples
    --------
    >>> data = make_shapes_tasks(n_tasks=2, n_samples=4, rho=0.5, random_state=0)
    >>> data.X.shape, data.Z.shape, data.causal.shape
    ((8, 12288), (8, 6), (2, 6))
    """
    rng = check_random_state(random_state)
    T, n, d = int(n_tasks), int(n_samples), len(SHAPES_FACTORS)
    factors = sample_shapes_factors(T * n, rho=rho, random_state=rng)
    Z = (factors - factors.mean(axis=0)) / np.maximum(factors.std(axis=0), 1e-12)
    causal, weights = _sparse_task_weights(T, d, float(support_prob), rng)

    signal = np.einsum("tnd,td->tn", Z.reshape(T, n, d), weights)
    eps = rng.standard_normal((T, n))
    scale = noise_ratio * np.linalg.norm(signal, axis=1) / np.linalg.norm(eps, axis=1)
    y = signal + scale[:, None] * eps
    X = render_shapes(factors, image_size=image_size).reshape(T * n, -1)
    params = dict(
        n_tasks=T,
        n_samples=n,
        rho=float(rho),
        support_prob=float(support_prob),
        noise_ratio=float(noise_ratio),
        image_size=int(image_size),
        factors=factors,
    )
    return TaskData(
        X=X,
        y=y.reshape(T * n),
        task_ids=np.repeat(np.arange(T), n),
        Z=Z,
        causal=causal,
        gammas=np.zeros((T, d)),
        weights=weights,
        mixing=None,
        noise_std=scale * np.linalg.norm(eps, axis=1) / np.sqrt(n),
        params=params,
    )
