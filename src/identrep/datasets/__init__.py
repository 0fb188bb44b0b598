"""Synthetic processes (``make_*``, numpy only) and real-data loaders."""

from identrep.datasets.bundle import TaskData
from identrep.datasets.synthetic import (
    make_linear_tasks,
    make_mixing,
    make_nonlinear_tasks,
    make_task_latents,
)

__all__ = [
    "TaskData",
    "make_linear_tasks",
    "make_mixing",
    "make_nonlinear_tasks",
    "make_task_latents",
]
