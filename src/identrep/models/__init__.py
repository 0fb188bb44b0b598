"""identrep models: MTLCM (stage 2) and, as they land, MTRN, the pipeline and baselines."""

from identrep.models.mtlcm import MTLCM

__all__ = ["MTLCM"]
