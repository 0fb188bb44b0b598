"""What NMF and LDA share: non-negative dense or sparse input, checked once."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from identrep.exceptions import DataError
from identrep.models._base import IdentrepEstimator
from identrep.utils.validation import as_float64_csr, check_array, check_input_kind

__all__ = ["NonNegativeDecomposition"]


class NonNegativeDecomposition(IdentrepEstimator):
    """Base of the scikit-learn decompositions: input checks and tags.

    Subclasses implement ``fit`` (calling :meth:`_check_fit_X`, then
    ``_record_features``) and set ``model_`` (the fitted scikit-learn estimator),
    ``components_`` and ``n_latents_``.
    """

    def _nonneg(self, X, name: str):
        """``X`` as float64 (dense C array or CSR, a copy: :func:`as_float64_csr`),
        finite and non-negative."""
        if sp.issparse(X):
            Xs = as_float64_csr(X)
            if Xs.shape[0] < 1 or Xs.shape[1] < 1:
                raise DataError(
                    f"{name} must have at least one row and one column; got shape "
                    f"{Xs.shape}."
                )
            vals = Xs.data
        else:
            Xs = check_array(X, name)
            vals = Xs.ravel()
        if not np.isfinite(vals).all():
            raise DataError(
                f"{name} contains {int((~np.isfinite(vals)).sum())} non-finite "
                "values; drop or impute them before fit."
            )
        if vals.size and vals.min() < 0:
            raise DataError(
                f"Negative values in data passed to {name}: "
                f"{type(self).__name__} needs non-negative data (counts, ratings); "
                f"{name} has {int((vals < 0).sum())} negative values (minimum "
                f"{vals.min():.3g})."
            )
        return Xs

    def _sklearn_seed(self):
        """``random_state`` as scikit-learn takes it: a Generator gives one draw."""
        rs = self.random_state
        if isinstance(rs, np.random.Generator):
            return int(rs.integers(2**31 - 1))
        return rs

    def _check_fit_X(self, X):
        if not sp.issparse(X):
            self._check_fit_input(X)
        return self._nonneg(X, "X")

    def _check_transform_X(self, X, name: str = "X"):
        self._check_fitted()
        if not sp.issparse(X):
            self._check_feature_names(X, name)
            check_input_kind(X, name, type(self).__name__)
        Xs = self._nonneg(X, name)
        if Xs.shape[1] != self.n_features_in_:
            raise DataError(
                f"{name} has {Xs.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input: it was fitted "
                f"with n_features_in_={self.n_features_in_}."
            )
        return Xs

    def transform(self, X) -> np.ndarray:
        """The latent representation of ``X`` (see the subclass)."""
        Xs = self._check_transform_X(X)
        return np.asarray(self.model_.transform(Xs), dtype=np.float64)

    def score(self, X, y=None) -> float:
        """Minus :meth:`heldout_nll` (higher is better), for model selection."""
        return -self.heldout_nll(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        return tags

    def _more_tags(self) -> dict:  # scikit-learn < 1.6
        return {"requires_positive_X": True}
