"""The frozen bundle returned by every synthetic generator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TaskData:
    """Multi-task data in long format with the ground truth that generated it.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_observed)
        Observations.
    y : ndarray of shape (n_samples,)
        Targets.
    task_ids : ndarray of shape (n_samples,)
        Task of each sample, ints in ``[0, n_tasks)``; samples are task-major.
    Z : ndarray of shape (n_samples, n_latents)
        True latents (standardised within each task).
    causal : ndarray of shape (n_tasks, n_latents)
        1 where the latent causes the task's target, 0 where it is spurious.
    gammas : ndarray of shape (n_tasks, n_latents)
        Drawn spurious coefficients (0 at causal positions).
    weights : ndarray of shape (n_tasks, n_latents)
        Regression weights of the target on its causal latents (0 elsewhere).
    mixing : ndarray of shape (n_observed, n_latents) or None
        Linear mixing matrix, or None for a non-linear mixing.
    noise_std : ndarray of shape (n_tasks,)
        Target-noise standard deviation of each task.
    params : dict
        The generator's arguments.
    """

    X: np.ndarray
    y: np.ndarray
    task_ids: np.ndarray
    Z: np.ndarray
    causal: np.ndarray
    gammas: np.ndarray
    weights: np.ndarray
    mixing: np.ndarray | None
    noise_std: np.ndarray
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in (
            "X",
            "y",
            "task_ids",
            "Z",
            "causal",
            "gammas",
            "weights",
            "mixing",
            "noise_std",
        ):
            arr = getattr(self, name)
            if isinstance(arr, np.ndarray):
                arr.setflags(write=False)

    @property
    def n_tasks(self) -> int:
        return self.causal.shape[0]

    @property
    def n_latents(self) -> int:
        return self.Z.shape[1]

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    def task(self, t: int) -> slice | np.ndarray:
        """Boolean mask of the samples of task ``t``."""
        return self.task_ids == t

    def to_wide(self) -> tuple[np.ndarray, np.ndarray]:
        """``(X, Y)`` with ``Y`` of shape (n_samples, n_tasks), NaN off each row's task.

        Every sample belongs to exactly one task, so each row of ``Y`` has one
        observed entry; estimators accept this layout as ``fit(X, Y)``.
        """
        Y = np.full((self.n_samples, self.n_tasks), np.nan)
        Y[np.arange(self.n_samples), self.task_ids] = self.y
        return self.X, Y

    def __repr__(self) -> str:
        mix = "None" if self.mixing is None else f"array{self.mixing.shape}"
        return (
            f"TaskData(n_samples={self.n_samples}, n_tasks={self.n_tasks}, "
            f"n_latents={self.n_latents}, n_observed={self.X.shape[1]}, mixing={mix})"
        )
