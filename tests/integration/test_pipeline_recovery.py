"""Recovery on a small non-linear (Table 2-style) problem: MTRN and the pipeline.

Thresholds come from ``IDENTREP_TEST_SEEDS=0-9`` (data and models seeded alike); each
states the observed minimum and mean. The file takes about 20 s per seed on one core.
"""

from __future__ import annotations

import pytest

from identrep import MTRN, TaskIdentifiable
from identrep.datasets import make_nonlinear_tasks
from identrep.metrics import mcc, mcc_per_task, weak_mcc

pytestmark = pytest.mark.slow

D = 5
PROBLEM = dict(n_tasks=100, n_samples=100, n_latents=D, n_causal=2, n_observed=30)
MTRN_KW = dict(max_epochs=150, batch_size=256)


@pytest.fixture(scope="module")
def data(seed):
    return make_nonlinear_tasks(**PROBLEM, random_state=seed)


@pytest.mark.parametrize(
    ("heads", "threshold"),
    [
        # joint heads (refit exactly every epoch): observed min 0.9950, mean 0.9966
        # over seeds 0-9; margin 0.015. Without the refit 6 of 10 seeds stalled at
        # 0.81-0.89 (one latent direction unlearned), which this threshold catches.
        ("joint", 0.98),
        # ridge heads: observed min 0.9957, mean 0.9970; margin 0.016
        ("ridge", 0.98),
    ],
)
def test_mtrn_is_linearly_identifiable(data, seed, heads, threshold):
    m = MTRN(n_latents=D, heads=heads, random_state=seed, **MTRN_KW)
    F = m.fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    assert weak_mcc(data.Z, F) >= threshold


def test_pipeline_recovers_latents_up_to_permutation_and_scale(data, seed):
    pipe = TaskIdentifiable(n_latents=D, mtrn_params=MTRN_KW, random_state=seed)
    Z_hat = pipe.fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    # pooled strong MCC (Spearman): observed min 0.9970, mean 0.9976; margin 0.017
    assert mcc(data.Z, Z_hat, "spearman") >= 0.98
    # per task, the paper's protocol: observed min 0.9961, mean 0.9968; margin 0.016
    assert mcc_per_task(data.Z, Z_hat, data.task_ids) >= 0.98
    # the causal indicators are (T, d) numbers in [0, 1]
    assert pipe.causal_indicators_.shape == (PROBLEM["n_tasks"], D)
    assert ((pipe.causal_indicators_ >= 0) & (pipe.causal_indicators_ <= 1)).all()
