"""The bilevel sparse learner recovers correlated latents from sparse tasks.

Process: ``make_sparse_tasks`` with rho = 0.9 latents (6 dims), supports drawn per
task with probability 0.15 per latent (an empty draw is redrawn: ~64% of tasks use
one latent, the rest two or more), noise at 10% of the signal norm, a random
injective 3-layer leaky-ReLU mixing to 16 dims; 1000 tasks x 50 samples. Learners:
MLP 16-64-64-6 encoder, 8 tasks (400 samples) per outer step, Adam lr 1e-3, 10
epochs (1250 outer steps); lasso heads at l1_reg = 0.3. Pearson MCC on the training
inputs.

Why supports with p = 0.15 and not the paper's 0.5: with p = 0.5 the same learner
stops at MCC 0.77-0.92 (seeds 0-5) although the representation is linearly right
(R > 0.99) and the bilevel objective, optimised over a linear map of the true
latents, does reach MCC 0.997 there; docs/notes.md ("Bilevel sparse MTL at
correlation 0.9") has the ablations. Sparser tasks give the outer gradient a much
stronger pull towards the axes.

Calibration (benchmarks/ablate_bilevel.py --set support_prob=0.15 --models lasso
ridge), seeds 0-2:

    seed   lasso   ridge   ridge+ICA
    0      0.981   0.789   0.500
    1      0.988   0.599   0.476
    2      0.962   0.741   0.485

With 20 epochs the lasso learner reaches 0.986 on seed 2 (the issue's 0.97; see
docs/notes.md); this test keeps 10 epochs to stay within about a minute. Measured:
215 s on the shared 2-core machine at load average 12-15; on the same machine at load
0.8 a 10-epoch lasso fit of this size took 17 s and the ridge one 11 s (p = 0.5; the
sparser supports here cost up to ~1.6x more inner iterations), so ~40-50 s quiet.
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
        n_tasks=1000,
        n_samples=50,
        n_latents=6,
        correlation=0.9,
        support_prob=0.15,
        random_state=seed,
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


def test_lasso_heads_disentangle_correlated_latents(seed):
    s = _scores(seed)
    # observed min 0.962 (seed 2) at this budget; margin ~0.01
    assert s["lasso"] >= 0.95, s
    # ridge heads identify the latents only up to a linear map: observed max
    # 0.789 (seed 0); margin ~0.06
    assert s["ridge"] <= 0.85, s
    # ICA cannot undo the linear map of correlated latents: observed max 0.500
    # (seed 0); margin ~0.1
    assert s["ridge_ica"] <= 0.6, s
    # observed min gap over the better of the two 0.192 (seed 0); margin ~0.09
    assert s["lasso"] - max(s["ridge"], s["ridge_ica"]) >= 0.1, s
