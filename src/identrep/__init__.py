"""identrep: identifiable representation learning from task structure and sparsity."""

from identrep import datasets, metrics
from identrep.exceptions import ConvergenceWarning, DataError, NotFittedError
from identrep.models import IVAE, MTIVAE, MTLCM, MTRN, VAE, TaskIdentifiable

__version__ = "0.1.0"

__all__ = [
    "IVAE",
    "MTIVAE",
    "MTLCM",
    "MTRN",
    "VAE",
    "ConvergenceWarning",
    "DataError",
    "NotFittedError",
    "TaskIdentifiable",
    "__version__",
    "datasets",
    "metrics",
]
