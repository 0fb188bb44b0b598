"""identrep: identifiable representation learning from task structure and sparsity."""

from identrep import datasets, metrics
from identrep.exceptions import ConvergenceWarning, DataError, NotFittedError
from identrep.models import MTLCM, MTRN, TaskIdentifiable

__version__ = "0.1.0"

__all__ = [
    "MTLCM",
    "MTRN",
    "ConvergenceWarning",
    "DataError",
    "NotFittedError",
    "TaskIdentifiable",
    "__version__",
    "datasets",
    "metrics",
]
