"""The multi-task family: MTRN (stage 1, shared extractor + task heads), MTLCM
(stage 2, the multi-task linear causal model with its exact likelihood, sufficient
statistics and joint-diagonalisation start) and the two-stage pipeline."""

from identrep.models.multitask.mtlcm import MTLCM
from identrep.models.multitask.mtrn import MTRN
from identrep.models.multitask.pipeline import TaskIdentifiable

__all__ = ["MTLCM", "MTRN", "TaskIdentifiable"]
