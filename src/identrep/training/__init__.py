"""The shared training loop (:func:`fit_module`), its batch helpers and the one
progress display (:class:`Progress`)."""

from identrep.training.loop import (
    IndexBatches,
    StepBatches,
    TensorBatches,
    fit_module,
    split_within_tasks,
)
from identrep.training.progress import Progress

__all__ = [
    "IndexBatches",
    "Progress",
    "StepBatches",
    "TensorBatches",
    "fit_module",
    "split_within_tasks",
]
