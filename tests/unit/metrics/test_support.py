"""Support recovery metrics on hand-built supports with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.exceptions import DataError
from identrep.metrics import (
    collapsed_rows,
    empty_rows,
    exact_support,
    feature_r2,
    match_support_columns,
    support_f_score,
    support_recovery,
)

# the 7 x 2 support of Moran et al. (2022), Eq. 9
TRUE = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1], [1, 1]])


def test_the_true_support_permuted_is_exact_with_f_one():
    est = TRUE[:, ::-1].astype(bool)
    assert match_support_columns(TRUE, est).tolist() == [1, 0]
    assert support_f_score(TRUE, est) == 1.0
    assert exact_support(TRUE, est)
    assert empty_rows(est) == 0


def test_one_missed_and_one_spurious_entry():
    est = TRUE.copy()
    est[6, 1] = 0  # missed: TP 7, FN 1
    est[0, 1] = 1  # spurious: FP 1
    assert support_f_score(TRUE, est) == pytest.approx(14 / 16)
    assert not exact_support(TRUE, est)


def test_an_extra_nonempty_column_counts_as_false_positives():
    est = np.column_stack([TRUE, [0, 0, 1, 0, 0, 0, 1]])
    assert match_support_columns(TRUE, est).tolist() == [0, 1]
    assert support_f_score(TRUE, est) == pytest.approx(16 / 18)
    assert not exact_support(TRUE, est)
    empty_extra = np.column_stack([TRUE, np.zeros(7)])
    assert exact_support(TRUE, empty_extra)


def test_zeroed_rows_and_a_dropped_latent():
    est = TRUE.copy()
    est[3:6] = 0  # features 4-6 depend on nothing; column 2 keeps only x7
    assert empty_rows(est) == 3
    # TP 5 (x1-x3, both of x7), FN 3
    assert support_f_score(TRUE, est) == pytest.approx(10 / 13)
    dropped = np.column_stack([TRUE[:, 0], np.zeros(7)])  # one latent used
    out = support_recovery(TRUE, dropped)
    assert out == {
        "f_score": pytest.approx(8 / 12),
        "exact": 0.0,
        "empty_rows": 3,
        "n_selected": 4,
    }


def test_a_given_matching_overrides_the_overlap_matching():
    est = TRUE[:, ::-1]
    assert support_f_score(TRUE, est, matching=[0, 1]) == pytest.approx(4 / 16)
    assert support_f_score(TRUE, est, matching=[1, 0]) == 1.0
    # an unmatched true column: its 4 entries are missed (FN 4), and the unmatched
    # estimated column's 4 nonzeros are false positives: TP 4 -> 8 / 16
    assert support_f_score(TRUE, est, matching=[1, -1]) == pytest.approx(8 / 16)


def test_empty_supports_and_errors():
    assert support_f_score(np.zeros((3, 2)), np.zeros((3, 2))) == 1.0
    assert support_f_score(TRUE, np.zeros((7, 2))) == 0.0
    with pytest.raises(DataError, match="same number of features"):
        support_f_score(TRUE, np.ones((6, 2)))
    with pytest.raises(DataError, match="2-D"):
        empty_rows(np.ones(7))
    with pytest.raises(DataError, match="matching"):
        support_f_score(TRUE, TRUE, matching=[0, 0])
    with pytest.raises(DataError, match="matching"):
        support_f_score(TRUE, TRUE, matching=[0, 2])
    with pytest.raises(DataError, match="non-finite"):
        empty_rows(np.array([[np.nan, 1.0]]))


# masks shaped like a Sparse VAE's W on Eq. 9: slab masks 0.3-1.2, spike ~1e-4
W_SPARSE = np.array(
    [
        [0.34, 1e-4],
        [0.39, -2e-4],
        [1.10, 0.0],
        [1e-4, 0.90],
        [0.0, 1.20],
        [-1e-4, 0.80],
        [0.70, 0.60],
    ]
)


def test_collapsed_rows_are_cut_rows_not_small_slab_rows():
    # the two small slab rows (0.34, 0.39) are not collapsed, whatever a 0.5
    # cut of the inclusion probabilities says of them
    assert collapsed_rows(W_SPARSE) == 0
    cut = W_SPARSE.copy()
    cut[0] = [0.05, -0.03]  # largest |w| 0.05 <= 0.05 * 1.20 = 0.06
    cut[3] = [0.0, 0.0]
    assert collapsed_rows(cut) == 2
    assert collapsed_rows(cut, rtol=0.04) == 1  # 0.05 > 0.048: only the zero row
    assert collapsed_rows(cut, rtol=0.0) == 1
    # relative to the largest mask: scaling W changes nothing, signs neither
    assert collapsed_rows(-7.5 * cut) == 2
    assert collapsed_rows(np.zeros((3, 2))) == 3


def test_collapsed_rows_bad_input():
    with pytest.raises(DataError, match="2-D numeric"):
        collapsed_rows(np.ones(3))
    with pytest.raises(DataError, match="non-finite"):
        collapsed_rows([[np.nan, 1.0]])
    with pytest.raises(DataError, match="rtol"):
        collapsed_rows(W_SPARSE, rtol=1.0)


def test_feature_r2_known_answers():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) * [1.0, 2.0, 3.0] + [0.0, 5.0, -1.0]
    X_hat = X.copy()
    X_hat[:, 1] = X[:, 1].mean()  # a collapsed feature: its mean, R^2 = 0
    X_hat[:, 2] = X[:, 2] + (X[:, 2] - X[:, 2].mean())  # error = deviation
    r2 = feature_r2(X, X_hat)
    assert r2[0] == 1.0
    assert r2[1] == pytest.approx(0.0, abs=1e-12)
    assert r2[2] == pytest.approx(0.0, abs=1e-12)
    # half the deviation left: R^2 = 1 - 1/4
    half = X.copy()
    half[:, 0] = X[:, 0].mean() + 0.5 * (X[:, 0] - X[:, 0].mean())
    assert feature_r2(X, half)[0] == pytest.approx(0.75)


def test_feature_r2_bad_input():
    with pytest.raises(DataError, match="same shape"):
        feature_r2(np.ones((4, 2)), np.ones((4, 3)))
    with pytest.raises(DataError, match="constant feature"):
        feature_r2([[1.0, 0.0], [1.0, 2.0]], [[1.0, 0.0], [1.0, 2.0]])
    with pytest.raises(DataError, match="finite"):
        feature_r2([[1.0], [np.inf]], [[1.0], [2.0]])
