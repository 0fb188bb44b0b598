"""Text as bag-of-words counts: the ML-abstracts stand-in for PeerRead and its
semi-synthetic train/test-shift variant (Moran et al., 2022, Appendix C.1).

:func:`load_ml_abstracts` reads ``openreview_ml_abstracts_2013_2019.csv.gz`` (6,657
abstracts of ICLR 2017-18, ICML 2017-19 and NeurIPS 2013-18, assembled from the
repository ``DylanJoo/OpenReview``) from the data home. Its source has no licence
(the abstracts belong to their authors; research use only), so identrep does not
ship it: put the folder ``ml_abstracts`` under the data home (``$IDENTREP_DATA``,
else ``~/identrep_data``) or pass ``path=``.

:func:`bag_of_words` applies the paper's filtering: drop words in fewer than 0.07%
(about 0.1%) of the documents or in more than 90% of them and English stop words,
keep the ``max_features`` = 500 most frequent remaining words, and keep documents
with at least two of them. Tokens are alphabetic words of two or more letters,
lower-cased; the authors also lemmatise with NLTK's WordNet, which identrep does
not depend on (so "networks" and "network" stay two words).

:func:`make_topic_shift` builds the semi-synthetic data of Table 2 with LDA.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from identrep._typing import Seed
from identrep.exceptions import DataError
from identrep.utils.validation import as_float64_csr

__all__ = [
    "ML_ABSTRACTS_FILE",
    "TOPIC_SHIFTS",
    "TEST_FACTORS",
    "DEFAULT_VENUES",
    "BagOfWords",
    "TopicShiftData",
    "bag_of_words",
    "load_ml_abstracts",
    "make_topic_shift",
]

ML_ABSTRACTS_FILE = "openreview_ml_abstracts_2013_2019.csv.gz"

#: Venues read by default: in the source, the ICML abstracts (1,828) lost every
#: lower-case "p" in scraping ("We resent a ... algorithm for aroximating any
#: oint"), which would make "roblem" and "aer" words of the vocabulary.
DEFAULT_VENUES = ("ICLR", "NeurIPS")

#: Shift level -> sigma, the noise sd on the log topic proportions of the
#: replaced training factors (the authors' generating notebook has 0.5, 1, 3 in
#: the cell that resamples the test factors, 0.5, 1, 2 in the one that keeps
#: LDA's; the paper's values are not legible in our copy): the smaller sigma,
#: the more the replaced factors copy the first half, the more the training
#: factors differ from the test factors.
TOPIC_SHIFTS = {"high": 0.5, "medium": 1.0, "low": 3.0}
#: ``test_factors`` of :func:`make_topic_shift`: "original" (the test documents
#: keep LDA's theta, the paper's Appendix C.1) or "resampled" (a second,
#: independent draw of the shifted factors, the last cell of the authors'
#: generating notebook).
TEST_FACTORS = ("original", "resampled")

_TOKEN = r"(?u)\b[a-zA-Z][a-zA-Z]+\b"


@dataclass(frozen=True)
class BagOfWords:
    """Documents as word counts.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix of shape (n_documents, n_words), float32
    vocabulary : ndarray of str, shape (n_words,)
    documents : ndarray of int, shape (n_documents,)
        Rows of the input that were kept (those with >= ``min_terms`` words).
    """

    X: sp.csr_matrix
    vocabulary: np.ndarray
    documents: np.ndarray


def bag_of_words(
    texts,
    *,
    max_features: int | None = 500,
    min_df: float | int = 0.0007,
    max_df: float | int = 0.9,
    stop_words: str | None = "english",
    min_terms: int = 2,
) -> BagOfWords:
    """Word counts with the paper's filtering (see the module docstring).

    Parameters
    ----------
    texts : sequence of str
    max_features : int or None, default=500
        Most frequent words kept (the paper's G = 500).
    min_df, max_df : float or int
        Document-frequency bounds (fractions, or counts if int).
    stop_words : "english" or None
        scikit-learn's English stop-word list.
    min_terms : int, default=2
        Documents with fewer kept words are dropped.

    Returns
    -------
    BagOfWords
    """
    from sklearn.feature_extraction.text import CountVectorizer

    texts = [str(t) for t in texts]
    if not texts:
        raise ValueError("texts must hold at least one document; got none.")
    vec = CountVectorizer(
        lowercase=True,
        token_pattern=_TOKEN,
        stop_words=stop_words,
        min_df=min_df,
        max_df=max_df,
        max_features=max_features,
    )
    try:
        X = vec.fit_transform(texts)
    except ValueError as err:  # empty vocabulary after filtering
        raise DataError(f"No word survives the filtering: {err}") from err
    keep = np.flatnonzero(np.asarray(X.sum(axis=1)).ravel() >= min_terms)
    return BagOfWords(
        X=sp.csr_matrix(X[keep], dtype=np.float32),
        vocabulary=np.asarray(vec.get_feature_names_out()),
        documents=keep,
    )


def _data_home(data_home) -> Path:
    if data_home is not None:
        return Path(data_home).expanduser()
    return Path(os.environ.get("IDENTREP_DATA", "~/identrep_data")).expanduser()


def load_ml_abstracts(
    *,
    path=None,
    data_home=None,
    venues=None,
    max_features: int | None = 500,
    as_frame: bool = False,
):
    """The ML-abstracts corpus (PeerRead stand-in) as bag-of-words counts.

    Parameters
    ----------
    path : str or Path, optional
        The CSV (columns ``venue``, ``year``, ``title``, ``abstract``; gzip
        allowed) or the folder holding ``openreview_ml_abstracts_2013_2019.csv.gz``.
    data_home : str or Path, optional
        Default ``$IDENTREP_DATA``, else ``~/identrep_data``; the file is looked
        for in ``<data_home>/ml_abstracts/``.
    venues : sequence of str or "all", optional
        Keep these venues only ("ICLR", "ICML", "NeurIPS"); default
        :data:`DEFAULT_VENUES` (ICLR and NeurIPS, 4,829 abstracts: the source's
        ICML abstracts lack every lower-case "p").
    max_features : int or None, default=500
    as_frame : bool, default=False
        Return the table of abstracts (no bag of words).

    Returns
    -------
    BagOfWords, or a DataFrame when ``as_frame``.

    Raises
    ------
    DataError
        The file is missing (the message says where it looked and how to get it)
        or lacks the columns.
    """
    if path is None:
        folder = _data_home(data_home) / "ml_abstracts"
        file = folder / ML_ABSTRACTS_FILE
    else:
        p = Path(path).expanduser()
        file = p / ML_ABSTRACTS_FILE if p.is_dir() else p
    if not file.is_file():
        raise DataError(
            f"The ML abstracts were not found at {file}. Their source has no "
            "licence, so identrep does not ship them: copy the folder ml_abstracts "
            "(with openreview_ml_abstracts_2013_2019.csv.gz, assembled from the "
            "GitHub repository DylanJoo/OpenReview) into the data home "
            f"{_data_home(data_home)} (set $IDENTREP_DATA to use another), or pass "
            "path=."
        )
    df = pd.read_csv(file)
    missing = {"venue", "abstract"} - set(df.columns)
    if missing:
        raise DataError(
            f"{file} needs the columns venue and abstract; missing {sorted(missing)}."
        )
    df = df[df["abstract"].notna()].reset_index(drop=True)
    if venues is None:
        venues = DEFAULT_VENUES
    if not (isinstance(venues, str) and venues == "all"):
        venues = [venues] if isinstance(venues, str) else list(venues)
        unknown = sorted(set(venues) - set(df["venue"]))
        if unknown:
            raise ValueError(
                f"venues must be among {sorted(set(df['venue']))}; got {unknown}."
            )
        df = df[df["venue"].isin(venues)].reset_index(drop=True)
    if as_frame:
        return df
    return bag_of_words(df["abstract"].tolist(), max_features=max_features)


@dataclass(frozen=True)
class TopicShiftData:
    """Semi-synthetic counts whose training and test factors are correlated
    differently.

    Attributes
    ----------
    X_train, X_test : ndarray of shape (n_documents, n_words), float32
        Rounded expected counts ``n_d * theta_d @ topics`` (rows that round to
        all zeros are dropped; see ``train_rows``, ``test_rows``).
    theta_train, theta_test : ndarray of shape (n_documents, n_topics)
        Topic proportions: in the training ones the last ``n_topics // 2``
        columns are replaced by noisy copies of the first; the test ones are
        LDA's (``test_factors="original"``) or a second such draw
        (``"resampled"``).
    topics : ndarray of shape (n_topics, n_words)
        LDA's topics, rows normalised (the paper's loadings beta).
    train_rows, test_rows : ndarray of int
        Documents kept in each.
    shift : str
    sigma : float
    """

    X_train: np.ndarray
    X_test: np.ndarray
    theta_train: np.ndarray
    theta_test: np.ndarray
    topics: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray
    shift: str
    sigma: float


def fit_topics(X, n_topics: int = 20, random_state: Seed = 0):
    """LDA (scikit-learn's defaults, as the paper) on counts: topic proportions
    (n_documents, n_topics) and row-normalised topics (n_topics, n_words)."""
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(n_components=n_topics, random_state=random_state)
    theta = lda.fit_transform(X).astype(np.float64)
    theta /= theta.sum(axis=1, keepdims=True)
    comps = lda.components_.astype(np.float64)
    topics = comps / comps.sum(axis=1, keepdims=True)
    return theta, topics


def shift_factors(theta, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Training factors: the last K // 2 columns of log theta replaced by the
    first K // 2 plus N(0, sigma^2) noise, then mapped back to the simplex."""
    theta = np.asarray(theta, dtype=np.float64)
    half = theta.shape[1] // 2
    log_t = np.log(np.clip(theta, 1e-300, None))
    copies = log_t[:, :half] + sigma * rng.standard_normal((theta.shape[0], half))
    out = np.exp(np.concatenate([log_t[:, : theta.shape[1] - half], copies], axis=1))
    return out / out.sum(axis=1, keepdims=True)


def _expected_counts(theta, topics, n_words) -> tuple[np.ndarray, np.ndarray]:
    X = np.rint(n_words[:, None] * (theta @ topics))
    rows = np.flatnonzero(X.sum(axis=1) > 0)
    return X[rows].astype(np.float32), rows


def make_topic_shift(
    X,
    shift: str = "high",
    *,
    n_topics: int = 20,
    topics=None,
    random_state: Seed = None,
    lda_random_state: Seed = 0,
    test_factors: str = "original",
) -> TopicShiftData:
    """Semi-synthetic bag of words with a train/test shift in the factors'
    correlations (Moran et al., 2022, Appendix C.1; Table 2).

    (i) LDA with ``n_topics`` components on the counts ``X`` gives factors theta
    (documents x topics) and topics beta. (ii) The training factors keep the first
    K - K // 2 columns of theta and replace the last K // 2 with
    ``log theta_k + sigma * eps`` for the first K // 2 topics k (then softmax), so
    that they are correlated with the first half; the test factors are theta.
    Each document's counts are its expected counts ``n_d * theta_d @ beta``,
    rounded (``n_d`` its word total).

    The authors' generating notebook (gemoran/sparse-vae-code,
    ``generate_peerread_small_semi_synthetic.ipynb``), in the cell whose
    sigmas :data:`TOPIC_SHIFTS` takes (0.5, 1, 3), draws the test factors a
    second time with the same sigma instead, for the same documents:
    ``test_factors="resampled"``. Train and test then share a distribution and
    differ by the noise draw only.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_documents, n_words)
        Word counts (e.g. :func:`load_ml_abstracts`).
    shift : {"high", "medium", "low"}, default="high"
        Difference between train and test: sigma = 0.5, 1, 3
        (:data:`TOPIC_SHIFTS`).
    n_topics : int, default=20
    topics : tuple (theta, beta), optional
        A fitted LDA (``fit_topics(X, n_topics)``) to reuse across shifts.
    random_state : int, Generator or None
        Seeds the noise eps (one draw per semi-synthetic data set).
    lda_random_state : int, Generator or None, default=0
        Seeds LDA.
    test_factors : {"original", "resampled"}, default="original"
        The test documents' factors: LDA's theta (the paper's text) or a second
        draw of the shifted factors (the authors' notebook), drawn after the
        training draw from the same ``random_state``.

    Returns
    -------
    TopicShiftData
    """
    if shift not in TOPIC_SHIFTS:
        raise ValueError(f"shift must be one of {tuple(TOPIC_SHIFTS)}; got {shift!r}.")
    if test_factors not in TEST_FACTORS:
        raise ValueError(
            f"test_factors must be one of {TEST_FACTORS}; got {test_factors!r}."
        )
    if not isinstance(n_topics, (int, np.integer)) or n_topics < 2:
        raise ValueError(f"n_topics must be an integer >= 2; got {n_topics!r}.")
    X = as_float64_csr(X) if sp.issparse(X) else np.asarray(X, float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be 2-D with >= 2 documents; got shape {X.shape}.")
    data = X.data if sp.issparse(X) else X
    if not np.isfinite(data).all() or (data < 0).any():
        raise ValueError("X must hold finite non-negative counts.")
    theta, beta = (
        fit_topics(X, n_topics, lda_random_state) if topics is None else topics
    )
    theta, beta = np.asarray(theta, float), np.asarray(beta, float)
    if theta.shape != (X.shape[0], beta.shape[0]) or beta.shape[1] != X.shape[1]:
        raise ValueError(
            f"topics must be (theta, beta) of shapes ({X.shape[0]}, K) and "
            f"(K, {X.shape[1]}); got {theta.shape} and {beta.shape}."
        )
    sigma = TOPIC_SHIFTS[shift]
    rng = np.random.default_rng(random_state)
    theta_train = shift_factors(theta, sigma, rng)
    if test_factors == "resampled":
        theta_test = shift_factors(theta, sigma, rng)
    else:
        theta_test = theta
    n_words = np.asarray(X.sum(axis=1)).ravel()
    X_train, train_rows = _expected_counts(theta_train, beta, n_words)
    X_test, test_rows = _expected_counts(theta_test, beta, n_words)
    return TopicShiftData(
        X_train=X_train,
        X_test=X_test,
        theta_train=theta_train,
        theta_test=theta_test,
        topics=beta,
        train_rows=train_rows,
        test_rows=test_rows,
        shift=shift,
        sigma=sigma,
    )
