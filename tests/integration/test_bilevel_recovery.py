"""The bilevel sparse learner recovers correlated latents from sparse tasks.

Process: ``make_sparse_tasks`` with its defaults: rho = 0.9 latents (6 dims),
supports drawn per task with probability 0.5 per latent (an empty draw is
redrawn), noise at 10% of the signal norm, a random injective 3-layer leaky-ReLU
mixing to 16 dims; 1000 tasks x 50 samples. Learners: MLP 16-64-64-6 encoder, 8
tasks (400 samples) per outer step, Adam lr 1e-3, 10 epochs (1250 outer steps),
targets centred per task and divided by one pooled scale (the learners' default
``standardize_targets="pooled"``: tasks keep their relative weights, as with the
authors' raw targets); lasso heads at l1_reg = 0.3. Pearson MCC on the training
inputs.

Per-task target standardisation (MTRN's default) stopped this learner at MCC
0.77-0.81: at rho = 0.9 it moves the minimum of the lasso objective away from the
true latents (docs/notes.md, "Bilevel sparse MTL: per-task target scaling").

Calibration (``python benchmarks/ablate_bilevel.py --seeds 0 1 2 --models lasso
ridge``), seeds 0-2:

    seed   lasso   ridge   ridge+ICA
    0      0.992   0.786   0.498
    1      0.987   0.682   0.473
    2      0.993   0.791   0.493

(with raw targets, ``standardize_targets=False``: 0.991 / 0.985 / 0.990, ridge
0.807 / 0.670 / 0.799, ridge + ICA 0.469 / 0.422 / 0.486.)

Time: a 10-epoch lasso fit of this size took 17 s and the ridge one 11 s on a
quiet core (74-118 s and 28-51 s wall at load 7-10 on the shared 2-core machine).
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
        support_prob=0.5,
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
    # observed min 0.985 (seed 1, raw targets; 0.987 pooled); margin ~0.025
    assert s["lasso"] >= 0.96, s
    # ridge heads identify the latents only up to a linear map: observed max
    # 0.807 (seed 0, raw targets; 0.791 pooled); margin ~0.06
    assert s["ridge"] <= 0.87, s
    # ICA cannot undo the linear map of correlated latents: observed max 0.498
    # (seed 0); margin ~0.1
    assert s["ridge_ica"] <= 0.6, s
    # observed min gap over the better of the two 0.184 (seed 0, raw targets;
    # 0.202 pooled); margin ~0.08
    assert s["lasso"] - max(s["ridge"], s["ridge_ica"]) >= 0.1, s
