"""Support recovery metrics on hand-built supports with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.exceptions import DataError
from identrep.metrics import (
    empty_rows,
    exact_support,
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
