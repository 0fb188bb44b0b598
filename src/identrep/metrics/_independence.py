"""Within-task tests of independence between each recovered latent and the target.

The cross-check of Chen et al. (2024): the causal indicators learned by MTLCM are
compared with a conditional-independence test run on the recovered latents. Here the
test is, for every task t and latent j, a correlation test of H0: z_j independent of
y given the task (Pearson, or Spearman on within-task ranks), with a multiple-testing
correction over all n_tasks x n_latents tests.

Caveat for the Table 1 process (``make_linear_tasks``): there y = w^T z_causal +
noise, so a causal latent is correlated with y within its task too (correlation
|w_j| / sqrt(|w|^2 + sigma_t^2), about 0.3 on average for k = 2 and sigma_t in
[2, 3]); "dependent on y" is then not the same as "spurious". The test measures
dependence only; how it relates to the indicators is for the caller to judge.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.stats import rankdata
from scipy.stats import t as student_t

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.utils.validation import check_array, encode_task_ids

__all__ = ["conditional_independence_test"]

_METHODS = ("pearson", "spearman")
_CORRECTIONS = ("bonferroni", "bh", "none")


def _benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """BH-adjusted p-values (step-up, monotone, capped at 1) of a flat array."""
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def _corr_pvalues(Zt: np.ndarray, yt: np.ndarray) -> np.ndarray:
    """Two-sided p-values of the correlation of each column of Zt with yt (t-test
    with n - 2 degrees of freedom; a constant column gets p = 1)."""
    n = yt.shape[0]
    Zc = Zt - Zt.mean(axis=0)
    yc = yt - yt.mean()
    nz = np.sqrt((Zc**2).sum(axis=0))
    ny = np.sqrt((yc**2).sum())
    scale = np.sqrt(n) * np.maximum(np.abs(Zt).max(axis=0), 1e-300)
    const = nz <= 1e-12 * scale
    r = (Zc.T @ yc) / np.where(const, 1.0, nz * ny)
    r = np.clip(np.where(const, 0.0, r), -1.0, 1.0)
    with np.errstate(divide="ignore"):
        stat = np.abs(r) * np.sqrt((n - 2) / np.maximum(1.0 - r**2, 0.0))
    return np.minimum(2.0 * student_t.sf(stat, n - 2), 1.0)


def conditional_independence_test(
    z: ArrayLike,
    y: ArrayLike,
    task_ids: ArrayLike,
    alpha: float = 0.05,
    *,
    method: str = "pearson",
    correction: str = "bonferroni",
) -> tuple[np.ndarray, np.ndarray]:
    """Test, per task and latent, whether a recovered latent depends on the target.

    For each task t (the rows with that label) and latent j, the null hypothesis is
    that z_j and y are independent within the task; the test statistic is their
    sample correlation (Pearson, or Spearman: Pearson on within-task ranks) with the
    exact t-test of n_t - 2 degrees of freedom (exact for Gaussian data under H0).

    Parameters
    ----------
    z : array-like of shape (n_samples, n_latents)
        Recovered latents.
    y : array-like of shape (n_samples,)
        Target of each row (long layout).
    task_ids : array-like of shape (n_samples,)
        Task label of each row.
    alpha : float in (0, 1), default=0.05
        Level of the family of all ``n_tasks * n_latents`` tests after correction.
    method : {"pearson", "spearman"}, default="pearson"
    correction : {"bonferroni", "bh", "none"}, default="bonferroni"
        Family-wise (Bonferroni), false-discovery-rate (Benjamini-Hochberg) or no
        correction over all tests.

    Returns
    -------
    dependent : ndarray of shape (n_tasks, n_latents), bool
        True where H0 is rejected (the latent depends on y within the task). Rows
        in the order of ``np.unique(task_ids)``.
    p_values : ndarray of shape (n_tasks, n_latents)
        Corrected p-values (raw ones when ``correction="none"``);
        ``dependent = p_values <= alpha``.

    Raises
    ------
    DataError
        Non-finite values, mismatched lengths, or a task with fewer than 3 samples.
    ValueError
        ``alpha`` outside (0, 1), or an unknown ``method`` or ``correction``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=200)
    >>> z = np.column_stack([rng.normal(size=200), y + 0.1 * rng.normal(size=200)])
    >>> dep, p = conditional_independence_test(z, y, np.repeat([0, 1], 100))
    >>> dep.tolist()
    [[False, True], [False, True]]
    """
    if isinstance(alpha, bool) or not isinstance(alpha, Real):
        raise TypeError(f"alpha must be a float in (0, 1); got {type(alpha).__name__}.")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}.")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}.")
    if correction not in _CORRECTIONS:
        raise ValueError(
            f"correction must be one of {_CORRECTIONS}; got {correction!r}."
        )
    Z = check_array(z, "z")
    yv = check_array(y, "y", ndim=1)
    if yv.shape[0] != Z.shape[0]:
        raise DataError(
            f"y must have one entry per row of z ({Z.shape[0]}); got {yv.shape[0]}."
        )
    codes, labels = encode_task_ids(task_ids, Z.shape[0])
    counts = np.bincount(codes, minlength=len(labels))
    few = np.flatnonzero(counts < 3)
    if few.size:
        raise DataError(
            "Every task needs at least 3 samples for a correlation test; task "
            f"{labels[few[0]].tolist()!r} has {int(counts[few[0]])}. Drop such tasks."
        )
    p = np.empty((len(labels), Z.shape[1]))
    for k in range(len(labels)):
        rows = codes == k
        Zt, yt = Z[rows], yv[rows]
        if method == "spearman":
            Zt, yt = rankdata(Zt, axis=0), rankdata(yt)
        p[k] = _corr_pvalues(Zt, yt)
    if correction == "bonferroni":
        p = np.minimum(p * p.size, 1.0)
    elif correction == "bh":
        p = _benjamini_hochberg(p.ravel()).reshape(p.shape)
    return p <= float(alpha), p
