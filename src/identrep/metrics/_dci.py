"""DCI: disentanglement, completeness and informativeness (Eastwood & Williams, 2018).

Pure numpy and scikit-learn (DESIGN.md section 6). An importance matrix R (n_codes x
n_factors), R_ij >= 0 the importance of code i for predicting factor j, comes from
one regressor per factor fitted on training points; then

* disentanglement: D_i = 1 - H_{n_factors}(P_i.), P_ij = R_ij / sum_k R_ik, and
  D = sum_i rho_i D_i with code weights rho_i = sum_j R_ij / sum_ij R_ij;
* completeness: C_j = 1 - H_{n_codes}(P~_.j), P~_ij = R_ij / sum_k R_kj, and
  C = sum_j rho~_j C_j with factor weights rho~_j = sum_i R_ij / sum_ij R_ij;
* informativeness: the regressors' error on held-out points (normalised RMSE per
  factor, the original paper's; 0 is perfect, about 1 is chance).

Entropies H_K are in base K (so D_i, C_j lie in [0, 1]); with a single factor
(code) D (C) is 1 by convention. :func:`dci_from_importances` is the formula;
:func:`dci` fits the regressors (lasso or gradient-boosted trees) and evaluates the
informativeness on held-out points.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError
from identrep.utils._param_validation import Interval, StrOptions, validate_params
from identrep.utils.seeding import check_random_state
from identrep.utils.validation import check_array

__all__ = ["dci", "dci_from_importances"]


def _entropy_1_minus(P: np.ndarray, base: int) -> np.ndarray:
    """1 - H_base of every row of the row-stochastic ``P`` (0 log 0 = 0)."""
    if base <= 1:
        return np.ones(P.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(P > 0, np.log(P), 0.0)
    return 1.0 + (P * logs).sum(axis=1) / np.log(base)


def _weighted_score(R: np.ndarray) -> float:
    """sum_i rho_i (1 - H(P_i.)) over the rows of R (rows of zero weight drop)."""
    row = R.sum(axis=1)
    total = row.sum()
    keep = row > 0
    P = R[keep] / row[keep, None]
    return float((row[keep] / total) @ _entropy_1_minus(P, R.shape[1]))


def dci_from_importances(R: ArrayLike) -> dict[str, float]:
    """Disentanglement and completeness of an importance matrix.

    Parameters
    ----------
    R : array-like of shape (n_codes, n_factors)
        Non-negative importances, ``R[i, j]`` of code i for factor j.

    Returns
    -------
    dict
        ``disentanglement`` and ``completeness``, floats in [0, 1]. Both are 1 for
        a (scaled, permuted) diagonal R; D is 0 when every code is equally
        important for every factor, C is 0 when every factor is spread evenly over
        all codes. Invariant to permuting codes or factors and to scaling R.

    Raises
    ------
    DataError
        Negative or non-finite entries, or an all-zero R.

    Examples
    --------
    >>> dci_from_importances(np.eye(3))
    {'disentanglement': 1.0, 'completeness': 1.0}
    """
    R = check_array(R, "R")
    if (R < 0).any():
        raise DataError(
            "R must be non-negative (importances); got a minimum of "
            f"{R.min():.3g}. Pass absolute coefficients or feature importances."
        )
    if R.sum() <= 0:
        raise DataError(
            "R is all zeros: no code is important for any factor, so D and C are "
            "undefined."
        )
    return {
        "disentanglement": _weighted_score(R),
        "completeness": _weighted_score(R.T),
    }


def _standardize(A: np.ndarray, ref: np.ndarray) -> np.ndarray:
    sd = ref.std(axis=0)
    return (A - ref.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _importances(Zh_tr, Zt_tr, Zh_te, Zt_te, importance, alpha, seed):
    """R (n_codes, n_factors) and the held-out NRMSE of each factor."""
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Lasso

    R = np.zeros((Zh_tr.shape[1], Zt_tr.shape[1]))
    err = np.zeros(Zt_tr.shape[1])
    for j in range(Zt_tr.shape[1]):
        if importance == "lasso":
            reg = Lasso(alpha=alpha).fit(Zh_tr, Zt_tr[:, j])
            R[:, j] = np.abs(reg.coef_)
        else:
            reg = GradientBoostingRegressor(random_state=seed).fit(Zh_tr, Zt_tr[:, j])
            R[:, j] = reg.feature_importances_
        resid = reg.predict(Zh_te) - Zt_te[:, j]
        err[j] = np.sqrt(np.mean(resid**2))  # factors are standardised: NRMSE
    return R, err


@validate_params(
    {
        "importance": [StrOptions({"lasso", "gbt"})],
        "n_test": [Interval(Integral, 1, None, closed="left"), None],
        "test_fraction": [Interval(Real, 0, 1, closed="neither")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
)
def dci(
    Z_true: ArrayLike,
    Z_hat: ArrayLike,
    *,
    importance: str = "gbt",
    n_test: int | None = None,
    test_fraction: float = 0.5,
    alpha: float = 0.02,
    random_state: Seed = 0,
) -> dict:
    """DCI of a learned representation against the true factors.

    The rows are split at random into training points (to fit one regressor per
    true factor on the learned codes) and held-out points (to score its error).
    Codes and factors are standardised with the training points' statistics.

    Parameters
    ----------
    Z_true : array-like of shape (n_samples, n_factors)
        True factors.
    Z_hat : array-like of shape (n_samples, n_codes)
        Learned codes (e.g. ``transform`` output).
    importance : {"gbt", "lasso"}, default="gbt"
        "gbt": ``GradientBoostingRegressor`` feature importances (the Sparse VAE
        authors' choice, non-linear factors); "lasso": |coefficients| of a
        ``Lasso(alpha)`` (the original paper's linear choice).
    n_test : int, optional
        Number of held-out points; default ``test_fraction`` of the rows. Use at
        least 1,000 for stable scores (the authors' code used 16).
    test_fraction : float, default=0.5
    alpha : float, default=0.02
        Lasso penalty (on standardised data).
    random_state : int, Generator or None, default=0
        Seeds the split and the boosted trees.

    Returns
    -------
    dict
        ``disentanglement``, ``completeness`` (floats in [0, 1]),
        ``informativeness`` (mean held-out NRMSE over factors, lower is better),
        ``nrmse`` (ndarray of shape (n_factors,)), ``importances`` (R, of shape
        (n_codes, n_factors)), ``n_train`` and ``n_test``.

    Raises
    ------
    DataError
        Row counts that differ, too few rows to split, non-finite values, or codes
        that carry no importance at all (e.g. constant codes).

    References
    ----------
    Eastwood, C. and Williams, C. K. I. (2018). A framework for the quantitative
    evaluation of disentangled representations. ICLR.
    """
    Zt = check_array(Z_true, "Z_true")
    Zh = check_array(Z_hat, "Z_hat")
    n = Zt.shape[0]
    if Zh.shape[0] != n:
        raise DataError(
            f"Z_true and Z_hat must have the same number of rows; got {n} and "
            f"{Zh.shape[0]}."
        )
    n_te = int(round(test_fraction * n)) if n_test is None else int(n_test)
    if not 1 <= n_te <= n - 2:
        raise DataError(
            f"dci needs at least 2 training and 1 held-out rows; got n_test={n_te} "
            f"of {n} rows. Pass more rows or a smaller n_test."
        )
    rng = check_random_state(random_state)
    perm = rng.permutation(n)
    te, tr = perm[:n_te], perm[n_te:]
    seed = int(rng.integers(2**31 - 1))
    Zh_tr, Zh_te = _standardize(Zh[tr], Zh[tr]), _standardize(Zh[te], Zh[tr])
    Zt_tr, Zt_te = _standardize(Zt[tr], Zt[tr]), _standardize(Zt[te], Zt[tr])
    R, err = _importances(Zh_tr, Zt_tr, Zh_te, Zt_te, importance, alpha, seed)
    if R.sum() <= 0:
        raise DataError(
            "No learned code is important for any true factor (all importances are "
            "0): Z_hat is constant or carries no information; DCI is undefined."
        )
    scores = dci_from_importances(R)
    return {
        **scores,
        "informativeness": float(err.mean()),
        "nrmse": err,
        "importances": R,
        "n_train": int(tr.size),
        "n_test": int(te.size),
    }
