"""The shared training loop (:func:`fit_module`), its batch helpers and the one
progress display (:class:`Progress`); :func:`cuda_graphs` replays the steps of
CUDA fits from a recorded graph."""

from identrep.training._graphs import cuda_graphs
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
    "cuda_graphs",
    "fit_module",
    "split_within_tasks",
]
