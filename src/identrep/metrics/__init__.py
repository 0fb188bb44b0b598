"""Metrics for latent and causal-structure recovery (pure numpy/scipy)."""

from identrep.metrics._causal import causal_accuracy, causal_scores, match_latents
from identrep.metrics._dci import dci, dci_from_importances
from identrep.metrics._mcc import (
    correlation_matrix,
    cross_seed_mcc,
    mcc,
    mcc_per_task,
    weak_mcc,
)
from identrep.metrics._support import (
    empty_rows,
    exact_support,
    match_support_columns,
    support_f_score,
    support_recovery,
)

__all__ = [
    "causal_accuracy",
    "causal_scores",
    "correlation_matrix",
    "dci",
    "dci_from_importances",
    "cross_seed_mcc",
    "match_latents",
    "mcc",
    "mcc_per_task",
    "weak_mcc",
    "empty_rows",
    "exact_support",
    "match_support_columns",
    "support_f_score",
    "support_recovery",
]
