"""Recovery of a factor-to-feature support (which features depend on which factors).

Pure numpy (DESIGN.md section 6). A support is a 0/1 matrix of shape
(n_features, n_factors): entry (j, k) is 1 when feature j depends on factor k (the
Sparse VAE's ``support_``, the true ``support`` of
:func:`~identrep.datasets.make_sparse_factors`). Learned factors come in an arbitrary
order and may outnumber the true ones, so the columns are matched first:

* :func:`match_support_columns` -- the estimated column for every true column, by
  maximum overlap (Hungarian), unless a matching (e.g. from the latents, with
  :func:`~identrep.metrics.match_latents`) is given;
* :func:`support_f_score` -- F-score of the matched support (every nonzero of an
  unmatched estimated column counts as a false positive);
* :func:`exact_support` -- the matched support equals the true one and the
  unmatched columns are empty;
* :func:`empty_rows` -- features that depend on no factor (a zeroed row of W);
* :func:`collapsed_rows` -- features whose row of the decoder masks W is cut
  (every entry negligible against the largest mask), read from W itself;
* :func:`feature_r2` -- per-feature R^2 of a reconstruction (a feature that is not
  reconstructed has R^2 near 0);
* :func:`support_recovery` -- all of them in one dict.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from identrep._typing import ArrayLike
from identrep.exceptions import DataError

__all__ = [
    "collapsed_rows",
    "empty_rows",
    "exact_support",
    "feature_r2",
    "match_support_columns",
    "support_f_score",
    "support_recovery",
]


def _binary(S: ArrayLike, name: str) -> np.ndarray:
    """``S`` as a 2-D bool array (nonzero = in the support)."""
    A = np.asarray(S)
    if A.ndim != 2:
        raise DataError(
            f"{name} must be a 2-D (n_features, n_factors) support matrix; got "
            f"{A.ndim} dimension(s), shape {A.shape}."
        )
    if A.dtype.kind not in "biuf":
        raise DataError(f"{name} must be numeric or boolean; got dtype {A.dtype}.")
    if A.dtype.kind == "f" and not np.isfinite(A).all():
        raise DataError(f"{name} contains non-finite values; supports are 0/1.")
    return A != 0


def _pair(S_true: ArrayLike, S_hat: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    T, E = _binary(S_true, "S_true"), _binary(S_hat, "S_hat")
    if T.shape[0] != E.shape[0]:
        raise DataError(
            f"S_true and S_hat must have the same number of features (rows); got "
            f"{T.shape[0]} and {E.shape[0]}."
        )
    return T, E


def _check_matching(matching: ArrayLike, n_true: int, n_hat: int) -> np.ndarray:
    m = np.asarray(matching)
    if m.shape != (n_true,) or m.dtype.kind not in "iu":
        raise DataError(
            f"matching must be integers of shape ({n_true},) (the S_hat column of "
            f"each S_true column, -1 for none); got shape {m.shape}, dtype {m.dtype}."
        )
    used = m[m >= 0]
    if (m < -1).any() or (used >= n_hat).any() or np.unique(used).size != used.size:
        raise DataError(
            f"matching must hold distinct S_hat columns in [0, {n_hat}) or -1; got "
            f"{m.tolist()}."
        )
    return m.astype(np.int64)


def match_support_columns(S_true: ArrayLike, S_hat: ArrayLike) -> np.ndarray:
    """The estimated column matched to each true column, by maximum agreement.

    Maximises the number of entries on which the matched columns agree (Hungarian
    assignment); with more true than estimated columns some stay unmatched.

    Parameters
    ----------
    S_true : array-like of shape (n_features, n_factors)
    S_hat : array-like of shape (n_features, n_latents)
        Nonzero = in the support.

    Returns
    -------
    ndarray of shape (n_factors,), int64
        ``matching[k]`` is the column of ``S_hat`` matched to true column k, or -1.

    Examples
    --------
    >>> match_support_columns([[1, 0], [0, 1]], [[0, 1, 0], [1, 0, 0]]).tolist()
    [1, 0]
    """
    T, E = _pair(S_true, S_hat)
    T, E = T.astype(float), E.astype(float)
    # agreements of true column k with estimated column l
    agree = T.T @ E + (1 - T).T @ (1 - E)
    rows, cols = linear_sum_assignment(agree, maximize=True)
    out = np.full(T.shape[1], -1, dtype=np.int64)
    out[rows] = cols
    return out


def _aligned(S_true, S_hat, matching):
    """(true, matched estimate, nonzeros in unmatched estimated columns)."""
    T, E = _pair(S_true, S_hat)
    m = (
        match_support_columns(T, E)
        if matching is None
        else _check_matching(matching, T.shape[1], E.shape[1])
    )
    M = np.zeros_like(T)
    M[:, m >= 0] = E[:, m[m >= 0]]
    rest = np.setdiff1d(np.arange(E.shape[1]), m[m >= 0])
    return T, M, int(E[:, rest].sum())


def support_f_score(
    S_true: ArrayLike, S_hat: ArrayLike, *, matching: ArrayLike | None = None
) -> float:
    """F-score (F1) of an estimated support against the true one.

    ``2 TP / (2 TP + FP + FN)`` over the entries, after matching the columns
    (:func:`match_support_columns`, or ``matching``); the nonzeros of estimated
    columns matched to no true column are false positives. 1 only for the exact
    support; 0 when no true entry is found. Invariant to permuting the columns
    of ``S_hat`` (with the default matching).

    Parameters
    ----------
    S_true : array-like of shape (n_features, n_factors)
    S_hat : array-like of shape (n_features, n_latents)
    matching : array-like of shape (n_factors,), optional
        ``S_hat`` column of each true column (-1: none), e.g. from matching the
        latents themselves with :func:`~identrep.metrics.match_latents`.

    Returns
    -------
    float in [0, 1] (1 when both supports are empty).

    Raises
    ------
    DataError
        Non-2-D or non-numeric supports, different numbers of rows, or a bad
        ``matching``.

    Examples
    --------
    >>> support_f_score([[1, 0], [0, 1]], [[0, 1], [1, 1]])
    0.8
    """
    T, M, extra = _aligned(S_true, S_hat, matching)
    tp = int((T & M).sum())
    fp = int((~T & M).sum()) + extra
    fn = int((T & ~M).sum())
    denom = 2 * tp + fp + fn
    return 1.0 if denom == 0 else 2.0 * tp / denom


def exact_support(
    S_true: ArrayLike, S_hat: ArrayLike, *, matching: ArrayLike | None = None
) -> bool:
    """Whether the matched estimated support equals the true one exactly (and any
    unmatched estimated column is empty). Arguments as :func:`support_f_score`.

    Examples
    --------
    >>> exact_support([[1, 0], [1, 1]], [[0, 1, 0], [1, 1, 0]])
    True
    """
    T, M, extra = _aligned(S_true, S_hat, matching)
    return bool(extra == 0 and np.array_equal(T, M))


def empty_rows(S_hat: ArrayLike) -> int:
    """Number of features (rows) whose support is empty: they depend on no factor.

    Examples
    --------
    >>> empty_rows([[0, 0], [1, 0], [0, 0]])
    2
    """
    return int((~_binary(S_hat, "S_hat").any(axis=1)).sum())


#: Relative tolerance of :func:`collapsed_rows` (see its Notes).
COLLAPSE_RTOL = 0.05


def collapsed_rows(W: ArrayLike, *, rtol: float = COLLAPSE_RTOL) -> int:
    """Number of features whose whole row of the decoder masks W is cut.

    Row j is collapsed when ``max_k |W[j, k]| <= rtol * max_{i, k} |W[i, k]|``:
    every mask of the feature is negligible against the largest mask of the
    decoder. An all-zero W has every row collapsed.

    Parameters
    ----------
    W : array-like of shape (n_features, n_latents)
        Real-valued masks (e.g. the Sparse VAE's ``mask_``), not a 0/1 support.
    rtol : float in [0, 1), default=0.05

    Returns
    -------
    int

    Raises
    ------
    DataError
        W not 2-D, not numeric or not finite; ``rtol`` outside [0, 1).

    Notes
    -----
    In a masked decoder x_j ~ p(x_j | f_j(w_j * z)) the feature sees the latents
    only through w_j * z. When f_j is L-Lipschitz with the same L for every
    feature (the Sparse VAE with fixed scales and fixed head norms, on
    standardised features), the part of x_j that the decoder can explain has
    standard deviation at most L ||w_j|| times that of z, so a row at
    ``rtol`` of the largest row carries at most ``rtol`` of the largest gain and
    at most ``rtol**2`` (0.25 % at 0.05) of its explained variance: the feature is
    reconstructed by a constant, the "zeroed row of W" of the authors' code. This
    differs from :func:`empty_rows`, which counts rows of a *support* (e.g.
    inclusion probability > 0.5) and also counts slab-sized masks that sit just
    under the support's cut. With ``rtol`` = 0 only exactly zero rows count.

    Examples
    --------
    >>> collapsed_rows([[1.0, 0.0], [0.0, 0.3], [0.01, 0.0]])
    1
    """
    A = np.asarray(W)
    if A.ndim != 2 or A.dtype.kind not in "biuf":
        raise DataError(
            f"W must be a 2-D numeric (n_features, n_latents) array of masks; got "
            f"shape {A.shape}, dtype {A.dtype}."
        )
    A = np.abs(A.astype(np.float64))
    if not np.isfinite(A).all():
        raise DataError("W contains non-finite values.")
    if not (isinstance(rtol, (int, float, np.floating)) and 0 <= rtol < 1):
        raise DataError(f"rtol must be a number in [0, 1); got {rtol!r}.")
    if A.size == 0:
        return int(A.shape[0])
    return int((A.max(axis=1) <= rtol * A.max()).sum())


def feature_r2(X: ArrayLike, X_hat: ArrayLike) -> np.ndarray:
    """Per-feature coefficient of determination of a reconstruction.

    ``R2_j = 1 - sum_i (X_ij - X_hat_ij)^2 / sum_i (X_ij - mean_j)^2``: 1 is a
    perfect reconstruction, 0 that of the feature's mean (a constant, what a
    feature with a collapsed decoder row gets), negative worse than the mean.

    Parameters
    ----------
    X, X_hat : array-like of shape (n_samples, n_features)
        Data (held out, for a fair score) and its reconstruction.

    Returns
    -------
    ndarray of shape (n_features,)

    Raises
    ------
    DataError
        Shapes differ, fewer than 2 rows, non-finite values, or a constant
        feature in X (R^2 undefined).

    Examples
    --------
    >>> feature_r2([[0.0, 1.0], [2.0, 3.0]], [[0.0, 2.0], [2.0, 2.0]]).tolist()
    [1.0, 0.0]
    """
    A, B = np.asarray(X, dtype=np.float64), np.asarray(X_hat, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape or A.shape[0] < 2:
        raise DataError(
            f"X and X_hat must be 2-D of the same shape with at least 2 rows; got "
            f"{A.shape} and {B.shape}."
        )
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise DataError("X and X_hat must be finite.")
    total = ((A - A.mean(axis=0)) ** 2).sum(axis=0)
    if (total == 0).any():
        raise DataError(
            f"X has constant feature(s) {np.flatnonzero(total == 0).tolist()}: "
            "R^2 is undefined for them."
        )
    return 1.0 - ((A - B) ** 2).sum(axis=0) / total


def support_recovery(
    S_true: ArrayLike, S_hat: ArrayLike, *, matching: ArrayLike | None = None
) -> dict[str, float]:
    """``f_score``, ``exact`` (1.0 or 0.0), ``empty_rows`` (the estimate's) and
    ``n_selected`` (its nonzeros) in one dict; arguments as
    :func:`support_f_score`.

    Examples
    --------
    >>> support_recovery([[1, 0], [0, 1]], [[0, 1], [0, 0]])
    {'f_score': 0.6666666666666666, 'exact': 0.0, 'empty_rows': 1, 'n_selected': 1}
    """
    return {
        "f_score": support_f_score(S_true, S_hat, matching=matching),
        "exact": float(exact_support(S_true, S_hat, matching=matching)),
        "empty_rows": empty_rows(S_hat),
        "n_selected": int(_binary(S_hat, "S_hat").sum()),
    }
