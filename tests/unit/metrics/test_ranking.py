"""Recall@k and NDCG@k on hand-built users with known top-k lists, and the two
evaluation protocols of ranking_split."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from identrep.exceptions import DataError, InvalidParameterError
from identrep.metrics import ndcg_at_k, ranking_split, recall_at_k

# user 0: item 0 is a fold-in item (excluded); relevant items 1 and 3
# user 1: the only relevant item (0) has the lowest score: rank 5
# user 2: no relevant item (left out of the means)
SCORES = np.array(
    [
        [0.9, 0.8, 0.1, 0.5, 0.3],
        [0.1, 0.2, 0.3, 0.4, 0.5],
        [0.5, 0.4, 0.3, 0.2, 0.1],
    ]
)
TARGETS = np.array([[0, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
EXCLUDE = np.array([[1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
D2, D3, D6 = 1.0, 1.0 / np.log2(3), 1.0 / np.log2(6)  # discounts at ranks 1, 2, 5


def test_fold_in_items_are_excluded_from_the_ranking():
    # user 0 without item 0: top 2 = {1, 3}, both relevant
    r = recall_at_k(SCORES, TARGETS, 2, exclude=EXCLUDE, per_user=True)
    n = ndcg_at_k(SCORES, TARGETS, 2, exclude=EXCLUDE, per_user=True)
    np.testing.assert_allclose(r[:2], [1.0, 0.0])
    np.testing.assert_allclose(n[:2], [1.0, 0.0])
    assert np.isnan(r[2]) and np.isnan(n[2])
    assert recall_at_k(SCORES, TARGETS, 2, exclude=EXCLUDE) == pytest.approx(0.5)


def test_same_rows_protocol_keeps_every_item_in_the_ranking():
    # user 0 with item 0: top 2 = {0, 1}, one hit at rank 2
    r = recall_at_k(SCORES, TARGETS, 2, per_user=True)
    n = ndcg_at_k(SCORES, TARGETS, 2, per_user=True)
    assert r[0] == pytest.approx(0.5)
    assert n[0] == pytest.approx(D3 / (D2 + D3))


def test_a_hit_at_rank_five():
    n = ndcg_at_k(SCORES, TARGETS, 5, exclude=EXCLUDE, per_user=True)
    r = recall_at_k(SCORES, TARGETS, 5, exclude=EXCLUDE, per_user=True)
    assert r[1] == pytest.approx(1.0)
    assert n[1] == pytest.approx(D6)  # one relevant item: IDCG = 1


def test_recall_is_normalised_by_min_k_and_relevant():
    scores = np.array([[4.0, 3.0, 2.0, 1.0, 0.0]])
    targets = np.array([[1, 1, 1, 1, 0]])
    assert recall_at_k(scores, targets, 2) == pytest.approx(1.0)  # 2 / min(2, 4)
    assert recall_at_k(scores, targets, 5) == pytest.approx(1.0)  # 4 / min(5, 4)
    # the ideal DCG runs over min(k, n_relevant) = 4 positions
    assert ndcg_at_k(scores, targets, 5) == pytest.approx(1.0)
    worst = np.array([[0.0, 1.0, 2.0, 3.0, 4.0]])  # relevant at ranks 2-5
    disc = 1.0 / np.log2(np.arange(2, 7))
    assert ndcg_at_k(worst, targets, 5) == pytest.approx(
        disc[1:].sum() / disc[:4].sum()
    )


def test_ties_are_broken_by_the_item_index():
    scores = np.zeros((1, 4))
    assert recall_at_k(scores, np.array([[1, 1, 0, 0]]), 2) == pytest.approx(1.0)
    assert recall_at_k(scores, np.array([[0, 0, 1, 1]]), 2) == pytest.approx(0.0)


def test_sparse_targets_match_dense():
    a = ndcg_at_k(SCORES, sp.csr_matrix(TARGETS), 3, exclude=sp.csr_matrix(EXCLUDE))
    b = ndcg_at_k(SCORES, TARGETS, 3, exclude=EXCLUDE)
    assert a == pytest.approx(b)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        (dict(targets=TARGETS[:, :4]), DataError, "targets must have the shape"),
        (dict(targets=TARGETS * 2), DataError, "targets must be 0/1"),
        (dict(k=6), DataError, "k must be at most n_items = 5"),
        (dict(k=0), InvalidParameterError, "'k' parameter"),
        (dict(exclude=TARGETS), DataError, "exclude and targets share 3"),
        (dict(targets=np.zeros((3, 5))), DataError, "no relevant item for any user"),
    ],
)
def test_bad_input_is_named(kwargs, err, match):
    args = dict(scores=SCORES, targets=TARGETS, k=2) | kwargs
    with pytest.raises(err, match=match):
        recall_at_k(**args)


def test_fold_in_split_holds_out_a_fraction_of_each_users_items():
    X = np.zeros((3, 12))
    X[0, :10] = 1  # 10 items: 2 held out
    X[1, :3] = 1  # 3 items < min_items: all fold-in, no target
    X[2, ::2] = 1  # 6 items: floor(1.2) = 1 held out
    inputs, targets, exclude = ranking_split(X, random_state=0)
    np.testing.assert_array_equal(inputs + targets, X)
    np.testing.assert_array_equal(exclude, inputs)
    np.testing.assert_array_equal(targets.sum(axis=1), [2, 0, 1])
    assert not (inputs * targets).any()
    again = ranking_split(X, random_state=0)
    np.testing.assert_array_equal(again[1], targets)


def test_same_rows_split_uses_the_input_as_target():
    X = sp.csr_matrix(np.eye(4))
    inputs, targets, exclude = ranking_split(X, protocol="same_rows")
    np.testing.assert_array_equal(inputs, np.eye(4))
    np.testing.assert_array_equal(targets, np.eye(4))
    assert exclude is None


def test_split_refuses_ratings():
    with pytest.raises(DataError, match="X must be 0/1"):
        ranking_split(np.array([[5.0, 3.0, 0.0]]))
