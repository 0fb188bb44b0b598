"""The shared training loop (:func:`fit_module`) and its batch helpers."""

from identrep.training.loop import (
    IndexBatches,
    TensorBatches,
    fit_module,
    split_within_tasks,
)

__all__ = ["IndexBatches", "TensorBatches", "fit_module", "split_within_tasks"]
