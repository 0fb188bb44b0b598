"""identrep models: MTRN (stage 1), MTLCM (stage 2), the two-stage pipeline and the
baselines of the papers."""

from identrep.models.baselines import IVAE, MTIVAE, VAE, ICaRL, MTICaRL
from identrep.models.mtlcm import MTLCM
from identrep.models.mtrn import MTRN
from identrep.models.pipeline import TaskIdentifiable

__all__ = [
    "IVAE",
    "MTIVAE",
    "MTLCM",
    "MTRN",
    "VAE",
    "ICaRL",
    "MTICaRL",
    "TaskIdentifiable",
]
