"""MTLCM recovers the latents and causal structure of its own (Table 1) process.

Sizes: 100 tasks x 100 samples, d in {5, 10}, k = 2 causal latents per task, random
mixing (paper: 200 tasks; halved to keep this file well under a minute on one core).
Thresholds were set from a calibration over IDENTREP_TEST_SEEDS=0-9; each assertion
states the minimum observed there and the margin taken.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from identrep import MTLCM
from identrep.datasets import make_linear_tasks
from identrep.exceptions import ConvergenceWarning
from identrep.metrics import causal_accuracy, match_latents, mcc, mcc_per_task

pytestmark = pytest.mark.slow


@functools.cache
def _problem(d: int, seed: int):
    return make_linear_tasks(
        n_tasks=100,
        n_samples=100,
        n_latents=d,
        n_causal=2,
        mixing="random",
        random_state=seed,
    )


@functools.cache
def _fit(d: int, seed: int, init: str = "jd") -> MTLCM:
    data = _problem(d, seed)
    with warnings.catch_warnings():
        # the random start may stop at max_iter; the test compares likelihoods
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MTLCM(init=init, random_state=seed).fit(
            data.X, data.y, task_ids=data.task_ids
        )


# Observed minima over seeds 0-9 (jd init, defaults):
#                      per-task Spearman   pooled Pearson   causal accuracy
#   d = 5               0.9931 (seed 6)     0.9947 (seed 6)  0.956 (seed 8)
#   d = 10              0.9720 (seed 8)     0.9754 (seed 8)  0.939 (seed 4)
# At d = 10 seeds 5 and 8 sit near 0.98 (all other seeds >= 0.997): that is the
# maximum-likelihood estimate itself at 100 tasks, not an optimiser failure - starting
# L-BFGS at the true mixing reaches the same likelihood and the same MCC (0.9806,
# 0.9756), and 5 restarts agree. Margins: ~0.008 at d = 5 and ~0.02 at d = 10 below
# the observed minimum, i.e. about one such hard seed's shortfall again.
THRESHOLDS = {5: dict(task=0.985, pooled=0.985), 10: dict(task=0.95, pooled=0.95)}


@pytest.mark.parametrize("d", [5, 10])
def test_mtlcm_recovers_latents(seed, d):
    data = _problem(d, seed)
    m = _fit(d, seed)
    Z_hat = m.transform(data.X)
    per_task = mcc_per_task(data.Z, Z_hat, data.task_ids, "spearman")
    pooled = mcc(data.Z, Z_hat, "pearson")
    assert per_task >= THRESHOLDS[d]["task"], (per_task, pooled)
    assert pooled >= THRESHOLDS[d]["pooled"], (per_task, pooled)


@pytest.mark.parametrize("d", [5, 10])
def test_mtlcm_recovers_causal_indicators(seed, d):
    """Causal accuracy after matching latents, overall and on identifiable entries.

    Accuracy is intrinsically below 1: a spurious latent z = gamma y + N(0, 0.1^2)
    with tiny |gamma| is, given y, almost pure noise of variance ~1 after per-task
    standardisation - exactly what a causal latent looks like - so the likelihood
    cannot tell them apart. gamma ~ U(-1, 1), so ~10% of spurious entries have
    |gamma| < 0.1; over seeds 0-9 these caused all but at most one error per fit.
    Observed minima: overall 0.956 (d = 5) and 0.939 (d = 10); on entries that are
    causal or have |gamma| >= 0.1, 0.998. Thresholds 0.90 and 0.99 leave a margin of
    ~4 and ~1 points (the overall number moves with how many small gammas a seed
    draws).
    """
    data = _problem(d, seed)
    m = _fit(d, seed)
    matching = match_latents(data.Z, m.transform(data.X))
    acc = causal_accuracy(data.causal, m.causal_indicators_, matching)
    assert acc >= 0.90, acc
    truth = data.causal.astype(bool)
    pred = m.causal_indicators_[:, matching] >= 0.5
    clear = truth | (np.abs(data.gammas) >= 0.1)
    acc_clear = float((pred == truth)[clear].mean())
    assert acc_clear >= 0.99, acc_clear


def test_jd_init_at_least_as_likely_as_random_init(seed):
    """The joint-diagonalisation start ends at least as high as the random start.

    Pooled MCC is not compared: where both starts reach the same optimum (seeds 1, 4,
    7) their MCCs differ by ~1e-8 in either direction. Over seeds 0-9 the likelihood
    of jd minus random ranged from +1.8e-7 (same optimum) to +8.2 (random stuck at
    pooled MCC 0.25, seeds 5 and 8). The tolerance 1e-3 covers how far apart L-BFGS
    stops within one flat optimum (restarts from different starts differed by up
    to 2e-4 per sample).
    """
    jd, rnd = _fit(10, seed, "jd"), _fit(10, seed, "random")
    assert jd.log_likelihood_ >= rnd.log_likelihood_ - 1e-3, (
        jd.log_likelihood_,
        rnd.log_likelihood_,
    )
