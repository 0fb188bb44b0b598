"""Latent Dirichlet allocation (scikit-learn's variational Bayes) behind the
estimator contract.

Documents are count rows; ``transform`` gives each document's topic proportions
theta (rows sum to 1) and ``topics_`` the topic-word distributions beta (rows of
``components_`` normalised). The held-out NLL is the multinomial one of the counts
under the document's mixture ``theta beta`` (baselines.md 3.4), with theta inferred
from the same row (a reconstruction NLL, as the VAEs'); scikit-learn's own
variational bound is :meth:`LDA.perplexity`.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from identrep._typing import Seed
from identrep.metrics import reconstruction_nll
from identrep.models.decomposition._base import NonNegativeDecomposition
from identrep.utils._param_validation import Interval, StrOptions

__all__ = ["LDA"]

_POS = Interval(Real, 0, None, closed="neither")


class LDA(NonNegativeDecomposition):
    """Latent Dirichlet allocation (scikit-learn's ``LatentDirichletAllocation``).

    Parameters
    ----------
    n_latents : int, default=10
        Number of topics.
    doc_topic_prior : float or None, default=None
        Dirichlet prior of theta (None: ``1 / n_latents``).
    topic_word_prior : float or None, default=None
        Dirichlet prior of beta (None: ``1 / n_latents``).
    learning_method : {"batch", "online"}, default="batch"
    learning_decay : float, default=0.7
    learning_offset : float, default=10.0
    max_iter : int, default=10
        Passes over the data (scikit-learn's default, which the Sparse VAE paper
        used).
    batch_size : int, default=128
        Documents per online update.
    max_doc_update_iter : int, default=100
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    model_ : sklearn.decomposition.LatentDirichletAllocation
    components_ : ndarray of shape (n_latents, n_features_in_)
        Variational topic-word parameters.
    topics_ : ndarray of shape (n_latents, n_features_in_)
        beta: ``components_`` with rows normalised to sum to 1.
    n_iter_ : int
    n_latents_, n_features_in_, feature_names_in_

    Examples
    --------
    >>> X = np.random.default_rng(0).poisson(1.0, size=(40, 8))
    >>> m = LDA(n_latents=2, random_state=0).fit(X)
    >>> m.transform(X).sum(axis=1).round(6)[:3]
    array([1., 1., 1.])
    """

    _parameter_constraints: dict[str, list] = {
        "n_latents": [Interval(Integral, 1, None, closed="left")],
        "doc_topic_prior": [_POS, None],
        "topic_word_prior": [_POS, None],
        "learning_method": [StrOptions({"batch", "online"})],
        "learning_decay": [Interval(Real, 0.5, 1, closed="right")],
        "learning_offset": [Interval(Real, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_doc_update_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        doc_topic_prior: float | None = None,
        topic_word_prior: float | None = None,
        learning_method: str = "batch",
        learning_decay: float = 0.7,
        learning_offset: float = 10.0,
        max_iter: int = 10,
        batch_size: int = 128,
        max_doc_update_iter: int = 100,
        random_state: Seed = None,
    ):
        self.n_latents = n_latents
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.learning_method = learning_method
        self.learning_decay = learning_decay
        self.learning_offset = learning_offset
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.max_doc_update_iter = max_doc_update_iter
        self.random_state = random_state

    def fit(self, X, y=None, *, task_ids=None):
        """Fit the topics to the count matrix ``X``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), >= 0
            Word (or item) counts per document.
        y, task_ids : ignored
            Accepted for the shared contract (``fit(X, y, task_ids=...)``).

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A hyperparameter outside its declared constraints.
        DataError
            Negative or non-finite values.
        """
        from sklearn.decomposition import LatentDirichletAllocation

        self._validate_params()
        Xs = self._check_fit_X(X)
        seed = self._sklearn_seed()
        model = LatentDirichletAllocation(
            n_components=int(self.n_latents),
            doc_topic_prior=self.doc_topic_prior,
            topic_word_prior=self.topic_word_prior,
            learning_method=self.learning_method,
            learning_decay=float(self.learning_decay),
            learning_offset=float(self.learning_offset),
            max_iter=int(self.max_iter),
            batch_size=int(self.batch_size),
            max_doc_update_iter=int(self.max_doc_update_iter),
            random_state=seed,
        ).fit(Xs)
        self.model_ = model
        self.components_ = model.components_.astype(np.float64)
        self.topics_ = self.components_ / self.components_.sum(axis=1, keepdims=True)
        self.n_iter_ = int(model.n_iter_)
        self.n_latents_ = int(self.n_latents)
        self._record_features(X, Xs.shape[1])
        return self

    def transform(self, X) -> np.ndarray:
        """Topic proportions theta of every document: ndarray of shape
        (n_samples, n_latents), rows summing to 1."""
        return super().transform(X)

    def word_probabilities(self, X) -> np.ndarray:
        """``theta(X) @ topics_``: each document's distribution over the features,
        ndarray of shape (n_samples, n_features), rows summing to 1."""
        return self.transform(X) @ self.topics_

    def heldout_nll(self, X, *, per_row: bool = False) -> float | np.ndarray:
        """``-sum_j x_j log (theta beta)_j`` per document (nats), averaged.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features_in_)
        per_row : bool, default=False

        Returns
        -------
        float, or ndarray of shape (n_samples,)
        """
        Xs = self._check_transform_X(X)
        P = np.asarray(self.model_.transform(Xs), dtype=np.float64) @ self.topics_
        P = P / P.sum(axis=1, keepdims=True)
        Xd = Xs.toarray() if sp.issparse(Xs) else Xs
        return reconstruction_nll(Xd, P, likelihood="multinomial", per_row=per_row)

    def perplexity(self, X) -> float:
        """scikit-learn's perplexity: ``exp(-bound / n_words)`` from the
        variational bound of the log-likelihood."""
        return float(self.model_.perplexity(self._check_transform_X(X)))
