"""Recovery of the per-task causal indicators after matching latents.

Estimated latents are identified only up to permutation (and sign/scale), so the
estimated causal indicators are compared with the truth after permuting their
columns with the matching of the latents (mtlcm_reference.md section 3.6).
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.stats import rankdata

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.metrics._mcc import mcc
from identrep.utils.validation import check_array

__all__ = ["causal_accuracy", "causal_scores", "match_latents"]


def match_latents(
    Z_true: ArrayLike, Z_hat: ArrayLike, method: str = "pearson"
) -> np.ndarray:
    """Match estimated latents to true ones by pooled Hungarian matching.

    One matching over all samples (all tasks pooled), maximising the summed absolute
    correlation, as in :func:`~identrep.metrics.mcc`.

    Parameters
    ----------
    Z_true : array-like of shape (n_samples, d_true)
    Z_hat : array-like of shape (n_samples, d_hat)
    method : {"pearson", "spearman"}, default="pearson"

    Returns
    -------
    ndarray of shape (d_true,), int64
        ``matching[j]`` is the column of ``Z_hat`` matched to true latent ``j``, or
        -1 if it is unmatched (only possible when ``d_hat < d_true``).

    Raises
    ------
    DataError, ValueError
        As :func:`~identrep.metrics.mcc`.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.random.default_rng(0).normal(size=(50, 3))
    >>> match_latents(Z, Z[:, [2, 0, 1]]).tolist()
    [1, 2, 0]
    """
    return mcc(Z_true, Z_hat, method, return_matching=True)[1]


def _aligned_indicators(
    causal_true: ArrayLike,
    causal_hat: ArrayLike,
    matching: ArrayLike,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate; return truth (T, d) as bool and probabilities (T, d) in true order.

    Unmatched true latents (``matching[j] == -1``) get probability 0.
    """
    C = check_array(causal_true, "causal_true")
    P = check_array(causal_hat, "causal_hat")
    if not np.all((C == 0) | (C == 1)):
        bad = C[(C != 0) & (C != 1)]
        raise DataError(
            f"causal_true must contain only 0 and 1; got {bad.size} other value(s) "
            f"such as {bad[0]!r}."
        )
    if P.min() < 0 or P.max() > 1:
        raise DataError(
            "causal_hat must hold probabilities in [0, 1]; got values in "
            f"[{P.min():.4g}, {P.max():.4g}]. Apply a sigmoid to logits first."
        )
    if P.shape[0] != C.shape[0]:
        raise DataError(
            "causal_true and causal_hat must have one row per task, in the same "
            f"order; got causal_true of shape {C.shape} and causal_hat of shape "
            f"{P.shape}."
        )
    d, d_hat = C.shape[1], P.shape[1]
    m = np.asarray(matching)
    if m.ndim != 1 or m.shape[0] != d:
        raise DataError(
            f"matching must have shape ({d},) (one entry per column of causal_true, "
            f"as returned by match_latents); got shape {m.shape}."
        )
    if m.dtype.kind not in "iu":
        raise TypeError(f"matching must hold integers; got dtype {m.dtype}.")
    if np.any((m < -1) | (m >= d_hat)):
        raise DataError(
            f"matching entries must be column indices of causal_hat in [0, {d_hat}) "
            f"or -1 for unmatched; got {m.tolist()}."
        )
    used = m[m >= 0]
    if np.unique(used).size != used.size:
        raise DataError(
            "matching must map distinct true latents to distinct columns of "
            f"causal_hat; got repeated entries in {m.tolist()}."
        )
    if isinstance(threshold, bool) or not isinstance(threshold, Real):
        raise TypeError(
            f"threshold must be a float in [0, 1]; got {type(threshold).__name__}."
        )
    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1]; got {threshold!r}.")
    aligned = np.zeros_like(C)
    aligned[:, m >= 0] = P[:, used]
    return C.astype(bool), aligned


def causal_accuracy(
    causal_true: ArrayLike,
    causal_hat: ArrayLike,
    matching: ArrayLike,
    threshold: float = 0.5,
) -> float:
    """Fraction of (task, latent) causal indicators recovered after matching.

    Parameters
    ----------
    causal_true : array-like of shape (n_tasks, d_true)
        True indicators, 0/1 (``causal_true[t, j] = 1`` if latent ``j`` causes the
        target of task ``t``).
    causal_hat : array-like of shape (n_tasks, d_hat)
        Estimated probabilities in [0, 1], columns in the estimated latents' order.
    matching : array-like of shape (d_true,), int
        As returned by :func:`match_latents`: ``matching[j]`` is the column of
        ``causal_hat`` for true latent ``j`` (-1: unmatched, predicted non-causal).
    threshold : float in [0, 1], default=0.5
        An entry is predicted causal when its probability is ``>= threshold``.

    Returns
    -------
    float
        Mean over the ``n_tasks * d_true`` entries of ``predicted == true``.

    Raises
    ------
    DataError
        If ``causal_true`` is not 0/1, ``causal_hat`` is outside [0, 1], the task
        counts differ, or ``matching`` is malformed.
    """
    return causal_scores(causal_true, causal_hat, matching, threshold)["accuracy"]


def _auroc(truth: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney AUROC (ties count one half); NaN if one class is absent."""
    n_pos = int(truth.sum())
    n_neg = truth.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[truth].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _ratio(num: int, den: int) -> float:
    return float(num / den) if den else float("nan")


def causal_scores(
    causal_true: ArrayLike,
    causal_hat: ArrayLike,
    matching: ArrayLike,
    threshold: float = 0.5,
) -> dict[str, float]:
    """Classification scores of the recovered causal indicators after matching.

    Parameters
    ----------
    causal_true, causal_hat, matching, threshold
        As in :func:`causal_accuracy`.

    Returns
    -------
    dict of str to float
        Over all ``n_tasks * d_true`` entries, with causal = positive:

        * ``"accuracy"`` -- as :func:`causal_accuracy`;
        * ``"precision"`` -- TP / (TP + FP), NaN if nothing is predicted causal;
        * ``"recall"`` -- TP / (TP + FN), NaN if nothing is truly causal;
        * ``"f1"`` -- 2 TP / (2 TP + FP + FN), NaN if both are empty;
        * ``"exact_set_rate"`` -- fraction of tasks whose whole predicted causal set
          equals the true one;
        * ``"auroc"`` -- area under the ROC curve of the probabilities (Mann-Whitney
          statistic, ties count one half), threshold-free; NaN if every entry is
          causal or none is.

    Raises
    ------
    DataError
        As :func:`causal_accuracy`.
    """
    truth, prob = _aligned_indicators(causal_true, causal_hat, matching, threshold)
    pred = prob >= threshold
    tp = int(np.sum(pred & truth))
    fp = int(np.sum(pred & ~truth))
    fn = int(np.sum(~pred & truth))
    return {
        "accuracy": float(np.mean(pred == truth)),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "exact_set_rate": float(np.mean(np.all(pred == truth, axis=1))),
        "auroc": _auroc(truth.ravel(), prob.ravel()),
    }
