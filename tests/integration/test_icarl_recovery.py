"""Recovery runs of MT-iCaRL and iCaRL on processes of their own model family.

Data: 3 latents, 30 environments x 300 samples. Within environment e the latents
are Gaussian, ``z | e ~ N(0, D_e R_e D_e)``: standard deviations D_e ~ U[0.5, 3]
per environment and latent (the variance modulation that identifies them) and a
random correlation matrix R_e with off-diagonals of at most RHO = 0.2 in absolute
value (so the prior is not factorised). The mixing is a small leaky-ReLU MLP:
the two well-conditioned layers of :func:`identrep.datasets.make_segment_sources`
with a leaky ReLU of slope 0.5 between them. The environment enters u through the
learned task embedding (``conditioning="task"``). The prior's family holds these
densities up to the tanh approximation of the cross terms.

Training: u takes 30 values, so the coupling is kept small (K = 8 tanh
statistics, dim T + 1 = 15 <= 30; see the module docstring of
:mod:`identrep.models.vae.icarl`); decoder variance 0.03, Adam lr 1e-2 with
cosine decay over 60 epochs, batch 256 (2100 steps, 5-7 s on one core).

Pearson MCC of the encoder mean, observed over seeds 0-9 (data and model seeded
alike), sorted:
  coupling_warmup=0.34  0.780 0.869 0.881 0.899 0.950 0.950 0.951 0.954 0.962 0.974
  paper (no warm-up)    0.741 0.799 0.814 0.820 0.846 0.883 0.930 0.936 0.950 0.960
  MT-iVAE (reference)   0.813 0.956 0.965 0.970 0.970 0.985 0.986 0.989 0.992 0.993
The worst seed of the warm-up run (seed 5) is hard data: MT-iVAE and a factorised
MT-iCaRL (K = 0) reached 0.81 on it. Without warm-up the coupling lets some seeds
settle in partly rotated solutions (module docstring), hence the wider spread.
Gates: 0.75 with warm-up (0.03 below the worst seed) and 0.70 without (0.04
below); both well under the 0.85 hoped for, which this method does not reach on
every seed here.

A caution on what these two tests show: a plain VAE (same decoder variance, lr,
schedule and epochs) on the same correlated data scored 0.706-0.978 (median 0.92)
over seeds 0-9, because the nearly linear, well-conditioned mixing leaves the
variance-modulated sources' heavy-tailed pooled marginals visible to any
axis-seeking model. They check that MT-iCaRL recovers the sources, not that it
beats an unconditioned VAE here; the single-task test at the end of this file
(iVAE's process, where the VAE stays below 0.88) is the sharper one.
"""

from __future__ import annotations

import numpy as np
import pytest

from identrep.datasets import make_segment_sources
from identrep.metrics import mcc
from identrep.models.vae import ICaRL, MTICaRL

N_ENV, N_PER, N_LATENTS, N_OBS, RHO, SLOPE = 30, 300, 3, 3, 0.2, 0.5

TRAIN = dict(
    n_latents=N_LATENTS,
    conditioning="task",
    tnn_hidden=8,
    decoder_var=0.03,
    lr=1e-2,
    lr_schedule="cosine",
    max_epochs=60,
    batch_size=256,
)


def make_correlated_segments(seed: int):
    """X, Z and environment ids of the process in the module docstring."""
    base = make_segment_sources(
        n_segments=N_ENV,
        n_per_segment=N_PER,
        n_latents=N_LATENTS,
        n_observed=N_OBS,
        n_layers=2,
        random_state=seed,
    )
    rng = np.random.default_rng([seed, 1])
    sd = base.params["std_factors"]
    Z = np.empty_like(base.Z)
    for e in range(N_ENV):
        # a random correlation matrix shrunk towards I: |off-diagonals| <= RHO
        G = rng.standard_normal((N_LATENTS, N_LATENTS + 2))
        C = G @ G.T
        C /= np.sqrt(np.outer(np.diag(C), np.diag(C)))
        R = (1.0 - RHO) * np.eye(N_LATENTS) + RHO * C
        cov = sd[e][:, None] * R * sd[e][None, :]
        rows = slice(e * N_PER, (e + 1) * N_PER)
        Z[rows] = rng.standard_normal((N_PER, N_LATENTS)) @ np.linalg.cholesky(cov).T
    layers = base.params["mixing_layers"]
    H = Z
    for i, A in enumerate(layers):
        H = H @ A.T
        if i < len(layers) - 1:
            H = np.where(H > 0, H, SLOPE * H)
    return H, Z, base.task_ids


@pytest.fixture(scope="module")
def correlated_segments(seed):
    return make_correlated_segments(seed)


@pytest.mark.slow
def test_mticarl_with_coupling_warmup_recovers_correlated_sources(
    correlated_segments, seed
):
    X, Z, env = correlated_segments
    # the embedding prior: the thresholds below were measured on it
    m = MTICaRL(
        coupling_warmup=0.34, task_prior="embedding", random_state=seed, **TRAIN
    )
    m.fit(X, task_ids=env)
    score = mcc(Z, m.transform(X, task_ids=env), "pearson")
    assert m.score_matching_ == "exact"
    assert m.module_.prior.coupling_scale.item() == 1.0  # switched on at epoch 21
    assert score >= 0.75  # observed 0.780-0.974 over seeds 0-9


@pytest.mark.slow
def test_mticarl_as_in_the_paper_recovers_correlated_sources(correlated_segments, seed):
    X, Z, env = correlated_segments
    m = MTICaRL(task_prior="embedding", random_state=seed, **TRAIN)
    m.fit(X, task_ids=env)
    score = mcc(Z, m.transform(X, task_ids=env), "pearson")
    assert score >= 0.70  # observed 0.741-0.960 over seeds 0-9


# ----------------------------------------------------- single-task iCaRL
# iVAE's process (tests/integration/test_ivae_recovery.py): 3 independent Gaussian
# sources whose variances change across 15 segments, one linear mixing layer. A
# factorised prior is the special case c = 0 of iCaRL's family, so this is a process
# of the model's own; the segment enters u as a one-hot code (conditioning="task").
# Same training as the iVAE test plus a small coupling (K = 8 tanh statistics).
# Pearson MCC of the encoder mean over seeds 0-9 (data and model seeded alike):
#   iCaRL  0.949 0.874 0.829 0.970 0.917 0.806 0.941 0.930 0.944 0.989  (min 0.806)
#   VAE    0.841 0.794 0.873 0.690 0.873 0.682 0.745 0.831 0.809 0.856  (median 0.82)
# iCaRL is above the VAE on 9 of 10 seeds (median gap 0.11; seed 2: -0.04), so the
# gate is on iCaRL's own MCC: 0.78, 0.026 below its worst seed.
SEGMENT_TRAIN = {**TRAIN, "decoder_var": 0.1, "max_epochs": 80}


@pytest.mark.slow
def test_icarl_with_the_segment_recovers_variance_modulated_sources(seed):
    data = make_segment_sources(
        n_segments=15, n_per_segment=400, n_latents=3, random_state=seed
    )
    m = ICaRL(random_state=seed, **SEGMENT_TRAIN).fit(data.X, task_ids=data.task_ids)
    score = mcc(data.Z, m.transform(data.X, task_ids=data.task_ids), "pearson")
    assert m.score_matching_ == "exact"
    assert score >= 0.78  # observed 0.806-0.989 over seeds 0-9
