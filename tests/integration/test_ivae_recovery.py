"""Recovery runs of iVAE / MT-iVAE on iVAE's own process (variance-modulated sources).

Data: 3 Gaussian sources, 15 segments x 400 samples, per-segment std factors U[0.5,
3], one well-conditioned linear mixing layer with unit-norm columns
(:func:`identrep.datasets.make_segment_sources`). The segment is the auxiliary
variable u: a one-hot code for :class:`IVAE` (``conditioning="task"``), a learned
embedding for :class:`MTIVAE`. A plain :class:`VAE` on the same data is the
comparator: its Gaussian prior is rotation-invariant, so it does not identify the
sources. Scores are Pearson MCC of the encoder mean (the right metric for iVAE's
component-wise affine indeterminacy).

Training: decoder variance 0.1 (the ``ilkhem/iVAE`` value; the estimator default
0.01 is icebeem's, which needs several times more epochs for the same MCC here),
Adam lr 1e-2 with cosine decay over 80 epochs, batch 256 (about 1700 steps, 3-6 s
a model on one core).

Observed over seeds 0-9 (data and model seeded alike):
  iVAE   0.939 0.946 0.957 0.967 0.986 0.990 0.991 0.991 0.991 0.992 (min 0.939)
  MT-iVAE 0.939 0.951 0.952 0.955 0.986 0.992 0.993 0.994 0.994 0.996 (min 0.939)
  VAE    0.682 0.690 0.745 0.794 0.809 0.831 0.841 0.856 0.873 0.873 (max 0.873)
  iVAE - VAE per seed: smallest 0.066 (seed 2), largest 0.304.
Gates: MCC >= 0.9 for iVAE and MT-iVAE (0.039 below the worst seed) and iVAE at
least 0.04 above the VAE on the same data (0.026 below the smallest gap).
"""

from __future__ import annotations

import pytest

from identrep.datasets import make_segment_sources
from identrep.metrics import mcc
from identrep.models.vae import IVAE, MTIVAE, VAE

TRAIN = dict(
    n_latents=3,
    decoder_var=0.1,
    lr=1e-2,
    lr_schedule="cosine",
    max_epochs=80,
    patience=None,
    batch_size=256,
)


@pytest.fixture(scope="module")
def segments(seed):
    return make_segment_sources(
        n_segments=15, n_per_segment=400, n_latents=3, random_state=seed
    )


@pytest.mark.slow
def test_ivae_with_the_segment_recovers_sources_and_vae_does_not(segments, seed):
    data = segments
    ivae = IVAE(conditioning="task", random_state=seed, **TRAIN)
    ivae.fit(data.X, task_ids=data.task_ids)
    score = mcc(data.Z, ivae.transform(data.X, task_ids=data.task_ids), "pearson")
    vae = VAE(random_state=seed, **TRAIN).fit(data.X)
    score_vae = mcc(data.Z, vae.transform(data.X), "pearson")
    assert score >= 0.9  # observed 0.939-0.992 over seeds 0-9
    assert score >= score_vae + 0.04  # observed gap 0.066-0.304


@pytest.mark.slow
def test_mtivae_with_a_task_embedding_recovers_sources(segments, seed):
    data = segments
    # the embedding prior: the thresholds above were measured on it
    m = MTIVAE(conditioning="task", task_prior="embedding", random_state=seed, **TRAIN)
    m.fit(data.X, task_ids=data.task_ids)
    score = mcc(data.Z, m.transform(data.X, task_ids=data.task_ids), "pearson")
    assert score >= 0.9  # observed 0.939-0.996 over seeds 0-9
    assert m.task_embeddings_.shape == (15, 3)
