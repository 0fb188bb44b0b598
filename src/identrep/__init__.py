"""identrep: identifiable representation learning from task structure and sparsity."""

from identrep import datasets, metrics, models
from identrep._version import __version__
from identrep.exceptions import ConvergenceWarning, DataError, NotFittedError
from identrep.models import *  # noqa: F403  (the estimators; listed in models.__all__)

__all__ = [
    *models.__all__,
    "ConvergenceWarning",
    "DataError",
    "NotFittedError",
    "__version__",
    "datasets",
    "metrics",
]
