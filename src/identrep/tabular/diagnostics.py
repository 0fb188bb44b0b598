"""What the report of a table fit checks and measures (numbers, no text layout).

* :func:`heldout_r2`: R^2 of every task on the observations MTRN held out for
  early stopping (never trained on);
* :func:`causal_stability`: how often each task's causal set is the same across
  seeds, after matching every seed's latents to the first seed's;
* :func:`input_correlations`: the inputs each latent correlates with most;
* :func:`degenerate_findings`: causal maps and latents a researcher must not read
  as an ordinary result (latents that cause every task or none, tasks caused by
  every latent, constant or duplicated latents).
"""

from __future__ import annotations

import numpy as np

from identrep.utils.numerics import causal_mask, r2_per_task

__all__ = [
    "causal_stability",
    "degenerate_findings",
    "heldout_r2",
    "input_correlations",
]

#: Two latents whose |correlation| exceeds this are reported as duplicates.
DUPLICATE_CORRELATION = 0.99


def heldout_r2(mtrn, X, y, task_ids) -> np.ndarray | None:
    """R^2 of every task on MTRN's held-out validation observations.

    Parameters
    ----------
    mtrn : fitted MTRN
        With ``validation_index_`` (the observations held out from training).
    X, y, task_ids
        The arguments ``mtrn`` was fitted with (wide: ``task_ids`` None).

    Returns
    -------
    ndarray of shape (n_tasks,) in the order of ``mtrn.tasks_``, or None
        NaN for a task with fewer than 2 held-out observations; None when the
        model kept no validation split.
    """
    from identrep.utils.validation import check_multitask

    val = getattr(mtrn, "validation_index_", None)
    if val is None or len(val) == 0:
        return None
    data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
    rows, codes = data.rows[val], data.task_ids[val]
    pred = mtrn.predict(X)[rows, codes]  # X as fitted (named columns)
    return r2_per_task(data.y[val], pred, codes, data.n_tasks)


def causal_stability(indicators: list, latents: list) -> dict | None:
    """Agreement of the causal sets across seeds.

    Every seed's latents are matched to the first seed's (pooled Hungarian
    matching of absolute Pearson correlations), its causal map permuted
    accordingly, then compared with the first seed's, task by task.

    Parameters
    ----------
    indicators : list of ndarray of shape (n_tasks, n_latents)
        Causal indicators of every seed.
    latents : list of ndarray of shape (n_units, n_latents)
        Latents of every seed, rows aligned.

    Returns
    -------
    dict or None (one seed)
        ``task_agreement`` (n_tasks,): fraction of the other seeds whose causal
        set of the task equals the first seed's; ``entry_agreement``: fraction of
        (seed, task, latent) entries that agree; ``identical_tasks``: number of
        tasks whose set is the same in every seed.
    """
    from identrep.metrics import match_latents

    if len(latents) < 2:
        return None
    ref = causal_mask(indicators[0])
    same_sets, same_entries = [], []
    for C, Z in zip(indicators[1:], latents[1:], strict=True):
        perm = match_latents(latents[0], Z)
        mask = causal_mask(C)[:, perm]
        same_entries.append(mask == ref)
        same_sets.append((mask == ref).all(axis=1))
    task_agreement = np.mean(same_sets, axis=0)
    return {
        "task_agreement": task_agreement,
        "entry_agreement": float(np.mean(same_entries)),
        "identical_tasks": int((task_agreement == 1.0).sum()),
    }


def input_correlations(Z: np.ndarray, X: np.ndarray, top: int = 3) -> list:
    """The inputs each latent correlates with most.

    Parameters
    ----------
    Z : ndarray of shape (n_units, n_latents)
    X : ndarray of shape (n_units, n_features)
    top : int
        Inputs listed per latent.

    Returns
    -------
    list of n_latents lists of (feature index, Pearson r), strongest |r| first
        Constant columns correlate 0.
    """
    Zc, Xc = Z - Z.mean(0), X - X.mean(0)
    zs, xs = np.linalg.norm(Zc, axis=0), np.linalg.norm(Xc, axis=0)
    R = (Zc.T @ Xc) / np.outer(
        np.where(zs > 0, zs, np.inf), np.where(xs > 0, xs, np.inf)
    )
    order = np.argsort(-np.abs(R), axis=1, kind="stable")[:, :top]
    return [[(int(j), float(R[k, j])) for j in order[k]] for k in range(len(R))]


def degenerate_findings(C: np.ndarray, Z: np.ndarray) -> list[str]:
    """Sentences naming what makes a causal map or the latents degenerate.

    Parameters
    ----------
    C : ndarray of shape (n_tasks, n_latents)
        Causal indicators.
    Z : ndarray of shape (n_units, n_latents)
        Latents.

    Returns
    -------
    list of str
        Empty for an ordinary result.
    """
    T, K = C.shape
    causal = causal_mask(C)
    usage = causal.sum(axis=0)
    out = []
    every, never = np.flatnonzero(usage == T), np.flatnonzero(usage == 0)
    if T > 1 and every.size > K / 2:
        out.append(
            f"{every.size} of {K} latents cause all {T} tasks: the causal map does "
            "not tell the tasks apart. Fewer latents (--n-latents), more seeds, or "
            "tasks that differ in their causes are needed before reading it."
        )
    elif T > 1 and every.size:
        out.append(f"Latent(s) {_names(every)} cause all {T} tasks.")
    if never.size:
        out.append(
            f"Latent(s) {_names(never)} cause no task: they only describe effects "
            "of the targets (or noise)."
        )
    full = int((causal.sum(axis=1) == K).sum())
    if K > 1 and full:
        out.append(f"{full} of {T} task(s) are caused by every latent.")
    sd = Z.std(axis=0)
    flat = np.flatnonzero(sd <= 1e-8 * max(float(np.abs(Z).max()), 1e-300))
    if flat.size:
        out.append(f"Latent(s) {_names(flat)} are constant across inputs.")
    live = np.flatnonzero(sd > 0)
    if live.size > 1:
        R = np.abs(np.corrcoef(Z[:, live].T))
        i, j = np.nonzero(np.triu(R, 1) > DUPLICATE_CORRELATION)
        if i.size:
            pairs = ", ".join(
                f"z{live[a]}~z{live[b]}" for a, b in zip(i, j, strict=True)
            )
            out.append(
                f"Latents nearly duplicate each other (|r| > "
                f"{DUPLICATE_CORRELATION}): {pairs}; the data support fewer latents."
            )
    return out


def _names(idx) -> str:
    shown = ", ".join(f"z{j}" for j in idx[:10])
    return shown + (f" (+{len(idx) - 10} more)" if len(idx) > 10 else "")
