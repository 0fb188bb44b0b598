"""scikit-learn's estimator checks on the decompositions (STYLE.md rule 11).

No exemptions: both accept dense and sparse non-negative input (the
``positive_only`` tag makes the checks pass non-negative data). NMF runs to a tight
``tol``: its ``transform`` re-solves W iteratively with a stopping rule over the
whole batch, so ``check_methods_subset_invariance`` (atol 1e-7) holds only for a
converged solver (with ``max_iter=50`` rows differed by ~3e-6)."""

from __future__ import annotations

import warnings

import pytest
import sklearn
from sklearn.utils.estimator_checks import parametrize_with_checks

from identrep.models.decomposition import LDA, NMF

if tuple(int(v) for v in sklearn.__version__.split(".")[:2]) < (1, 6):
    pytest.skip("the checks need scikit-learn >= 1.6", allow_module_level=True)

ESTIMATORS = [
    NMF(n_latents=2, max_iter=1000, tol=1e-10, random_state=0),
    LDA(n_latents=2, max_iter=3, random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Maximum number of iterations")
        check(estimator)
