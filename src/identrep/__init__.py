"""identrep: identifiable representation learning from task structure and sparsity."""

from identrep import datasets, metrics
from identrep.exceptions import ConvergenceWarning, DataError, NotFittedError
from identrep.models import MTLCM

__version__ = "0.1.0"

__all__ = [
    "MTLCM",
    "ConvergenceWarning",
    "DataError",
    "NotFittedError",
    "__version__",
    "datasets",
    "metrics",
]
