"""Mean correlation coefficient (MCC) metrics for latent recovery.

Pure numpy/scipy functions (DESIGN.md section 6): no torch, no state, no hidden RNG.

* :func:`correlation_matrix` -- absolute Pearson or Spearman correlations between the
  columns of two matrices;
* :func:`mcc` -- strong MCC: Hungarian matching of the absolute correlations, mean of
  the matched entries;
* :func:`mcc_per_task` -- strong MCC with its own matching per task, averaged over tasks
  (the paper's protocol for Tables 1-2);
* :func:`weak_mcc` -- MCC of canonical variates after an exact CCA (identifiability up
  to an invertible linear map);
* :func:`cross_seed_mcc` -- agreement between the latents of several seeds.
"""

from __future__ import annotations

from itertools import combinations
from numbers import Integral, Real

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError
from identrep.utils.validation import check_array, encode_task_ids

__all__ = [
    "correlation_matrix",
    "cross_seed_mcc",
    "mcc",
    "mcc_per_task",
    "weak_mcc",
]

_METHODS = ("pearson", "spearman")
# A column whose centred norm is below this fraction of sqrt(n) * max|value| is
# treated as constant (its correlations are defined as 0): the threshold sits a few
# thousand ulps above the round-off left by subtracting the mean.
_CONST_RTOL = 1e-12
# Relative ridge added to each block covariance in the CCA, as a fraction of the mean
# variance of the block.
_CCA_RIDGE = 1e-10


# --------------------------------------------------------------------------- checks


def _check_method(method: str) -> str:
    if not isinstance(method, str):
        raise TypeError(
            f"method must be a str, one of {_METHODS}; got {type(method).__name__}."
        )
    if method not in _METHODS:
        raise ValueError(
            f"method must be one of {_METHODS}; got {method!r}. Use 'pearson' for "
            "linear and 'spearman' for rank (monotone) correlation."
        )
    return method


def _check_pair(
    Z1: ArrayLike, Z2: ArrayLike, names: tuple[str, str] = ("Z1", "Z2")
) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs 2-D, finite, at least 2 rows, and the same number of rows."""
    A = check_array(Z1, names[0], min_rows=2)
    B = check_array(Z2, names[1], min_rows=2)
    if A.shape[0] != B.shape[0]:
        raise DataError(
            f"{names[0]} and {names[1]} must have the same number of rows (one per "
            f"sample, in the same order); got {names[0]} of shape {A.shape} and "
            f"{names[1]} of shape {B.shape}."
        )
    return A, B


# ---------------------------------------------------------------------- formulas


def _standardise(A: np.ndarray) -> np.ndarray:
    """Centre the columns (axis -2) and scale them to unit Euclidean norm.

    Constant columns become exactly zero, so their correlations are 0, not NaN.
    """
    Ac = A - A.mean(axis=-2, keepdims=True)
    norm = np.sqrt(np.einsum("...ij,...ij->...j", Ac, Ac))[..., None, :]
    scale = np.abs(A).max(axis=-2, keepdims=True) * np.sqrt(A.shape[-2])
    const = norm <= _CONST_RTOL * scale
    Ac /= np.where(const, 1.0, norm)
    Ac *= ~const
    return Ac


def _abs_corr(A: np.ndarray, B: np.ndarray, method: str) -> np.ndarray:
    """|corr| between the columns of ``A`` (..., n, d1) and ``B`` (..., n, d2).

    Leading axes are batch axes; the result has shape (..., d1, d2).
    """
    if method == "spearman":
        A = rankdata(A, axis=-2)  # average ranks for ties
        B = rankdata(B, axis=-2)
    R = np.abs(np.swapaxes(_standardise(A), -1, -2) @ _standardise(B))
    return np.minimum(R, 1.0, out=R)


def _match(R: np.ndarray) -> tuple[float, np.ndarray]:
    """Maximum-weight matching of the rows of ``R`` (d1, d2) to its columns.

    Returns the mean of the matched entries and ``perm`` of length d1 with
    ``perm[i]`` = column matched to row i (-1 if unmatched).
    """
    rows, cols = linear_sum_assignment(R, maximize=True)
    perm = np.full(R.shape[0], -1, dtype=np.int64)
    perm[rows] = cols
    return float(R[rows, cols].mean()), perm


def _cca_weights(
    A: np.ndarray, B: np.ndarray, n_components: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact CCA weights of centred blocks ``A`` (n, d1) and ``B`` (n, d2).

    Returns ``W1`` (d1, k), ``W2`` (d2, k) and the canonical correlations (k,), so
    that ``A @ W1`` and ``B @ W2`` are the canonical variates (unit variance,
    pairwise correlated, uncorrelated within a block).
    """
    n = A.shape[0]

    def whitener(X: np.ndarray, name: str) -> np.ndarray:
        C = X.T @ X / max(n - 1, 1)
        mean_var = np.trace(C) / C.shape[0]
        if not mean_var > 0:
            raise DataError(
                f"{name} has zero variance in every column on the rows used to fit "
                "the CCA; weak MCC is undefined for constant latents."
            )
        s, V = np.linalg.eigh(C + _CCA_RIDGE * mean_var * np.eye(C.shape[0]))
        s = np.maximum(s, _CCA_RIDGE * mean_var)  # guard round-off negatives
        return V / np.sqrt(s)  # C^{-1/2} up to rotation: W.T C W = I

    K1, K2 = whitener(A, "Z1"), whitener(B, "Z2")
    cross = (A @ K1).T @ (B @ K2) / max(n - 1, 1)
    P, rho, Qt = np.linalg.svd(cross, full_matrices=False)
    k = n_components
    return K1 @ P[:, :k], K2 @ Qt[:k].T, rho[:k]


# ------------------------------------------------------------------- public API


def correlation_matrix(
    Z1: ArrayLike, Z2: ArrayLike, method: str = "pearson"
) -> np.ndarray:
    """Absolute correlations between the columns of two matrices.

    Parameters
    ----------
    Z1 : array-like of shape (n_samples, d1)
    Z2 : array-like of shape (n_samples, d2)
        Rows of ``Z1`` and ``Z2`` must refer to the same samples.
    method : {"pearson", "spearman"}, default="pearson"
        Pearson (linear) correlation, or Spearman correlation (Pearson correlation of
        the column ranks, ties given their average rank).

    Returns
    -------
    ndarray of shape (d1, d2)
        ``R[i, j] = |corr(Z1[:, i], Z2[:, j])|`` in [0, 1]. A constant column has
        correlation 0 with everything (not NaN).

    Raises
    ------
    DataError
        If an input is not 2-D, has fewer than 2 rows, contains NaN/inf, or the row
        counts differ.
    ValueError
        If ``method`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> correlation_matrix(Z, -3 * Z).round(2)
    array([[1. , 0.5],
           [0.5, 1. ]])
    """
    method = _check_method(method)
    A, B = _check_pair(Z1, Z2)
    return _abs_corr(A, B, method)


def mcc(
    Z1: ArrayLike,
    Z2: ArrayLike,
    method: str = "pearson",
    *,
    return_matching: bool = False,
) -> float | tuple[float, np.ndarray]:
    """Mean correlation coefficient after optimal matching of the columns.

    Computes ``R = correlation_matrix(Z1, Z2, method)``, finds the one-to-one matching
    of columns maximising the sum of matched ``|R|`` entries (Hungarian algorithm,
    :func:`scipy.optimize.linear_sum_assignment`) and returns the mean of the matched
    entries. If ``d1 != d2`` only ``min(d1, d2)`` pairs are matched and averaged; the
    extra columns of the wider input are ignored.

    The score lies in [0, 1] and is invariant to permuting the columns of either
    input and to multiplying any column by a nonzero constant (including negative
    ones). With ``method="spearman"`` it is also invariant to strictly monotone
    transforms of each column.

    Parameters
    ----------
    Z1 : array-like of shape (n_samples, d1)
        E.g. the true latents.
    Z2 : array-like of shape (n_samples, d2)
        E.g. the estimated latents, rows aligned with ``Z1``.
    method : {"pearson", "spearman"}, default="pearson"
    return_matching : bool, default=False
        Also return the matching.

    Returns
    -------
    score : float
        Mean matched absolute correlation.
    matching : ndarray of shape (d1,), int64
        Only if ``return_matching``. ``matching[i]`` is the column of ``Z2`` matched
        to column ``i`` of ``Z1``, or -1 if column ``i`` is unmatched (``d1 > d2``).

    Raises
    ------
    DataError
        If an input is not 2-D, has fewer than 2 rows, contains NaN/inf, or the row
        counts differ.
    ValueError
        If ``method`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.random.default_rng(0).normal(size=(100, 3))
    >>> score, perm = mcc(Z, -2 * Z[:, [2, 0, 1]], return_matching=True)
    >>> round(score, 6), perm.tolist()
    (1.0, [1, 2, 0])
    """
    R = correlation_matrix(Z1, Z2, method)
    score, perm = _match(R)
    return (score, perm) if return_matching else score


def mcc_per_task(
    Z1: ArrayLike,
    Z2: ArrayLike,
    task_ids: ArrayLike,
    method: str = "spearman",
    *,
    return_all: bool = False,
) -> float | tuple[float, np.ndarray]:
    """MCC computed separately within each task, then averaged over tasks.

    This is the paper's protocol for Tables 1-2 (per-task Spearman MCC, each task
    with its own matching). It is biased upward when latents are nearly collinear
    within a task (DESIGN.md section 6): report the pooled :func:`mcc` beside it.

    Parameters
    ----------
    Z1 : array-like of shape (n_samples, d1)
    Z2 : array-like of shape (n_samples, d2)
    task_ids : array-like of shape (n_samples,)
        Task label (int or str) of every row.
    method : {"pearson", "spearman"}, default="spearman"
    return_all : bool, default=False
        Also return the per-task scores.

    Returns
    -------
    score : float
        Unweighted mean over tasks of the per-task MCC.
    per_task : ndarray of shape (n_tasks,)
        Only if ``return_all``. ``per_task[k]`` is the MCC of the task
        ``np.unique(task_ids)[k]``.

    Raises
    ------
    DataError
        If the inputs are malformed (see :func:`mcc`), ``task_ids`` does not have one
        entry per row, or a task has fewer than 2 samples.
    ValueError
        If ``method`` is unknown.
    """
    method = _check_method(method)
    A, B = _check_pair(Z1, Z2)
    codes, labels = encode_task_ids(task_ids, A.shape[0])
    counts = np.bincount(codes, minlength=len(labels))
    few = np.flatnonzero(counts < 2)
    if few.size:
        raise DataError(
            "Every task needs at least 2 samples to compute a correlation; task "
            f"{labels[few[0]].tolist()!r} has {int(counts[few[0]])}"
            + (f" ({few.size} such tasks)" if few.size > 1 else "")
            + ". Drop those tasks or gather more samples."
        )
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    scores = np.empty(len(labels))
    # Batch the tasks of equal size: one ranking and one matmul per distinct size.
    for size in np.unique(counts):
        tasks = np.flatnonzero(counts == size)
        rows = order[starts[tasks][:, None] + np.arange(size)]  # (k, size)
        R = _abs_corr(A[rows], B[rows], method)  # (k, d1, d2)
        for t, R_t in zip(tasks, R, strict=True):
            scores[t] = _match(R_t)[0]
    mean = float(scores.mean())
    return (mean, scores) if return_all else mean


def weak_mcc(
    Z1: ArrayLike,
    Z2: ArrayLike,
    n_components: int | None = None,
    method: str = "spearman",
    *,
    split: float | None = None,
    random_state: Seed = None,
) -> float:
    """MCC of canonical variates: recovery up to an invertible linear map.

    Centres both inputs, whitens each block with its covariance (plus a ridge of
    ``1e-10`` times the block's mean variance), and takes the SVD of the whitened
    cross-covariance. The first ``n_components`` canonical variates
    ``U1 = Z1c W1`` and ``U2 = Z2c W2`` are then scored with
    ``mcc(U1, U2, method)``. The CCA is exact (closed form), not iterative.

    The score is invariant to any invertible linear map (and translation) of either
    input, so ``weak_mcc(Z, Z @ M) == 1`` for invertible ``M``.

    Parameters
    ----------
    Z1 : array-like of shape (n_samples, d1)
    Z2 : array-like of shape (n_samples, d2)
    n_components : int, optional
        Number of canonical pairs, in ``[1, min(d1, d2)]``; default ``min(d1, d2)``.
    method : {"pearson", "spearman"}, default="spearman"
        Correlation used on the canonical variates (the paper uses Spearman).
    split : float in (0, 1), optional
        ``None`` (default): fit the CCA and score on the same rows, as in the paper.
        This in-sample score is biased upward (independent noise scores above 0,
        more so for small ``n_samples`` or large dimension). A float: shuffle the
        rows, fit the CCA on this fraction of them and score the canonical variates
        on the rest (out-of-sample, near 0 for independent inputs).
    random_state : int, Generator or None, default=None
        Seeds the shuffle when ``split`` is given; unused otherwise.

    Returns
    -------
    float
        Weak MCC in [0, 1].

    Raises
    ------
    DataError
        If the inputs are malformed (see :func:`mcc`), too few rows remain on either
        side of ``split``, or a block is constant.
    ValueError
        If ``method``, ``n_components`` or ``split`` is out of range.
    TypeError
        If ``n_components`` or ``split`` has the wrong type.
    """
    method = _check_method(method)
    A, B = _check_pair(Z1, Z2)
    n, d1 = A.shape
    d2 = B.shape[1]
    max_k = min(d1, d2)
    if n_components is None:
        k = max_k
    elif isinstance(n_components, Integral) and not isinstance(n_components, bool):
        k = int(n_components)
        if not 1 <= k <= max_k:
            raise ValueError(
                f"n_components must lie in [1, min(d1, d2)] = [1, {max_k}]; got {k}."
            )
    else:
        raise TypeError(
            f"n_components must be an int or None; got {type(n_components).__name__}."
        )
    if split is None:
        fit_rows = score_rows = np.arange(n)
    else:
        if isinstance(split, bool) or not isinstance(split, Real):
            raise TypeError(
                f"split must be a float in (0, 1) or None; got {type(split).__name__}."
            )
        if not 0.0 < float(split) < 1.0:
            raise ValueError(
                f"split must be a float in (0, 1) (the fraction of rows used to fit "
                f"the CCA) or None for in-sample; got {split!r}."
            )
        n_fit = int(round(float(split) * n))
        if n_fit < 2 or n - n_fit < 2:
            raise DataError(
                f"split={split!r} of {n} rows leaves {n_fit} rows to fit the CCA and "
                f"{n - n_fit} to score it; each side needs at least 2. Use more rows "
                "or a split closer to 0.5."
            )
        perm = np.random.default_rng(random_state).permutation(n)
        fit_rows, score_rows = perm[:n_fit], perm[n_fit:]
    mean1, mean2 = A[fit_rows].mean(axis=0), B[fit_rows].mean(axis=0)
    W1, W2, _ = _cca_weights(A[fit_rows] - mean1, B[fit_rows] - mean2, k)
    U1 = (A[score_rows] - mean1) @ W1
    U2 = (B[score_rows] - mean2) @ W2
    return float(_match(_abs_corr(U1, U2, method))[0])


def cross_seed_mcc(
    latents: list[ArrayLike],
    method: str = "pearson",
    *,
    weak: bool = False,
) -> dict:
    """Agreement between the latents of several runs (seeds), for real data.

    Scores every unordered pair of runs with :func:`mcc` (or in-sample
    :func:`weak_mcc` when ``weak=True``). The paper's Table 3 uses Pearson
    :func:`mcc` for MTLCM latents and ``weak=True, method="spearman"`` for MTRN
    features.

    Parameters
    ----------
    latents : sequence of array-like, each of shape (n_samples, d_s)
        One latent matrix per run, at least 2, rows aligned across runs.
    method : {"pearson", "spearman"}, default="pearson"
    weak : bool, default=False
        Use :func:`weak_mcc` (CCA to ``min`` of the two widths) instead of
        :func:`mcc`.

    Returns
    -------
    dict
        ``"mean"`` (float) and ``"std"`` (float, population std, ``ddof=0``) of the
        pair scores, and ``"pairs"``: list of ``((i, j), score)`` for ``i < j``, in
        lexicographic order; there are ``n_runs * (n_runs - 1) / 2`` of them.

    Raises
    ------
    TypeError
        If ``latents`` is not a sequence of arrays.
    DataError
        If fewer than 2 runs are given or a run is malformed or has a different
        number of rows.
    """
    method = _check_method(method)
    if isinstance(latents, np.ndarray) and latents.ndim == 3:
        latents = list(latents)
    if not isinstance(latents, (list, tuple)):
        raise TypeError(
            "latents must be a list of arrays of shape (n_samples, d), one per seed; "
            f"got {type(latents).__name__}."
        )
    if len(latents) < 2:
        raise DataError(
            f"latents must hold at least 2 runs to compare; got {len(latents)}."
        )
    arrays = [
        check_array(Z, f"latents[{i}]", min_rows=2) for i, Z in enumerate(latents)
    ]
    n = arrays[0].shape[0]
    for i, Z in enumerate(arrays[1:], start=1):
        if Z.shape[0] != n:
            raise DataError(
                f"Every run must have the same number of rows (samples in the same "
                f"order); latents[0] has shape {arrays[0].shape} but latents[{i}] has "
                f"shape {Z.shape}."
            )
    score = (
        (lambda a, b: weak_mcc(a, b, method=method))
        if weak
        else (lambda a, b: mcc(a, b, method))
    )
    pairs = [
        ((i, j), float(score(arrays[i], arrays[j])))
        for i, j in combinations(range(len(arrays)), 2)
    ]
    values = np.array([s for _, s in pairs])
    return {"mean": float(values.mean()), "std": float(values.std()), "pairs": pairs}
