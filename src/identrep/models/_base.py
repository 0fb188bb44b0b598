"""Shared estimator plumbing (sklearn-compatible base, fitted checks)."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from identrep.exceptions import NotFittedError
from identrep.utils.validation import check_array


class IdentrepEstimator(BaseEstimator):
    """sklearn ``get_params``/``set_params``/``clone`` plus fitted checks."""

    _fitted_attr = "n_features_in_"

    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attr):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(...) "
                "before using it."
            )

    def _check_X(self, X, name: str = "X") -> np.ndarray:
        self._check_fitted()
        X = check_array(X, name)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{name} has {X.shape[1]} features, but {type(self).__name__} was "
                f"fitted with n_features_in_={self.n_features_in_}."
            )
        return X
