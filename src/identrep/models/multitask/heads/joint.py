"""Joint task heads: free per-task linear weights learned with the extractor."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["JointHeads"]


class JointHeads(nn.Module):
    """Free linear heads y_hat_t = w_t^T f + b_t, learned jointly with the features.

    Initialised like ``nn.Linear(n_features, n_tasks)``: weights and biases
    U(+-1/sqrt(n_features)).

    Parameters
    ----------
    n_features : int
        Feature dimension d.
    n_tasks : int
        Number of tasks T.

    Attributes
    ----------
    weight : Parameter of shape (n_tasks, n_features)
    bias : Parameter of shape (n_tasks,)
    """

    def __init__(self, n_features: int, n_tasks: int):
        super().__init__()
        if int(n_features) < 1 or int(n_tasks) < 1:
            raise ValueError(
                "n_features and n_tasks must be positive; got "
                f"n_features={n_features!r}, n_tasks={n_tasks!r}."
            )
        self.n_features, self.n_tasks = int(n_features), int(n_tasks)
        self.weight = nn.Parameter(torch.empty(self.n_tasks, self.n_features))
        self.bias = nn.Parameter(torch.empty(self.n_tasks))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.n_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, F: Tensor) -> Tensor:
        """Predictions of every task, shape (batch, n_tasks), for F (batch, d)."""
        return F @ self.weight.T + self.bias

    def gather(self, F: Tensor, task_ids: Tensor) -> Tensor:
        """Prediction of each row's own task, shape (batch,), for F (batch, d)."""
        return (F * self.weight[task_ids]).sum(-1) + self.bias[task_ids]
