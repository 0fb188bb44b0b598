"""MTLCM's ``sigma_s="auto"``: sigma_s chosen by held-out likelihood.

Each candidate of the grid is fitted on a seeded 80 % of every task's observations
and scored by the mean log-likelihood per observation of the other 20 %
(:meth:`MTLCM.score`, the exact marginal likelihood with the intercepts learned on
the training rows). The best candidate is then refitted on all rows by the caller.
No ground truth is used.

Why: sigma_s fixes the floor of a spurious latent's variance given y. At the paper's
0.1 the likelihood stretches the recovered latents' columns (1.4-1.9x the true
scale on Chen et al.'s Table 1 at d >= 10), which turns causal latents into false
positives; a smaller value removes the stretch there but can shrink the latents at
d = 3 (docs/results/chen2024_indicators.md). Held-out likelihood picks between them
per data set.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from identrep.exceptions import DataError
from identrep.utils.seeding import check_random_state
from identrep.utils.validation import check_multitask

__all__ = ["HELDOUT_FRACTION", "MIN_TASK_OBS", "base_seed", "select_sigma_s"]

HELDOUT_FRACTION = 0.2  # of each task's observations, scored
MIN_TASK_OBS = 3  # 2 to fit (MTLCM's minimum) + 1 to score
_SPLIT_STREAM = 0x51A5  # separates the split's random stream from the fits' seed


def base_seed(random_state) -> int:
    """The one integer seed of every fit in the selection and of the refit: the
    int itself when ``random_state`` is an int (so the refit equals a plain fit at
    the chosen value with that seed), else a draw from ``random_state``."""
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).integers(0, 2**32 - 1))


def _label(lab):
    return lab.item() if isinstance(lab, np.generic) else lab


def heldout_split(data, seed: int, fraction: float = HELDOUT_FRACTION) -> np.ndarray:
    """Boolean mask over ``data``'s observations: in every task, round(fraction n)
    of its n observations (at least 1) drawn without replacement, seeded.

    Raises :class:`DataError` when a task has fewer than :data:`MIN_TASK_OBS`
    observations, or when its training observations would have a constant target.
    """
    counts = data.counts()
    few = np.flatnonzero(counts < MIN_TASK_OBS)
    if few.size:
        lab = _label(data.tasks[few[0]])
        raise DataError(
            f"MTLCM(sigma_s='auto') holds out {HELDOUT_FRACTION:.0%} of each task's "
            f"observations to choose sigma_s and needs at least {MIN_TASK_OBS} per "
            f"task (2 to fit, 1 to score); task {lab!r} has {int(counts[few[0]])}"
            + (f" ({few.size} such tasks)" if few.size > 1 else "")
            + ". Pass a number for sigma_s (e.g. 0.03), or drop such tasks."
        )
    rng = np.random.default_rng([seed, _SPLIT_STREAM])
    order = np.argsort(data.task_ids, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    val = np.zeros(data.n_obs, dtype=bool)
    for k in range(data.n_tasks):
        obs = order[starts[k] : starts[k + 1]]
        n_val = min(max(1, int(round(fraction * obs.size))), obs.size - 2)
        val[rng.permutation(obs)[:n_val]] = True
    # a training target that no longer varies would fail the candidate fits
    tr = ~val
    lo = np.full(data.n_tasks, np.inf)
    hi = np.full(data.n_tasks, -np.inf)
    np.minimum.at(lo, data.task_ids[tr], data.y[tr])
    np.maximum.at(hi, data.task_ids[tr], data.y[tr])
    const = np.flatnonzero(hi <= lo)
    if const.size:
        lab = _label(data.tasks[const[0]])
        raise DataError(
            f"MTLCM(sigma_s='auto'): after holding out {HELDOUT_FRACTION:.0%} of "
            f"its observations, task {lab!r} has a constant target on the rest, so "
            "the candidates cannot be fitted. Pass a number for sigma_s (e.g. "
            "0.03), or give the task more varied targets."
        )
    return val


def _subset(data, mask):
    """(X, y, task_ids) in the input's layout for the observations in ``mask``:
    long -> rows with integer task codes; wide -> the rows that have an observation
    in ``mask`` and a target matrix with NaN elsewhere (no row copied per task)."""
    if data.layout == "long":
        return data.X[data.rows[mask]], data.y[mask], data.task_ids[mask]
    Y = np.full((data.X.shape[0], data.n_tasks), np.nan)
    Y[data.rows[mask], data.task_ids[mask]] = data.y[mask]
    keep = np.flatnonzero(~np.isnan(Y).all(axis=1))
    return data.X[keep], Y[keep], None


def select_sigma_s(make_model, X, y, task_ids, grid, seed: int):
    """Fit ``make_model(s)`` for every s in ``grid`` on the training split and
    return ``(chosen s, held-out scores in grid order)``; ties go to the earlier
    candidate."""
    data = check_multitask(X, y, task_ids, min_samples=2, check_constant=True)
    val = heldout_split(data, seed)
    X_tr, y_tr, t_tr = _subset(data, ~val)
    X_va, y_va, t_va = _subset(data, val)
    scores = np.empty(len(grid))
    for i, s in enumerate(grid):
        model = make_model(float(s)).fit(X_tr, y_tr, task_ids=t_tr)
        scores[i] = model.score(X_va, y_va, task_ids=t_va)
    if not np.isfinite(scores).any():
        raise DataError(
            "MTLCM(sigma_s='auto'): no candidate of sigma_s_grid "
            f"{tuple(float(s) for s in grid)} has a finite held-out log-likelihood "
            f"({scores.tolist()}). Pass a number for sigma_s."
        )
    best = int(np.nanargmax(np.where(np.isfinite(scores), scores, np.nan)))
    return float(grid[best]), scores
