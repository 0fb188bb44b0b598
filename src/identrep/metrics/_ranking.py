"""Top-k ranking metrics for recommendation: Recall@k and NDCG@k (Liang et al., 2018).

Pure numpy/scipy (DESIGN.md section 6). A model scores every item for every user
(``scores``, higher = recommended first); the metrics compare each user's top k
with the user's relevant items (``targets``, 0/1). Two protocols
(:func:`ranking_split`):

* ``"fold_in"`` (VAE-CF's strong generalisation, the default): for each held-out
  user a random ``holdout_fraction`` of the items is hidden; the model sees the
  rest (the fold-in input), the hidden items are the targets, and the fold-in
  items are excluded from the ranking (their scores set to -inf);
* ``"same_rows"`` (the Sparse VAE authors' ``movielens_tables.py``): the input rows
  are also the targets, with nothing excluded. A model that reproduces its input
  scores well here without predicting anything new; kept for replication only.

With ``n_u`` relevant items of user u and the top-k list ``r_1..r_k``:

* ``Recall@k = |top-k ∩ relevant| / min(k, n_u)`` (VAE-CF's normalisation, so a
  perfect ranking scores 1 even when ``n_u > k``);
* ``NDCG@k = DCG@k / IDCG@k``, ``DCG@k = sum_{i<=k} rel(r_i) / log2(i + 1)`` and
  ``IDCG@k = sum_{i <= min(k, n_u)} 1 / log2(i + 1)``.

Users with no relevant item are left out of the means. Ties in ``scores`` are
broken by the item index (lower first), so results are deterministic.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError
from identrep.utils._param_validation import Interval, StrOptions, validate_params
from identrep.utils.seeding import check_random_state
from identrep.utils.validation import check_array

__all__ = ["ndcg_at_k", "ranking_split", "recall_at_k"]


def _dense(a, name: str) -> np.ndarray:
    if sp.issparse(a):
        a = a.toarray()
    return check_array(a, name)


def _binary(a, name: str) -> np.ndarray:
    A = _dense(a, name)
    if ((A != 0) & (A != 1)).any():
        raise DataError(
            f"{name} must be 0/1 (relevant or not); got values such as "
            f"{np.unique(A[(A != 0) & (A != 1)])[:3].tolist()}. Binarise it first, "
            "e.g. (ratings >= 4)."
        )
    return A.astype(bool)


def _check_ranking(scores, targets, k, exclude):
    S = check_array(scores, "scores") if not sp.issparse(scores) else None
    if S is None:
        raise DataError("scores must be a dense array of shape (n_users, n_items).")
    T = _binary(targets, "targets")
    if T.shape != S.shape:
        raise DataError(
            f"targets must have the shape of scores (n_users, n_items) = {S.shape}; "
            f"got {T.shape}."
        )
    if k > S.shape[1]:
        raise DataError(f"k must be at most n_items = {S.shape[1]}; got k={k}.")
    if exclude is not None:
        E = _binary(exclude, "exclude")
        if E.shape != S.shape:
            raise DataError(
                f"exclude must have the shape of scores {S.shape}; got {E.shape}."
            )
        both = E & T
        if both.any():
            raise DataError(
                f"exclude and targets share {int(both.sum())} (user, item) pairs; "
                "the fold-in items must be disjoint from the held-out targets."
            )
        S = np.where(E, -np.inf, S)
    return S, T


def _top_k(S: np.ndarray, k: int) -> np.ndarray:
    """Indices (n_users, k) of the k highest scores per row, best first; ties by
    the lower item index (stable sort on -scores)."""
    return np.argsort(-S, axis=1, kind="stable")[:, :k]


def _per_user(
    S: np.ndarray, T: np.ndarray, k: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    n_rel = T.sum(axis=1)
    keep = n_rel > 0
    top = _top_k(S[keep], k)
    hits = np.take_along_axis(T[keep], top, axis=1).astype(np.float64)
    n_rel = n_rel[keep]
    if what == "recall":
        return hits.sum(axis=1) / np.minimum(k, n_rel), keep
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = hits @ disc
    idcg = np.cumsum(disc)[np.minimum(k, n_rel) - 1]
    return dcg / idcg, keep


_METRIC_PARAMS = {
    "k": [Interval(Integral, 1, None, closed="left")],
    "per_user": ["boolean"],
}


def _metric(scores, targets, k, exclude, per_user, what):
    S, T = _check_ranking(scores, targets, int(k), exclude)
    vals, keep = _per_user(S, T, int(k), what)
    if per_user:
        out = np.full(S.shape[0], np.nan)
        out[keep] = vals
        return out
    if not keep.any():
        raise DataError(
            "targets has no relevant item for any user; Recall/NDCG are undefined."
        )
    return float(vals.mean())


@validate_params(_METRIC_PARAMS)
def recall_at_k(
    scores: ArrayLike,
    targets: ArrayLike,
    k: int,
    *,
    exclude: ArrayLike | None = None,
    per_user: bool = False,
) -> float | np.ndarray:
    """Recall@k: the share of a user's relevant items in the top k, normalised by
    ``min(k, n_relevant)`` (Liang et al., 2018), averaged over users.

    Parameters
    ----------
    scores : ndarray of shape (n_users, n_items)
        Predicted preference (higher first).
    targets : array-like or sparse matrix of shape (n_users, n_items), 0/1
        Relevant items (the held-out items under the fold-in protocol).
    k : int
        List length, at most n_items.
    exclude : array-like or sparse matrix of shape (n_users, n_items), 0/1, optional
        Items never recommended (the fold-in input): scored -inf. Must be disjoint
        from ``targets``.
    per_user : bool, default=False
        Return one value per user (NaN for users without relevant items).

    Returns
    -------
    float in [0, 1], or ndarray of shape (n_users,)

    Raises
    ------
    DataError
        Mismatched shapes, non-binary targets, ``k`` above n_items, overlapping
        ``exclude`` and ``targets``, or no user with a relevant item.

    Examples
    --------
    >>> scores = np.array([[0.9, 0.1, 0.5, 0.0]])
    >>> recall_at_k(scores, np.array([[0, 1, 1, 0]]), k=2)
    0.5
    """
    return _metric(scores, targets, k, exclude, per_user, "recall")


@validate_params(_METRIC_PARAMS)
def ndcg_at_k(
    scores: ArrayLike,
    targets: ArrayLike,
    k: int,
    *,
    exclude: ArrayLike | None = None,
    per_user: bool = False,
) -> float | np.ndarray:
    """NDCG@k with binary relevance and ``1 / log2(rank + 1)`` discounts, divided by
    the ideal DCG over ``min(k, n_relevant)`` positions; averaged over users.

    Parameters and errors as :func:`recall_at_k`.

    Returns
    -------
    float in [0, 1], or ndarray of shape (n_users,)

    Examples
    --------
    >>> scores = np.array([[0.9, 0.1, 0.5, 0.0]])
    >>> round(ndcg_at_k(scores, np.array([[0, 0, 1, 0]]), k=2), 4)  # hit at rank 2
    0.6309
    """
    return _metric(scores, targets, k, exclude, per_user, "ndcg")


@validate_params(
    {
        "protocol": [StrOptions({"fold_in", "same_rows"})],
        "holdout_fraction": [Interval(Real, 0, 1, closed="neither")],
        "min_items": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def ranking_split(
    X: ArrayLike,
    *,
    protocol: str = "fold_in",
    holdout_fraction: float = 0.2,
    min_items: int = 5,
    random_state: Seed = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Inputs, targets and excluded items of the held-out users ``X``.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_users, n_items), 0/1
        The test users' interactions.
    protocol : {"fold_in", "same_rows"}, default="fold_in"
        ``"fold_in"``: for every user with at least ``min_items`` items, a random
        ``floor(holdout_fraction * n_u)`` of them (at least one) become the targets
        and are removed from the input; users with fewer items keep all of them as
        input and have no targets (they drop out of the metrics). ``"same_rows"``:
        input and targets are ``X`` itself and nothing is excluded (the Sparse VAE
        authors' evaluation).
    holdout_fraction : float in (0, 1), default=0.2
    min_items : int, default=5
    random_state : int, Generator or None, default=0

    Returns
    -------
    inputs : ndarray of shape (n_users, n_items)
        What the model sees (fold-in items).
    targets : ndarray of shape (n_users, n_items)
        Items to rank.
    exclude : ndarray of shape (n_users, n_items) or None
        Items to score -inf (the fold-in input); None for ``"same_rows"``.

    Examples
    --------
    >>> X = np.ones((1, 10))
    >>> inp, tgt, exc = ranking_split(X, random_state=0)
    >>> int(inp.sum()), int(tgt.sum())
    (8, 2)
    """
    B = _binary(X, "X").astype(np.float64)
    if protocol == "same_rows":
        return B, B.copy(), None
    rng = check_random_state(random_state)
    targets = np.zeros_like(B)
    for u in range(B.shape[0]):
        items = np.flatnonzero(B[u])
        if items.size < min_items:
            continue
        n_hold = max(1, int(holdout_fraction * items.size))
        targets[u, rng.choice(items, size=n_hold, replace=False)] = 1.0
    inputs = B - targets
    return inputs, targets, inputs.copy()
