"""identrep models: MTLCM (stage 2); MTRN, the pipeline and baselines follow."""

from identrep.models.mtlcm import MTLCM

__all__ = ["MTLCM"]
