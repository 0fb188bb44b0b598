"""Training objectives of the VAE estimators: the pure losses of
:mod:`identrep.models.vae._elbo` with the schedule an estimator runs them on.

``make_elbo_objective`` returns the ``(loss_fn, post_epoch)`` pair that
:func:`identrep.training.fit_module` takes: the plain negative ELBO, or the iVAE
authors' weighted objective, optionally annealed to the ELBO (its epoch counter is
advanced by the ``post_epoch`` hook).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from identrep.models.vae._elbo import neg_elbo_loss, weighted_elbo_loss

__all__ = ["PAPER_WEIGHTS", "WeightedObjective", "make_elbo_objective"]

#: (a, b, c, d) of the authors' ``configs/ivae.yaml``.
PAPER_WEIGHTS = (100.0, 1.0, 0.0, 10.0)


class WeightedObjective:
    """Training loss: weighted objective (optionally annealed); validation: -ELBO.

    ``fit_module`` puts the module in train mode for optimisation steps and in eval
    mode for validation, so early stopping and model selection always use the
    plain negative ELBO, whatever the training weights. With ``anneal`` the
    weights move linearly from ``weights`` (epoch 1) to (1, 1, 1, 1) over the
    first ``ceil(max_epochs / 1.6)`` epochs, then stay at the plain ELBO; the
    epoch counter is advanced by :meth:`step` (the ``post_epoch`` hook).
    """

    def __init__(self, weights, n_data: int, anneal: bool, max_epochs: int):
        self.weights = tuple(float(w) for w in weights)
        self.n_data, self.anneal = int(n_data), bool(anneal)
        self.n_anneal = max(math.ceil(max_epochs / 1.6), 1)
        self.epoch = 0

    def current_weights(self) -> tuple[float, ...]:
        if not self.anneal:
            return self.weights
        frac = min(self.epoch / self.n_anneal, 1.0)
        return tuple(w + frac * (1.0 - w) for w in self.weights)

    def __call__(self, module, batch):
        if not module.training:
            return neg_elbo_loss(module, batch)
        return weighted_elbo_loss(
            module, batch, weights=self.current_weights(), n_data=self.n_data
        )

    def step(self, module) -> None:
        self.epoch += 1

    def state_dict(self) -> dict:
        """The epoch counter (a training checkpoint saves it)."""
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])


def make_elbo_objective(
    objective: str,
    elbo_weights: Sequence[float] | None,
    anneal: bool,
    max_epochs: int,
    n_train: int,
) -> tuple[Callable, Callable | None]:
    """``(loss_fn, post_epoch)`` of the ``"elbo"`` or ``"weighted"`` objective.

    Parameters
    ----------
    objective : {"elbo", "weighted"}
    elbo_weights : (a, b, c, d) or None
        Weights of the weighted objective (None: :data:`PAPER_WEIGHTS`).
    anneal : bool
        Anneal the weights to the ELBO (weighted objective only).
    max_epochs : int
        Training budget (sets the annealing length).
    n_train : int
        Training-set size (the aggregate-posterior estimates need it).
    """
    if objective == "elbo":
        return neg_elbo_loss, None
    weights = PAPER_WEIGHTS if elbo_weights is None else elbo_weights
    obj = WeightedObjective(weights, n_train, anneal, int(max_epochs))
    return obj, obj.step
