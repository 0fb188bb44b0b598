"""The bilevel sparse learner against inner ridge + ICA on correlated latents.

Process: ``make_sparse_tasks`` with rho = 0.9 latents (6 dims), Bernoulli(0.5)
supports drawn per task, noise at 10% of the signal norm, a random injective
3-layer leaky-ReLU mixing to 16 dims; 1000 tasks x 50 samples. Learners: MLP
16-64-64-6 encoder, 8 tasks (400 samples) per outer step, Adam lr 1e-3, 10 epochs
(1250 outer steps); lasso heads at l1_reg = 0.3. Pearson MCC on the training data.

Calibration over seeds 0-5 (one core each, two jobs per core: ~35 s lasso, ~12 s
ridge per seed; alone about half):

    seed   lasso   ridge   ridge+ICA
    0      0.797   0.770   0.462
    1      0.906   0.601   0.423
    2      0.921   0.744   0.462
    3      0.793   0.805   0.489
    4      0.886   0.692   0.496
    5      0.895   0.693   0.396

The lasso learner does NOT reach the issue's target (>= 0.97) at this budget, nor
with 3x the steps or 4000 tasks (0.84-0.91, see the report of this change); the
thresholds below test what holds: lasso well above ridge + ICA, and ICA unable to
undo the linear map of correlated latents. Lasso is not always above plain ridge
(seed 3), so that comparison is not asserted.
"""

from __future__ import annotations

import functools
import warnings

import pytest

from identrep import MTRN, BilevelSparseMTL, RidgeICA
from identrep.datasets import make_sparse_tasks
from identrep.metrics import mcc

pytestmark = pytest.mark.slow

SETTINGS = dict(n_latents=6, hidden_sizes=(64, 64), max_epochs=10)


@functools.cache
def _problem(seed: int):
    return make_sparse_tasks(
        n_tasks=1000, n_samples=50, n_latents=6, correlation=0.9, random_state=seed
    )


@functools.cache
def _scores(seed: int) -> dict:
    data = _problem(seed)
    lasso = BilevelSparseMTL(random_state=seed, **SETTINGS)
    lasso.fit(data.X, data.y, task_ids=data.task_ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FastICA may stop at max_iter
        ridge = RidgeICA(random_state=seed, **SETTINGS)
        ridge.fit(data.X, data.y, task_ids=data.task_ids)
    return {
        "lasso": mcc(data.Z, lasso.transform(data.X)),
        "ridge": mcc(data.Z, MTRN.transform(ridge, data.X)),
        "ridge_ica": mcc(data.Z, ridge.transform(data.X)),
    }


def test_lasso_heads_beat_ridge_plus_ica_on_correlated_latents(seed):
    s = _scores(seed)
    # observed min 0.793 (seed 3); margin ~0.04
    assert s["lasso"] >= 0.75, s
    # observed max 0.496 (seed 4); margin ~0.05
    assert s["ridge_ica"] <= 0.55, s
    # observed min gap 0.304 (seed 3); margin ~0.05
    assert s["lasso"] - s["ridge_ica"] >= 0.25, s
