"""Closed-form tests of identrep.metrics (STYLE.md rule 11)."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from scipy.stats import spearmanr

from identrep.exceptions import DataError
from identrep.metrics import (
    causal_accuracy,
    causal_scores,
    correlation_matrix,
    cross_seed_mcc,
    match_latents,
    mcc,
    mcc_per_task,
    weak_mcc,
)
from identrep.metrics._mcc import _cca_weights

# ``seed`` comes from tests/conftest.py (IDENTREP_TEST_SEEDS).


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


def _invertible(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random well-conditioned invertible matrix (orthogonal x positive scales)."""
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Q * rng.uniform(0.5, 2.0, size=d)


# ------------------------------------------------------------- correlation_matrix


def test_correlation_matrix_equals_corrcoef_blocks(rng):
    Z1, Z2 = rng.normal(size=(60, 3)), rng.normal(size=(60, 4))
    Z2[:, 0] += 2 * Z1[:, 1]
    full = np.corrcoef(Z1, Z2, rowvar=False)
    np.testing.assert_allclose(
        correlation_matrix(Z1, Z2), np.abs(full[:3, 3:]), rtol=1e-10, atol=1e-12
    )


def test_spearman_matrix_equals_scipy_spearmanr_with_ties(rng):
    Z1 = rng.integers(0, 4, size=(50, 2)).astype(float)  # many ties
    Z2 = rng.normal(size=(50, 3))
    Z2[:, 1] += Z1[:, 0]
    full = spearmanr(Z1, Z2).statistic
    np.testing.assert_allclose(
        correlation_matrix(Z1, Z2, "spearman"),
        np.abs(full[:2, 2:]),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("method", ["pearson", "spearman"])
@pytest.mark.parametrize("value", [0.0, 0.1, 1 / 3, -2.7, 1e6])
def test_constant_column_gives_zero_not_nan(rng, method, value):
    Z1 = rng.normal(size=(40, 3))
    Z1[:, 1] = value
    R = correlation_matrix(Z1, rng.normal(size=(40, 2)), method)
    assert np.all(np.isfinite(R))
    np.testing.assert_array_equal(R[1], 0.0)
    assert np.all(R[[0, 2]] > 0)


def test_spearman_invariant_to_monotone_transforms(rng):
    Z = rng.normal(size=(80, 3))
    F = np.column_stack([np.exp(Z[:, 0]), Z[:, 1] ** 3, -np.tanh(Z[:, 2])])
    np.testing.assert_allclose(
        correlation_matrix(Z, F, "spearman"),
        correlation_matrix(Z, Z, "spearman"),
        rtol=1e-12,
    )
    assert mcc(Z, F, "spearman") == pytest.approx(1.0, rel=1e-12)
    assert mcc(Z, F, "pearson") < 0.99  # Pearson is not invariant


# -------------------------------------------------------------------------- mcc


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_mcc_is_one_under_permutation_sign_scale(rng, method):
    Z = rng.normal(size=(200, 5))
    perm = rng.permutation(5)
    signs = rng.choice([-1.0, 1.0], size=5)
    scales = rng.uniform(0.01, 100.0, size=5)
    Z2 = Z[:, perm] * signs * scales
    score, matching = mcc(Z, Z2, method, return_matching=True)
    np.testing.assert_allclose(score, 1.0, rtol=1e-10)
    np.testing.assert_array_equal(matching, np.argsort(perm))
    np.testing.assert_allclose(mcc(Z2, Z, method), 1.0, rtol=1e-10)


def test_mcc_hand_computed_2d():
    x1 = np.array([1.0, 2.0, 3.0, 4.0])
    x2 = np.array([1.0, -1.0, 1.0, -1.0])
    Z1 = np.column_stack([x1, x2])
    Z2 = np.column_stack([x2, x1 + x2])
    # |R| = [[1/sqrt(5), 0.6], [1, 1/sqrt(5)]]; the anti-diagonal (1.6) beats the
    # diagonal (2/sqrt(5) = 0.894), so MCC = (0.6 + 1) / 2.
    r = 1 / np.sqrt(5)
    np.testing.assert_allclose(
        correlation_matrix(Z1, Z2), [[r, 0.6], [1.0, r]], rtol=1e-12
    )
    score, matching = mcc(Z1, Z2, return_matching=True)
    assert score == pytest.approx(0.8, rel=1e-12)
    np.testing.assert_array_equal(matching, [1, 0])


@pytest.mark.parametrize(("d1", "d2"), [(3, 3), (2, 5), (5, 2)])
@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_mcc_in_unit_interval_and_partial_matching(rng, d1, d2, method):
    Z1, Z2 = rng.normal(size=(30, d1)), rng.normal(size=(30, d2))
    score, matching = mcc(Z1, Z2, method, return_matching=True)
    assert 0.0 <= score <= 1.0
    R = correlation_matrix(Z1, Z2, method)
    matched = matching >= 0
    assert matched.sum() == min(d1, d2)
    assert np.unique(matching[matched]).size == min(d1, d2)
    assert score == pytest.approx(R[matched.nonzero()[0], matching[matched]].mean())
    # optimal: no permutation of min(d1, d2) pairs does better
    best = max(
        np.mean([R[i, j] for i, j in zip(rows, cols, strict=True)])
        for rows in _subsets(d1, min(d1, d2))
        for cols in _perms(d2, min(d1, d2))
    )
    assert score == pytest.approx(best, rel=1e-12)


def _subsets(d, k):
    from itertools import combinations

    return list(combinations(range(d), k))


def _perms(d, k):
    from itertools import permutations

    return list(permutations(range(d), k))


def test_mcc_accepts_float32_and_lists(rng):
    Z = rng.normal(size=(20, 2))
    assert mcc(Z.astype(np.float32), Z.tolist()) == pytest.approx(1.0, rel=1e-6)


# ------------------------------------------------------------------ mcc_per_task


@pytest.mark.parametrize("equal_sizes", [True, False])
@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_mcc_per_task_equals_explicit_loop(rng, equal_sizes, method):
    n_tasks, d = 12, 4
    if equal_sizes:
        task_ids = rng.permutation(np.repeat(np.arange(n_tasks), 15))
    else:
        task_ids = rng.integers(0, n_tasks, size=200)
        task_ids[:n_tasks] = np.arange(n_tasks)  # every task present
    labels = np.array([f"task{k:02d}" for k in range(n_tasks)])[task_ids]
    Z1 = rng.normal(size=(task_ids.size, d))
    Z2 = Z1 @ rng.normal(size=(d, d)) + 0.3 * rng.normal(size=Z1.shape)
    expected = np.array(
        [mcc(Z1[labels == k], Z2[labels == k], method) for k in np.unique(labels)]
    )
    score, per_task = mcc_per_task(Z1, Z2, labels, method, return_all=True)
    np.testing.assert_allclose(per_task, expected, rtol=1e-12)
    assert score == pytest.approx(expected.mean(), rel=1e-12)
    assert mcc_per_task(Z1, Z2, labels, method) == score
    # per-task matchings differ from the pooled one, so the numbers differ
    assert score != pytest.approx(mcc(Z1, Z2, method), abs=1e-6)


def test_mcc_per_task_one_under_per_task_permutations(rng):
    task_ids = np.repeat(np.arange(5), 20)
    Z1 = rng.normal(size=(100, 3))
    Z2 = np.empty_like(Z1)
    for t in range(5):
        rows = task_ids == t
        Z2[rows] = -3 * Z1[rows][:, rng.permutation(3)]
    assert mcc_per_task(Z1, Z2, task_ids, "pearson") == pytest.approx(1.0, rel=1e-10)


# ---------------------------------------------------------------------- weak_mcc


@pytest.mark.parametrize("split", [None, 0.5])
@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_weak_mcc_is_one_under_invertible_linear_map(rng, split, method):
    Z = rng.normal(size=(400, 5))
    M = rng.normal(size=(5, 5)) + 0.5 * np.eye(5)
    Z2 = Z @ M + rng.normal(size=5)  # linear map and translation
    score = weak_mcc(Z, Z2, method=method, split=split, random_state=0)
    np.testing.assert_allclose(score, 1.0, rtol=1e-6)
    assert mcc(Z, Z2, method) < 0.99  # the strong MCC does see the mixing


def test_weak_mcc_wider_second_block(rng):
    Z = rng.normal(size=(300, 3))
    M = rng.normal(size=(3, 6))  # full row rank: Z is a linear function of Z @ M
    assert weak_mcc(Z, Z @ M, method="pearson") == pytest.approx(1.0, rel=1e-6)
    assert weak_mcc(Z @ M, Z, n_components=2) == pytest.approx(1.0, rel=1e-6)


def test_weak_mcc_out_of_sample_low_on_independent_data(rng):
    X, Y = rng.normal(size=(2000, 5)), rng.normal(size=(2000, 5))
    out = weak_mcc(X, Y, split=0.5, random_state=rng)
    assert out < 0.2
    # in-sample fits noise on few rows: the leading canonical correlation of
    # independent 5-d blocks on 20 rows is far from 0
    assert weak_mcc(X[:20], Y[:20]) > out


def test_weak_mcc_split_scores_held_out_rows(rng):
    X, Y = rng.normal(size=(400, 4)), rng.normal(size=(400, 4))
    fit_rows = np.random.default_rng(7).permutation(400)[:200]  # documented shuffle
    Y[fit_rows] = X[fit_rows]  # identical on the fit rows, independent elsewhere
    assert weak_mcc(X[fit_rows], Y[fit_rows]) == pytest.approx(1.0, rel=1e-6)
    # the held-out rows are independent: scoring them must not see the fit rows
    assert weak_mcc(X, Y, split=0.5, random_state=7) < 0.3


def test_weak_mcc_split_is_seeded(rng):
    Z1 = rng.normal(size=(100, 3))
    Z2 = Z1 + rng.normal(size=(100, 3))
    a = weak_mcc(Z1, Z2, split=0.5, random_state=3)
    assert a == weak_mcc(Z1, Z2, split=0.5, random_state=3)
    assert a != weak_mcc(Z1, Z2, split=0.5, random_state=4)


def test_cca_weights_whiten_and_diagonalise(rng):
    A = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
    B = A[:, :3] @ rng.normal(size=(3, 3)) + rng.normal(size=(500, 3))
    A, B = A - A.mean(0), B - B.mean(0)
    W1, W2, rho = _cca_weights(A, B, 3)
    U1, U2 = A @ W1, B @ W2
    np.testing.assert_allclose(U1.T @ U1 / 499, np.eye(3), atol=1e-6)
    np.testing.assert_allclose(U2.T @ U2 / 499, np.eye(3), atol=1e-6)
    np.testing.assert_allclose(U1.T @ U2 / 499, np.diag(rho), atol=1e-6)
    assert np.all(np.diff(rho) <= 0) and rho[-1] > 0 and rho[0] <= 1


# ---------------------------------------------------------------- cross_seed_mcc


@pytest.mark.parametrize("n_runs", [2, 3, 5])
def test_cross_seed_mcc_pairs(rng, n_runs):
    runs = [rng.normal(size=(50, 3)) for _ in range(n_runs)]
    out = cross_seed_mcc(runs)
    assert len(out["pairs"]) == n_runs * (n_runs - 1) // 2
    assert [p for p, _ in out["pairs"]] == [
        (i, j) for i, j in product(range(n_runs), repeat=2) if i < j
    ]
    scores = np.array([s for _, s in out["pairs"]])
    assert scores[0] == pytest.approx(mcc(runs[0], runs[1]))
    assert out["mean"] == pytest.approx(scores.mean())
    assert out["std"] == pytest.approx(scores.std(ddof=0))


def test_cross_seed_mcc_weak_sees_linear_equivalence(rng):
    Z = rng.normal(size=(300, 4))
    runs = [Z @ _invertible(rng, 4) for _ in range(3)]
    weak = cross_seed_mcc(runs, "spearman", weak=True)
    assert weak["mean"] == pytest.approx(1.0, rel=1e-6)
    assert weak["std"] == pytest.approx(0.0, abs=1e-6)
    assert cross_seed_mcc(runs)["mean"] < 0.99


# ------------------------------------------------------------------------ causal


def test_match_latents_recovers_known_permutation(rng):
    Z = rng.normal(size=(300, 6))
    perm = rng.permutation(6)
    Z_hat = 2.5 * Z[:, perm] * rng.choice([-1, 1], size=6) + 0.2 * rng.normal(
        size=(300, 6)
    )
    matching = match_latents(Z, Z_hat)
    np.testing.assert_array_equal(matching, np.argsort(perm))
    assert matching.dtype.kind == "i"


def test_causal_accuracy_one_with_correct_matching(rng):
    T, d = 20, 5
    C = (rng.random((T, d)) < 0.4).astype(float)
    perm = rng.permutation(d)
    C_hat = np.empty_like(C)
    C_hat[:, perm] = np.where(C == 1, 0.9, 0.1)  # true latent j lives in column perm[j]
    assert causal_accuracy(C, C_hat, perm) == 1.0
    scores = causal_scores(C, C_hat, perm)
    assert scores["exact_set_rate"] == 1.0 and scores["f1"] == 1.0
    assert scores["auroc"] == 1.0
    wrong = np.roll(perm, 1)
    assert causal_accuracy(C, C_hat, wrong) < 1.0


def test_causal_scores_hand_computed():
    C = np.array([[1, 0, 0], [0, 1, 1]])
    C_hat = np.array([[0.2, 0.55, 0.9], [0.7, 0.6, 0.1]])
    matching = np.array([2, 0, 1])
    # aligned probabilities [[0.9, 0.2, 0.55], [0.1, 0.7, 0.6]]
    # -> predicted [[1, 0, 1], [0, 1, 1]]: one false positive at (0, 2)
    assert causal_accuracy(C, C_hat, matching) == pytest.approx(5 / 6)
    s = causal_scores(C, C_hat, matching)
    assert s["accuracy"] == pytest.approx(5 / 6)
    assert s["precision"] == pytest.approx(3 / 4)
    assert s["recall"] == pytest.approx(1.0)
    assert s["f1"] == pytest.approx(6 / 7)
    assert s["exact_set_rate"] == pytest.approx(1 / 2)
    # positives {0.9, 0.7, 0.6} vs negatives {0.2, 0.55, 0.1}: all ordered correctly
    assert s["auroc"] == pytest.approx(1.0)
    # a tied (positive, negative) pair counts one half: pairs 0.5/0.5, 0.5>0.3,
    # 0.9>0.5, 0.9>0.3 -> 3.5 / 4
    ties = causal_scores([[1, 0], [0, 1]], [[0.5, 0.5], [0.3, 0.9]], [0, 1])
    assert ties["auroc"] == pytest.approx(0.875)
    # at threshold 0.65 the 0.55 entry no longer fires but the true 0.6 one misses
    s = causal_scores(C, C_hat, matching, threshold=0.65)
    assert s["accuracy"] == pytest.approx(5 / 6)
    assert s["precision"] == pytest.approx(1.0)
    assert s["recall"] == pytest.approx(2 / 3)
    assert s["auroc"] == pytest.approx(1.0)  # threshold-free


def test_causal_threshold_is_inclusive():
    # documented: predicted causal when probability >= threshold
    assert causal_accuracy([[1, 0]], [[0.5, 0.49]], [0, 1]) == 1.0
    assert causal_accuracy([[1, 0]], [[0.5, 0.49]], [0, 1], threshold=0.51) == 0.5


def test_causal_unmatched_latent_predicted_non_causal():
    C = np.array([[1, 0], [1, 0], [0, 0]])
    C_hat = np.array([[0.8], [0.9], [0.2]])
    assert causal_accuracy(C, C_hat, np.array([0, -1])) == 1.0
    assert causal_accuracy(np.array([[0, 1]]), np.array([[0.1]]), [0, -1]) == 0.5


def test_auroc_equals_pair_count(rng):
    C = (rng.random((15, 4)) < 0.5).astype(int)
    C[0, 0], C[0, 1] = 1, 0  # both classes present
    P = np.round(rng.random((15, 4)), 1)  # ties
    pos, neg = P[C == 1], P[C == 0]
    diff = pos[:, None] - neg[None, :]
    expected = np.mean((diff > 0) + 0.5 * (diff == 0))
    got = causal_scores(C, P, np.arange(4))["auroc"]
    assert got == pytest.approx(expected, rel=1e-12)


def test_causal_scores_nan_when_undefined():
    s = causal_scores(np.zeros((2, 2)), np.full((2, 2), 0.1), [0, 1])
    assert s["accuracy"] == 1.0
    assert np.isnan(s["precision"]) and np.isnan(s["recall"]) and np.isnan(s["f1"])
    assert np.isnan(s["auroc"])


# -------------------------------------------------------------------- validation


Z_OK = np.arange(20.0).reshape(10, 2) ** 1.5


def _with_bad(value: float) -> np.ndarray:
    out = Z_OK.copy()
    out[0, 0] = value
    return out


@pytest.mark.parametrize(
    "fn",
    [
        correlation_matrix,
        mcc,
        weak_mcc,
        lambda a, b: mcc_per_task(a, b, np.zeros(len(a))),
        match_latents,
    ],
)
def test_row_mismatch_names_both_shapes(fn):
    with pytest.raises(DataError, match=r"same number of rows.*\(10, 2\).*\(9, 2\)"):
        fn(Z_OK, Z_OK[:9])


@pytest.mark.parametrize("fn", [correlation_matrix, mcc, weak_mcc, match_latents])
def test_nan_is_rejected(fn):
    bad = Z_OK.copy()
    bad[3, 1] = np.nan
    with pytest.raises(DataError, match=r"Z2 contains 1 non-finite.*row 3, column 1"):
        fn(Z_OK, bad)
    with pytest.raises(DataError, match="Z1 contains 1 non-finite"):
        fn(bad, Z_OK)


@pytest.mark.parametrize("fn", [correlation_matrix, mcc, weak_mcc])
def test_wrong_ndim_is_rejected(fn):
    with pytest.raises(DataError, match=r"Z1 must be a 2-D array.*got shape \(10,\)"):
        fn(Z_OK[:, 0], Z_OK)
    with pytest.raises(DataError, match=r"Z2 must be a 2-D array.*\(1, 10, 2\)"):
        fn(Z_OK, Z_OK[None])


def test_too_few_rows_rejected():
    with pytest.raises(DataError, match="Z1 must have at least 2 row"):
        mcc(Z_OK[:1], Z_OK[:1])


def test_unknown_method_rejected():
    with pytest.raises(ValueError, match=r"method must be one of.*got 'kendall'"):
        mcc(Z_OK, Z_OK, "kendall")
    with pytest.raises(TypeError, match="method must be a str"):
        correlation_matrix(Z_OK, Z_OK, method=1)


def test_mcc_per_task_validation():
    with pytest.raises(DataError, match=r"task_ids must have shape \(10,\).*\(9,\)"):
        mcc_per_task(Z_OK, Z_OK, np.zeros(9, dtype=int))
    with pytest.raises(DataError, match=r"at least 2 samples.*; task 1 has 1\."):
        mcc_per_task(Z_OK, Z_OK, np.r_[np.zeros(9, dtype=int), 1])
    with pytest.raises(DataError, match="Z2 contains 1 non-finite"):
        mcc_per_task(Z_OK, _with_bad(np.inf), np.zeros(10))


def test_weak_mcc_parameter_validation():
    with pytest.raises(ValueError, match=r"n_components.*= \[1, 2\]; got 3"):
        weak_mcc(Z_OK, Z_OK, n_components=3)
    with pytest.raises(TypeError, match="n_components must be an int or None"):
        weak_mcc(Z_OK, Z_OK, n_components=1.5)
    with pytest.raises(ValueError, match=r"split must be a float in \(0, 1\)"):
        weak_mcc(Z_OK, Z_OK, split=1.0)
    with pytest.raises(TypeError, match="split must be a float"):
        weak_mcc(Z_OK, Z_OK, split="half")
    with pytest.raises(DataError, match="leaves 1 rows to fit"):
        weak_mcc(Z_OK, Z_OK, split=0.1)
    with pytest.raises(DataError, match="Z1 has zero variance in every column"):
        weak_mcc(np.ones((10, 2)), Z_OK)


def test_cross_seed_mcc_validation():
    with pytest.raises(DataError, match="at least 2 runs to compare; got 1"):
        cross_seed_mcc([Z_OK])
    with pytest.raises(TypeError, match="latents must be a list of arrays"):
        cross_seed_mcc(Z_OK)
    with pytest.raises(DataError, match=r"latents\[2\] has shape \(9, 2\)"):
        cross_seed_mcc([Z_OK, Z_OK, Z_OK[:9]])
    with pytest.raises(DataError, match=r"latents\[1\] contains 1 non-finite"):
        cross_seed_mcc([Z_OK, _with_bad(np.nan)])


def test_causal_validation():
    C = np.array([[1, 0], [0, 1]])
    P = np.array([[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(DataError, match=r"causal_true must contain only 0 and 1"):
        causal_accuracy(C * 2, P, [0, 1])
    with pytest.raises(DataError, match=r"causal_hat must hold probabilities in"):
        causal_accuracy(C, P * 3, [0, 1])
    with pytest.raises(DataError, match=r"one row per task.*\(2, 2\).*\(1, 2\)"):
        causal_accuracy(C, P[:1], [0, 1])
    with pytest.raises(DataError, match=r"matching must have shape \(2,\)"):
        causal_accuracy(C, P, [0, 1, 2])
    with pytest.raises(DataError, match=r"matching entries must be column indices"):
        causal_accuracy(C, P, [0, 2])
    with pytest.raises(DataError, match="distinct columns"):
        causal_scores(C, P, [1, 1])
    with pytest.raises(TypeError, match="matching must hold integers"):
        causal_accuracy(C, P, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"threshold must lie in \[0, 1\]"):
        causal_accuracy(C, P, [0, 1], threshold=1.5)
    with pytest.raises(DataError, match="causal_hat contains 1 non-finite"):
        causal_scores(C, np.where(P == 0.1, np.nan, P), [0, 1])
    with pytest.raises(DataError, match=r"causal_true must be a 2-D array"):
        causal_accuracy(C[0], P, [0, 1])
