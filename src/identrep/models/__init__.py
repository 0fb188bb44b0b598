"""identrep models: MTRN (stage 1), MTLCM (stage 2) and the two-stage pipeline."""

from identrep.models.mtlcm import MTLCM
from identrep.models.mtrn import MTRN
from identrep.models.pipeline import TaskIdentifiable

__all__ = ["MTLCM", "MTRN", "TaskIdentifiable"]
