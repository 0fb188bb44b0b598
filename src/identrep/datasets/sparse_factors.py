"""The synthetic sparse factor process of Moran et al. (2022), Section 2.2 (numpy only).

Two correlated factors ``z ~ N(0, [[1, rho], [rho, 1]])`` generate seven features
through a sparse, non-linear map (each feature sees one factor, except the last)::

    x1 = z1,  x2 = 2 z1,  x3 = 3 z1^2,      (anchors of factor 1)
    x4 = 4 z2, x5 = 5 z2, x6 = 6 sin(z2),   (anchors of factor 2)
    x7 = 7 z1 z2,                            (both)

plus independent N(0, noise_std^2) noise on every feature. The true factor-to-feature
support (7 x 2, 0/1) is returned with the data, so every test and table can score
the learned masks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from identrep._typing import Seed
from identrep.utils._param_validation import Interval, validate_params
from identrep.utils.seeding import check_random_state

__all__ = ["SparseFactorData", "SPARSE_FACTOR_SUPPORT", "make_sparse_factors"]

#: The true support of Eq. 9: feature j (row) depends on factor k (column).
SPARSE_FACTOR_SUPPORT = np.array(
    [[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1], [1, 1]], dtype=np.int64
)


@dataclass(frozen=True)
class SparseFactorData:
    """Single-task factor data with the ground truth that generated it.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        Observations.
    Z : ndarray of shape (n_samples, n_factors)
        True factors.
    support : ndarray of shape (n_features, n_factors)
        1 where feature j depends on factor k, else 0.
    params : dict
        The generator's arguments.
    """

    X: np.ndarray
    Z: np.ndarray
    support: np.ndarray
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("X", "Z", "support"):
            getattr(self, name).setflags(write=False)


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "rho": [Interval(Real, -1, 1, closed="neither")],
        "noise_std": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_sparse_factors(
    n_samples: int = 1000,
    *,
    rho: float = 0.0,
    noise_std: float = 0.5,
    random_state: Seed = None,
) -> SparseFactorData:
    """Sample the 7-feature, 2-factor process of Moran et al. (2022), Eq. 9.

    Parameters
    ----------
    n_samples : int, default=1000
    rho : float in (-1, 1), default=0.0
        Correlation of the two factors (unit variances).
    noise_std : float, default=0.5
        Standard deviation of the additive Gaussian noise on every feature.
    random_state : int, Generator or None
        Factors are drawn first, then the noise.

    Returns
    -------
    SparseFactorData
        ``X`` (n_samples, 7), ``Z`` (n_samples, 2) and ``support`` (7, 2), equal to
        :data:`SPARSE_FACTOR_SUPPORT`.

    Examples
    --------
    >>> data = make_sparse_factors(100, rho=0.4, random_state=0)
    >>> data.X.shape, data.Z.shape, int(data.support.sum())
    ((100, 7), (100, 2), 8)
    """
    rng = check_random_state(random_state)
    cov = np.array([[1.0, rho], [rho, 1.0]])
    Z = rng.multivariate_normal(np.zeros(2), cov, size=n_samples, method="cholesky")
    z1, z2 = Z[:, 0], Z[:, 1]
    F = np.column_stack(
        [z1, 2 * z1, 3 * z1**2, 4 * z2, 5 * z2, 6 * np.sin(z2), 7 * z1 * z2]
    )
    X = F + noise_std * rng.standard_normal(F.shape)
    return SparseFactorData(
        X=X,
        Z=Z,
        support=SPARSE_FACTOR_SUPPORT.copy(),
        params=dict(
            n_samples=n_samples,
            rho=float(rho),
            noise_std=float(noise_std),
            random_state=random_state
            if isinstance(random_state, (int, type(None)))
            else "generator",
        ),
    )
