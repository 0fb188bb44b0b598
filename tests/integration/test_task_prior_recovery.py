"""Recovery run of MT-iVAE's free task prior on Chen et al.'s linear process.

Data: :func:`identrep.datasets.make_linear_tasks`, 100 tasks x 100 samples, 5
latents of which 2 causal per task, random mixing. Within a task every latent has
unit variance; what differs across tasks is how each latent moves with the target y
(causal latents through the regression, spurious ones through gamma_t). The free
prior p(z_j | y, t) = N(a_tj y + b_tj, exp(s_tj)) can represent that; iVAE's prior
network with a zero mean (``task_prior="embedding"``, the authors' iVAE) cannot.

Training (both fits alike): linear encoder/decoder, pooled ZCA whitening of x,
learned decoder variance, Adam lr 1e-2, batch 256, early stopping within 100
epochs (15-40 s a fit on one core of a loaded machine). Scores: per-task Spearman
MCC (the paper's protocol), and the correlation over tasks between each learned
slope a_t (matched latent) and the true latent's per-task regression slope on the
standardised y.

Observed over seeds 0-4 (data and model seeded alike; seed 4 stopped at the cap):
  free       MCC 0.9996 0.9995 0.9974 0.9979 0.9997 (min 0.9974)
  embedding  MCC 0.7083 0.7347 0.7268 0.7246 0.7043 (max 0.7347)
  slopes     correlation, smallest over latents, 0.9991-0.9994
Gates: free MCC >= 0.98 (0.017 below the worst seed), embedding at least 0.1 below
it (smallest gap 0.265), slope correlation >= 0.95 (0.049 below the smallest).
"""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import make_linear_tasks
from identrep.metrics import match_latents, mcc_per_task
from identrep.models.vae import MTIVAE

TRAIN = dict(
    n_latents=5,
    encoder="linear",
    whiten="zca",
    decoder_var="learned",
    lr=1e-2,
    batch_size=256,
    max_epochs=100,
)


@pytest.mark.slow
def test_free_task_prior_recovers_the_latents_and_their_slopes(seed):
    data = make_linear_tasks(
        n_tasks=100, n_samples=100, n_latents=5, n_causal=2, random_state=seed
    )
    scores = {}
    for task_prior in ("free", "embedding"):
        m = MTIVAE(task_prior=task_prior, random_state=seed, **TRAIN)
        m.fit(data.X, data.y, task_ids=data.task_ids)
        Z_hat = m.transform(data.X, data.y, task_ids=data.task_ids)
        scores[task_prior] = mcc_per_task(data.Z, Z_hat, data.task_ids, "spearman")
        if task_prior == "free":
            free, Z_free = m, Z_hat
    assert scores["free"] >= 0.98  # observed 0.9974-0.9997 over seeds 0-4
    assert scores["free"] >= scores["embedding"] + 0.1  # observed gap 0.265-0.295

    # the learned slopes follow the true per-task slopes of the matched latents
    perm = match_latents(data.Z, Z_free)
    ys = (data.y - data.y.mean()) / data.y.std()
    slopes = free.task_prior_params_["slope"]
    for j in range(5):
        true = [
            np.polyfit(ys[data.task_ids == t], data.Z[data.task_ids == t, j], 1)[0]
            for t in range(100)
        ]
        corr = abs(np.corrcoef(true, slopes[:, perm[j]])[0, 1])
        assert corr >= 0.95  # observed >= 0.9991 over latents and seeds 0-4
