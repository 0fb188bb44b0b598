"""Bag of words, the ML-abstracts loader (on a generated file in its format; the
corpus itself is not shipped) and the semi-synthetic topic shift."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from identrep.datasets import load_ml_abstracts, make_topic_shift
from identrep.datasets.text import bag_of_words, fit_topics, shift_factors
from identrep.exceptions import DataError

_WORDS = {
    "rl": ["agent", "policy", "reward", "action", "environment", "game"],
    "bayes": ["posterior", "inference", "variational", "latent", "prior", "bayesian"],
    "nets": ["layer", "convolutional", "network", "training", "deep", "gradient"],
}


def _abstracts(n=60, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(n):
        topic = list(_WORDS)[d % 3]
        words = list(rng.choice(_WORDS[topic], size=12)) + ["the", "we", "paper"]
        venue = ("ICLR", "NeurIPS", "ICML")[d % 3 if d % 2 else 0]
        rows.append((venue, 2017, f"t{d}", " ".join(words).capitalize() + "."))
    rows.append(("ICLR", 2017, "short", "Agent."))  # one word: dropped
    return pd.DataFrame(rows, columns=["venue", "year", "title", "abstract"])


def test_bag_of_words_counts_and_filters():
    texts = ["The agent agent learns a policy.", "A policy; the reward!", "Agent"]
    bow = bag_of_words(texts, max_features=None, min_df=1, max_df=1.0)
    assert list(bow.vocabulary) == ["agent", "learns", "policy", "reward"]
    np.testing.assert_array_equal(bow.X.toarray(), [[2, 1, 1, 0], [0, 0, 1, 1]])
    np.testing.assert_array_equal(bow.documents, [0, 1])  # "Agent": 1 word
    # max_df drops a word in more than the fraction of documents
    bow = bag_of_words(texts, max_features=None, min_df=1, max_df=0.6)
    assert "policy" not in bow.vocabulary and "agent" not in bow.vocabulary
    bow = bag_of_words(texts, max_features=1, min_df=1, max_df=1.0)
    assert list(bow.vocabulary) == ["agent"]
    with pytest.raises(DataError, match="No word survives"):
        bag_of_words(["the a", "of and"], min_df=1)


def test_load_ml_abstracts_from_the_data_home(tmp_path, monkeypatch):
    folder = tmp_path / "ml_abstracts"
    folder.mkdir()
    df = _abstracts()
    df.to_csv(folder / "openreview_ml_abstracts_2013_2019.csv.gz", index=False)
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path))
    frame = load_ml_abstracts(as_frame=True)
    assert set(frame["venue"]) == {"ICLR", "NeurIPS"}  # ICML left out by default
    bow = load_ml_abstracts()
    assert bow.X.shape == (len(frame) - 1, 18)  # 18 topic words, stop words out
    assert set(bow.vocabulary) == set(sum(_WORDS.values(), []))
    everything = load_ml_abstracts(venues="all")
    assert everything.X.shape[0] == len(df) - 1
    iclr = load_ml_abstracts(path=folder, venues=["ICLR"], as_frame=True)
    assert set(iclr["venue"]) == {"ICLR"}
    with pytest.raises(ValueError, match="venues must be among"):
        load_ml_abstracts(venues=["AAAI"])


def test_missing_abstracts_name_the_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="nowhere") as err:
        load_ml_abstracts()
    assert "does not ship" in str(err.value)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"x": [1]}).to_csv(bad, index=False)
    with pytest.raises(DataError, match="columns venue and abstract"):
        load_ml_abstracts(path=bad)


def test_shift_factors_correlates_the_replaced_half(seed):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(np.ones(6), size=2000)
    low = shift_factors(theta, 3.0, np.random.default_rng(seed))
    high = shift_factors(theta, 0.5, np.random.default_rng(seed))
    for t in (low, high):
        np.testing.assert_allclose(t.sum(1), 1.0)

    # the last 3 log-columns are noisy copies of the first 3 (log-ratio to col 0
    # is invariant to the renormalisation)
    def corr(t):
        lt = np.log(t)
        return np.mean([np.corrcoef(lt[:, k], lt[:, k + 3])[0, 1] for k in range(3)])

    # seeds 0-9: r = 0.90-0.92 at sigma 0.5, 0.29-0.32 at sigma 3, and -0.15 to
    # -0.11 between the untouched Dirichlet columns (log-coordinates of a
    # Dirichlet are slightly negatively correlated)
    assert corr(high) > 0.8 > 0.45 > corr(low) > 0.15
    assert corr(theta) < 0.0


def test_make_topic_shift_end_to_end(seed, unsorted_csr):
    bow = bag_of_words(_abstracts(90, seed)["abstract"], min_df=1)
    topics = fit_topics(bow.X, n_topics=4, random_state=0)
    d = make_topic_shift(bow.X, "high", topics=topics, random_state=seed)
    theta, beta = topics
    np.testing.assert_allclose(d.theta_test, theta)
    np.testing.assert_allclose(beta.sum(1), 1.0)
    assert d.X_train.shape[1] == d.X_test.shape[1] == bow.X.shape[1]
    n = np.asarray(bow.X.sum(1)).ravel()
    np.testing.assert_array_equal(
        d.X_test, np.rint(n[d.test_rows, None] * (theta @ beta)[d.test_rows])
    )
    # first half of the factors untouched (up to renormalisation of the rows)
    r = d.theta_train[:, :2] / d.theta_test[:, :2]
    np.testing.assert_allclose(r[:, 0], r[:, 1], rtol=1e-10)
    again = make_topic_shift(bow.X, "high", topics=topics, random_state=seed)
    np.testing.assert_array_equal(again.X_train, d.X_train)
    lda_inside = make_topic_shift(bow.X, "low", n_topics=4, random_state=seed)
    assert lda_inside.sigma == 3.0 and lda_inside.topics.shape == (4, bow.X.shape[1])
    # the caller's counts are left as they were, also as unsorted float32 CSR
    # (a dtype conversion without a copy shared their index arrays with LDA)
    X32 = unsorted_csr(bow.X)
    dense = X32.toarray()
    make_topic_shift(X32, "low", n_topics=4, random_state=seed)
    np.testing.assert_array_equal(X32.toarray(), dense)
    with pytest.raises(ValueError, match="shift must be one of"):
        make_topic_shift(bow.X, "extreme", topics=topics)
    with pytest.raises(ValueError, match="non-negative counts"):
        make_topic_shift(-np.ones((3, 3)), topics=topics)
    with pytest.raises(ValueError, match="topics must be"):
        make_topic_shift(bow.X, topics=(theta[:5], beta))


def test_make_topic_shift_resampled_test_factors(seed):
    """The authors' notebook: the test factors are a second, independent draw
    of the shifted factors of the same documents."""
    bow = bag_of_words(_abstracts(90, seed)["abstract"], min_df=1)
    topics = fit_topics(bow.X, n_topics=4, random_state=0)
    theta, beta = topics
    kw = dict(topics=topics, random_state=seed)
    orig = make_topic_shift(bow.X, "low", **kw)
    d = make_topic_shift(bow.X, "low", test_factors="resampled", **kw)
    # the training draw does not depend on how the test factors are made
    np.testing.assert_array_equal(d.X_train, orig.X_train)
    np.testing.assert_array_equal(d.theta_train, orig.theta_train)
    # a second draw: not LDA's theta, not the training draw, but the same
    # construction (first half proportional to theta's)
    assert np.abs(d.theta_test - theta).max() > 0.1
    assert np.abs(d.theta_test - d.theta_train).max() > 0.1
    r = d.theta_test[:, :2] / theta[:, :2]
    np.testing.assert_allclose(r[:, 0], r[:, 1], rtol=1e-10)
    n = np.asarray(bow.X.sum(1)).ravel()
    np.testing.assert_array_equal(
        d.X_test, np.rint(n[d.test_rows, None] * (d.theta_test @ beta)[d.test_rows])
    )
    again = make_topic_shift(bow.X, "low", test_factors="resampled", **kw)
    np.testing.assert_array_equal(again.X_test, d.X_test)
    with pytest.raises(ValueError, match="test_factors must be one of"):
        make_topic_shift(bow.X, "low", test_factors="shifted", **kw)
