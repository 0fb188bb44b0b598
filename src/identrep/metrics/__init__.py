"""Metrics for latent and causal-structure recovery (pure numpy/scipy)."""

from identrep.metrics._causal import causal_accuracy, causal_scores, match_latents
from identrep.metrics._dci import dci, dci_from_importances
from identrep.metrics._independence import conditional_independence_test
from identrep.metrics._likelihood import importance_weighted_nll, reconstruction_nll
from identrep.metrics._mcc import (
    correlation_matrix,
    cross_seed_mcc,
    mcc,
    mcc_per_task,
    weak_mcc,
)
from identrep.metrics._ranking import ndcg_at_k, ranking_split, recall_at_k
from identrep.metrics._support import (
    collapsed_rows,
    empty_rows,
    exact_support,
    feature_r2,
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
    "importance_weighted_nll",
    "ndcg_at_k",
    "ranking_split",
    "recall_at_k",
    "reconstruction_nll",
    "empty_rows",
    "collapsed_rows",
    "feature_r2",
    "exact_support",
    "match_support_columns",
    "support_f_score",
    "support_recovery",
    "conditional_independence_test",
]
