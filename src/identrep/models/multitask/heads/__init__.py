"""Task-head solvers on shared features: joint (learned with the extractor), ridge
(closed form per batch, differentiated through the solve) and group lasso (solved
per batch, differentiated implicitly on the support)."""

from identrep.models.multitask.heads.group_lasso import (
    GroupLassoHeads,
    SolverInfo,
    fit_group_lasso_heads,
    group_lasso_heads,
    group_lasso_multinomial,
    group_lasso_quadratic,
)
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
    "GroupLassoHeads",
    "JointHeads",
    "SolverInfo",
    "TaskMoments",
    "fit_ridge_heads",
    "fit_group_lasso_heads",
    "fit_ridge_heads_wide",
    "group_lasso_heads",
    "group_lasso_multinomial",
    "group_lasso_quadratic",
    "ridge_from_moments",
    "ridge_heads",
    "ridge_heads_masked",
    "task_moments",
    "task_moments_masked",
]
