"""A reference-style MTLCM trainer, used only as the speed/accuracy baseline.

This module re-implements, in plain float32 torch, *how the authors' released code
trains MTLCM* (Chen et al. 2024, TMLR; repository jdhorwood/mtlcm, as described in
words in ``../shared/reference/mtlcm_reference.md`` sections 2, 3 and 6). It is
written from that description, not copied. It deliberately keeps the choices that
make the original slow or fragile, because measuring their cost is the point:

* mixing ``nn.Linear(d, d, bias=False)`` with PyTorch's default initialisation,
  free causal logits and spurious coefficients of shape (T, d) drawn N(0, 1);
* a covariance ``Sigma_i = W D_t W^T + sigma_obs^2 I`` built for **every sample**
  of the minibatch (shape (B, d, d)) although it depends only on the task, and
  ``torch.distributions.MultivariateNormal(loc, covariance_matrix)`` with argument
  validation on (symmetry check + Cholesky), then its own Cholesky, per sample;
  on ``ValueError`` the covariance gets ``1e-6 I`` and the log-prob is recomputed
  once; a second failure propagates (the original run dies there);
* loss = mean over the minibatch of the negative log-density;
* Adam (lr 0.1) and ``ReduceLROnPlateau(mode="min", factor=0.5, patience=100,
  threshold=1e-4, min_lr=5e-3)`` stepped once per epoch on the mean minibatch loss
  (the original also passes ``verbose=True``, which torch >= 2.7 rejects);
* minibatches of 1024 *samples* shuffled across all tasks, produced by a
  ``DataLoader`` over a sample-level ``Dataset`` with a per-item ``__getitem__``
  and default collation (its Python overhead is part of the original's cost);
* observations are used as given (not centred), recovered latents are
  ``W^{-1} x`` by an explicit inverse;
* evaluation (optional, timed separately): per task, three Spearman MCCs, each a
  ``scipy.stats.spearmanr`` on the 2d columns followed by a Hungarian matching, at
  epoch 0, every ``eval_interval`` epochs and after the last epoch.

Where the description leaves a detail open, the cheaper reading is taken so that
the baseline is not made artificially slow: ``W D W^T`` is formed as
``(W * D[:, None, :]) @ W^T`` rather than through an explicit ``diag_embed``.

The module is a benchmark helper, not part of the ``identrep`` API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from scipy.stats import spearmanr
from torch import nn
from torch.distributions import MultivariateNormal
from torch.utils.data import DataLoader, Dataset

__all__ = [
    "ReferenceRun",
    "ReferenceStyleMTLCM",
    "SampleDataset",
    "reference_style_evaluation",
    "train_reference_style",
]

#: Number of epochs of the authors' linear synthetic experiment (Table 1).
AUTHOR_EPOCHS = 1000
#: Their evaluation interval during training (epochs).
AUTHOR_EVAL_INTERVAL = 50


class SampleDataset(Dataset):
    """Sample-level dataset: item ``i`` is ``(x_i, y_i, task_i)``, as in the original.

    Parameters
    ----------
    X : array-like of shape (n_samples, d)
        Observations (kept as given, not centred).
    y : array-like of shape (n_samples,)
        Targets.
    task_ids : array-like of shape (n_samples,)
        Integer task index of every sample, in ``[0, n_tasks)``.
    """

    def __init__(self, X, y, task_ids):
        self.x = torch.tensor(np.asarray(X), dtype=torch.float32)
        self.y = torch.tensor(np.asarray(y), dtype=torch.float32).reshape(-1, 1)
        self.task = torch.tensor(np.asarray(task_ids), dtype=torch.long)

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i):
        return self.x[i], self.y[i], self.task[i]


class ReferenceStyleMTLCM(nn.Module):
    """MTLCM parameterised as in the original code.

    Parameters
    ----------
    n_latents : int
        Latent (= observed) dimension d.
    n_tasks : int
        Number of tasks T.
    sigma_s : float, default=0.1
        Fixed standard deviation of the spurious latents.
    sigma_obs : float, default=0.01
        Fixed observation-noise standard deviation.

    Notes
    -----
    Parameters are drawn from the global torch RNG in the original's order: the
    mixing layer (Kaiming-uniform, entries ``U(-1/sqrt(d), 1/sqrt(d))``), then the
    causal logits, then the spurious coefficients (both ``N(0, 1)``).
    """

    def __init__(
        self,
        n_latents: int,
        n_tasks: int,
        sigma_s: float = 0.1,
        sigma_obs: float = 0.01,
    ):
        super().__init__()
        d = int(n_latents)
        self.A = nn.Linear(d, d, bias=False)
        self.c_params = nn.Parameter(torch.randn(int(n_tasks), d))
        self.gamma_params = nn.Parameter(torch.randn(int(n_tasks), d))
        self.sigma_s = float(sigma_s)
        self.sigma_obs = float(sigma_obs)

    def forward(self, y: torch.Tensor, task: torch.Tensor):
        """Per-sample mean and covariance of ``x | y, t``.

        Parameters
        ----------
        y : Tensor of shape (B, 1)
        task : Tensor of shape (B,), long

        Returns
        -------
        loc : Tensor of shape (B, d)
            ``W (y * gamma_t * (1 - c_t))``.
        cov : Tensor of shape (B, d, d)
            ``W diag(c_t + sigma_s^2 (1 - c_t)) W^T + sigma_obs^2 I``, one per sample.
        """
        W = self.A.weight
        c = torch.sigmoid(self.c_params[task])
        gamma = self.gamma_params[task]
        mu_z = y * (gamma * (1.0 - c))
        var_z = c + self.sigma_s**2 * (1.0 - c)
        loc = mu_z @ W.T
        eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
        cov = (W * var_z[:, None, :]) @ W.T + self.sigma_obs**2 * eye
        return loc, cov

    def unmix(self, X: torch.Tensor) -> torch.Tensor:
        """Recovered latents ``W^{-1} x`` (explicit inverse, as in the original)."""
        return X @ torch.inverse(self.A.weight).T


def _log_prob_with_retry(loc, cov, x) -> tuple[torch.Tensor, bool]:
    """``MultivariateNormal(loc, cov).log_prob(x)``, retried once with ``cov + 1e-6 I``.

    Returns the log-densities and whether the retry was needed (the original logs
    a warning then). A second ``ValueError`` (failed symmetry or
    positive-definiteness validation) propagates, as in the original.
    """
    try:
        return MultivariateNormal(loc, covariance_matrix=cov).log_prob(x), False
    except ValueError:
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        dist = MultivariateNormal(loc, covariance_matrix=cov + 1e-6 * eye)
        return dist.log_prob(x), True


def _spearman_mcc(Z1: np.ndarray, Z2: np.ndarray) -> float:
    """Spearman MCC as in the original: ``spearmanr`` on 2d columns + Hungarian."""
    d = Z1.shape[1]
    rho = spearmanr(Z1, Z2).statistic
    R = np.abs(np.asarray(rho)[:d, d:])
    rows, cols = linear_sum_assignment(-R)
    return float(R[rows, cols].mean())


def reference_style_evaluation(
    model: ReferenceStyleMTLCM,
    X: np.ndarray,
    Z: np.ndarray,
    mixing: np.ndarray,
    task_ids: np.ndarray,
) -> dict[str, float]:
    """The original's in-training evaluation (reference section 3.6), on training data.

    For every task separately it computes three Spearman MCCs -- true latents vs
    ``W^{-1} x`` (``mcc_latents``), true latents vs ``A*^{-1} x`` (noise ceiling,
    ``mcc_latents_transforms``) and ``A*^{-1} x`` vs ``W^{-1} x``
    (``mcc_transforms``) -- and averages each over tasks.

    Parameters
    ----------
    model : ReferenceStyleMTLCM
    X : ndarray of shape (n_samples, d)
    Z : ndarray of shape (n_samples, d)
        True latents.
    mixing : ndarray of shape (d, d)
        True mixing matrix A*.
    task_ids : ndarray of shape (n_samples,)

    Returns
    -------
    dict of str to float
        ``mcc_latents_mean``, ``mcc_latents_transforms_mean``, ``mcc_transforms_mean``.
    """
    with torch.no_grad():
        x = torch.tensor(np.asarray(X), dtype=torch.float32)
        z_hat = model.unmix(x).numpy()
        a_inv = torch.inverse(torch.tensor(np.asarray(mixing), dtype=torch.float32))
        z_tilde = (x @ a_inv.T).numpy()
    Z = np.asarray(Z, dtype=np.float32)
    lat, lat_tr, tr = [], [], []
    for t in np.unique(task_ids):
        rows = task_ids == t
        lat.append(_spearman_mcc(Z[rows], z_hat[rows]))
        lat_tr.append(_spearman_mcc(Z[rows], z_tilde[rows]))
        tr.append(_spearman_mcc(z_tilde[rows], z_hat[rows]))
    return {
        "mcc_latents_mean": float(np.mean(lat)),
        "mcc_latents_transforms_mean": float(np.mean(lat_tr)),
        "mcc_transforms_mean": float(np.mean(tr)),
    }


@dataclass
class ReferenceRun:
    """Outcome of :func:`train_reference_style`.

    Attributes
    ----------
    model : ReferenceStyleMTLCM
        The model after the last completed update (also after a crash).
    epoch_seconds : list of float
        Wall time of every *completed* epoch (training only, no evaluation).
    epoch_losses : list of float
        Mean minibatch loss of every completed epoch.
    learning_rates : list of float
        Learning rate in force during every completed epoch.
    train_seconds : float
        Total training wall time, including a partial crashed epoch.
    crashed : bool
        Whether the distribution validation failed twice (the original dies there).
    crash_epoch : int or None
        1-based epoch during which the crash happened.
    crash_message : str or None
    evaluations : list of dict
        ``{"epoch": e, "seconds": s, **metrics}`` for every in-training evaluation.
    eval_seconds : float
        Total wall time spent in evaluations.
    n_retries : int
        Number of times the ``1e-6 I`` jitter retry was used.
    """

    model: ReferenceStyleMTLCM
    epoch_seconds: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    learning_rates: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    crashed: bool = False
    crash_epoch: int | None = None
    crash_message: str | None = None
    evaluations: list[dict] = field(default_factory=list)
    eval_seconds: float = 0.0
    n_retries: int = 0

    @property
    def epochs_completed(self) -> int:
        """Number of epochs that ran to the end."""
        return len(self.epoch_seconds)


def train_reference_style(
    X,
    y,
    task_ids,
    *,
    n_epochs: int = AUTHOR_EPOCHS,
    batch_size: int = 1024,
    seed: int = 0,
    sigma_s: float = 0.1,
    sigma_obs: float = 0.01,
    eval_fn: Callable[[ReferenceStyleMTLCM], dict] | None = None,
    eval_interval: int | None = None,
    progress: Callable[[int, float, float], None] | None = None,
) -> ReferenceRun:
    """Train MTLCM the way the original code does (reference section 3.3-3.4).

    Parameters
    ----------
    X : array-like of shape (n_samples, d)
        Observations, used as given (float32, not centred).
    y : array-like of shape (n_samples,)
    task_ids : array-like of shape (n_samples,)
        Integer task indices in ``[0, n_tasks)``.
    n_epochs : int, default=1000
        Epochs to run (the authors use 1000).
    batch_size : int, default=1024
        Minibatch size in samples, shuffled across all tasks.
    seed : int, default=0
        ``torch.manual_seed`` applied before the parameters are created; it also
        drives the ``DataLoader`` shuffling.
    sigma_s, sigma_obs : float
        Fixed model noise levels (original defaults 0.1 and 0.01).
    eval_fn : callable, optional
        ``eval_fn(model) -> dict`` run (and timed separately) at epoch 0, every
        ``eval_interval`` epochs and after the last epoch, as the original does.
    eval_interval : int, optional
        Evaluation interval in epochs; without it only the final evaluation runs
        (if ``eval_fn`` is given).
    progress : callable, optional
        ``progress(epoch, loss, seconds)`` called after every completed epoch.

    Returns
    -------
    ReferenceRun
        Timings, losses, the trained model and, if the run crashed on the
        covariance validation, the epoch of the crash.
    """
    task_ids = np.asarray(task_ids)
    n_tasks = int(task_ids.max()) + 1
    d = np.asarray(X).shape[1]
    torch.manual_seed(int(seed))
    model = ReferenceStyleMTLCM(d, n_tasks, sigma_s=sigma_s, sigma_obs=sigma_obs)
    run = ReferenceRun(model=model)
    loader = DataLoader(
        SampleDataset(X, y, task_ids), batch_size=int(batch_size), shuffle=True
    )
    optimiser = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimiser, mode="min", factor=0.5, patience=100, threshold=1e-4, min_lr=5e-3
    )

    def evaluate(epoch: int) -> None:
        if eval_fn is None:
            return
        t0 = time.perf_counter()
        metrics = eval_fn(model)
        secs = time.perf_counter() - t0
        run.eval_seconds += secs
        run.evaluations.append({"epoch": epoch, "seconds": secs, **metrics})

    if eval_interval:
        evaluate(0)
    for epoch in range(int(n_epochs)):
        t0 = time.perf_counter()
        losses = []
        try:
            for x_b, y_b, t_b in loader:
                optimiser.zero_grad()
                loc, cov = model(y_b, t_b)
                log_prob, retried = _log_prob_with_retry(loc, cov, x_b)
                run.n_retries += int(retried)
                loss = -log_prob.mean()
                loss.backward()
                optimiser.step()
                losses.append(loss.item())
        except ValueError as exc:
            run.crashed = True
            run.crash_epoch = epoch + 1
            run.crash_message = " ".join(str(exc).split())[:300]
            run.train_seconds += time.perf_counter() - t0
            break
        epoch_loss = float(np.mean(losses))
        run.learning_rates.append(optimiser.param_groups[0]["lr"])
        scheduler.step(epoch_loss)
        secs = time.perf_counter() - t0
        run.epoch_seconds.append(secs)
        run.epoch_losses.append(epoch_loss)
        run.train_seconds += secs
        if progress is not None:
            progress(epoch + 1, epoch_loss, secs)
        # the original evaluates at epochs 0, 50, ..., 950 (before that epoch's
        # updates, i.e. after 50, 100, ... completed epochs) and after the last one
        done = epoch + 1
        if eval_interval and done % int(eval_interval) == 0 and done < int(n_epochs):
            evaluate(done)
    if not run.crashed:
        evaluate(run.epochs_completed)
    return run
