"""The multi-task family: MTRN (stage 1, shared extractor + task heads), MTLCM
(stage 2, the multi-task linear causal model with its exact likelihood, sufficient
statistics and joint-diagonalisation start), the two-stage pipeline, the bilevel
sparse learner (lasso task heads) and its inner-ridge + ICA baseline."""

from identrep.models.multitask.bilevel import BilevelSparseMTL
from identrep.models.multitask.mtlcm import MTLCM
from identrep.models.multitask.mtrn import MTRN
from identrep.models.multitask.pipeline import TaskIdentifiable
from identrep.models.multitask.ridge_ica import RidgeICA

__all__ = ["MTLCM", "MTRN", "BilevelSparseMTL", "RidgeICA", "TaskIdentifiable"]
