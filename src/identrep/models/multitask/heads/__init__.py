"""Task-head solvers on shared features: joint (learned with the extractor) and
ridge (closed form per batch, differentiated through the solve)."""

from identrep.models.multitask.heads.joint import JointHeads
from identrep.models.multitask.heads.ridge import (
    TaskMoments,
    fit_ridge_heads,
    fit_ridge_heads_wide,
    ridge_from_moments,
    ridge_heads,
    ridge_heads_masked,
    task_moments,
    task_moments_masked,
)

__all__ = [
    "JointHeads",
    "TaskMoments",
    "fit_ridge_heads",
    "fit_ridge_heads_wide",
    "ridge_from_moments",
    "ridge_heads",
    "ridge_heads_masked",
    "task_moments",
    "task_moments_masked",
]
