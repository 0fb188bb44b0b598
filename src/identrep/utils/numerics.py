"""Small numerical rules that several parts of identrep share, each in one place.

* :func:`safe_scale`: a population std with (numerically) zero entries replaced by
  1, the rule every standardisation uses;
* :func:`r2_per_task`: R^2 of every task about its own mean;
* :func:`causal_mask`: indicators to causal sets, with the one threshold rule
  (``c >= threshold``, :data:`CAUSAL_THRESHOLD` = 0.5 by default).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CAUSAL_THRESHOLD", "causal_mask", "r2_per_task", "safe_scale"]

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
