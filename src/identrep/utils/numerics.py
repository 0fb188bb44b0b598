"""Small numerical rules that several parts of identrep share, each in one place.

* :func:`safe_scale`: a population std with (numerically) zero entries replaced by
  1, the rule every standardisation uses;
* :func:`column_moments` and :func:`task_moments`: mean and :func:`safe_scale`
  of columns or of every task's values, exact for any magnitude a float64 holds
  (no overflow of sums or squares at 1e300, no underflow at 1e-300);
* :func:`r2_per_task`: R^2 of every task about its own mean;
* :func:`causal_mask`: indicators to causal sets, with the one threshold rule
  (``c >= threshold``, :data:`CAUSAL_THRESHOLD` = 0.5 by default).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CAUSAL_THRESHOLD",
    "causal_mask",
    "column_moments",
    "r2_per_task",
    "safe_scale",
    "task_moments",
]

#: An indicator at or above this value calls a latent a cause of the task.
CAUSAL_THRESHOLD = 0.5

# relative floor under which a std counts as zero (float64 round-off of the mean)
_STD_FLOOR = 1e-12


def safe_scale(sd: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``sd`` with entries at or below ``1e-12 * max(|mean|, 1)`` replaced by 1.

    A coordinate that is constant up to round-off is then left unscaled (divided by
    1) instead of blown up by 1 / round-off.

    Parameters
    ----------
    sd, mean : ndarray of the same shape
        Population standard deviations and the means they were computed about.
    """
    sd, mean = np.asarray(sd, dtype=float), np.asarray(mean, dtype=float)
    return np.where(sd > _STD_FLOOR * np.maximum(np.abs(mean), 1.0), sd, 1.0)


def _unit(m: np.ndarray) -> np.ndarray:
    """Largest magnitudes as divisors: 0 (an all-zero group) becomes 1."""
    return np.where(m > 0, m, 1.0)


def column_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standardising scale of every column, for any float64 magnitude.

    Each column is divided by its largest magnitude before the moments are taken
    and the result multiplied back, so neither the sum (n values near 1e306) nor
    the squares (values near 1e200) overflow, and tiny values (1e-300) do not
    underflow when squared.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    mean : ndarray of shape (n_features,)
    scale : ndarray of shape (n_features,)
        The population std through :func:`safe_scale`; a (numerically) constant
        column gets its largest magnitude (1 for an all-zero column), so its
        standardised values stay near 0 in any units.
    """
    X = np.asarray(X, dtype=float)
    unit = _unit(np.abs(X).max(axis=0)) if X.shape[0] else np.ones(X.shape[1])
    Xu = X / unit
    mean_u = Xu.mean(axis=0)
    sd_u = np.sqrt(((Xu - mean_u) ** 2).mean(axis=0))
    return mean_u * unit, safe_scale(sd_u, mean_u) * unit


def task_moments(
    y: np.ndarray, task_ids: np.ndarray, n_tasks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standardising scale of every task's values, for any magnitude.

    As :func:`column_moments`, per task: ``y`` is divided by each task's largest
    magnitude before the moments are taken.

    Parameters
    ----------
    y : ndarray of shape (n_obs,)
    task_ids : ndarray of shape (n_obs,)
        Integer codes in ``[0, n_tasks)``; every task has at least one value.
    n_tasks : int

    Returns
    -------
    mean, scale : ndarray of shape (n_tasks,)
    """
    t = np.asarray(task_ids)
    y = np.asarray(y, dtype=float)
    unit = np.zeros(n_tasks)
    np.maximum.at(unit, t, np.abs(y))
    unit = _unit(unit)
    yu = y / unit[t]
    n = np.maximum(np.bincount(t, minlength=n_tasks), 1)
    mean_u = np.bincount(t, yu, n_tasks) / n
    sd_u = np.sqrt(np.bincount(t, (yu - mean_u[t]) ** 2, n_tasks) / n)
    return mean_u * unit, safe_scale(sd_u, mean_u) * unit


def r2_per_task(
    y: np.ndarray, y_pred: np.ndarray, task_ids: np.ndarray, n_tasks: int
) -> np.ndarray:
    """Coefficient of determination of every task about its own mean.

    R^2_t = 1 - sum_i (y_i - y_pred_i)^2 / sum_i (y_i - mean_t(y))^2 over the
    observations of task t.

    Parameters
    ----------
    y, y_pred : ndarray of shape (n_obs,)
    task_ids : ndarray of shape (n_obs,)
        Integer task codes in ``[0, n_tasks)``.
    n_tasks : int

    Returns
    -------
    ndarray of shape (n_tasks,)
        NaN for a task with fewer than 2 observations or a constant target.
    """
    t = np.asarray(task_ids)
    n = np.bincount(t, minlength=n_tasks)
    mean = np.bincount(t, y, n_tasks) / np.maximum(n, 1)
    ss_tot = np.bincount(t, (y - mean[t]) ** 2, n_tasks)
    ss_res = np.bincount(t, (y - y_pred) ** 2, n_tasks)
    ok = (n >= 2) & (ss_tot > 0)
    out = np.full(n_tasks, np.nan)
    out[ok] = 1.0 - ss_res[ok] / ss_tot[ok]
    return out


def causal_mask(indicators: np.ndarray, threshold: float = CAUSAL_THRESHOLD):
    """Boolean causal sets from indicators in [0, 1]: ``indicators >= threshold``."""
    return np.asarray(indicators) >= threshold
