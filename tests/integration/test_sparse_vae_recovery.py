"""The Sparse VAE recovers the factors of Moran et al. (2022), Eq. 9, and their
exact support, at a strong factor correlation, rho = 0.8.

The run is that of the ``moran2022_synthetic`` study (its data seed, its
estimator: the SparseVAE defaults with 2 latents, a learned prior correlation,
per-feature head rows of fixed norm, the best of 4 restarts by the training
objective, 1,000 training points, 200 epochs): DCI with gradient-boosted trees
fitted on 1,000 fresh points and scored on 1,000 more; the support is
``support_`` (inclusion probability > 0.5) against the true 7 x 2 support, its
columns matched to the factors through the latents.

Calibration: the 4 restarts of this fit, measured one by one (training objective
in nats per datum, DCI-D, support F-score; docs/notes.md, branches wt-svae-synth2
and wt-svae-synth3):

    (2.340, .985, 1.00) (2.360, .989, 1.00) (3.258, .149, .53) (2.358, .985, 1.00)
    -> kept: restart 1, DCI-D .985, exact support, no empty row

rho = 0.8 is the hardest correlation of the study: the authors' Sparse VAE
reached DCI-D 0.26 there and our VAE 0.06. Asserted for the kept fit: DCI-D >
0.9, the exact true support, no feature left without a factor, no collapsed
row of W and every feature reconstructed (held-out R^2 > 0.7). Three of the
four restarts find the sparse solution; the fourth (a rotated fit, DCI-D 0.15)
has an objective 0.9 nats per datum worse, so the test fails if the objective
stops preferring the sparse fit, if the restarts all rotate, or if the masks of
a fitted feature fall under the spike threshold (the empty rows that the
per-feature heads allowed before their norms were fixed). The margin of 0.085
below the observed 0.985 is wide against the spread of the successful fits over
the study's seeds and correlations (docs/notes.md); the support assertions have
no margin but held in every one of the three sparse restarts.
"""

from __future__ import annotations

import pytest

from identrep.experiments.studies.moran2022_synthetic import (
    SparseFactorConfig,
    fit_and_score,
    make_data,
)

pytestmark = pytest.mark.slow


def test_sparse_vae_recovers_factors_and_exact_support_at_rho_08():
    config = SparseFactorConfig(model="Sparse VAE", rho_pct=80, seed=0)
    data, _ = make_data(config)
    scores = fit_and_score(config, data, config.model_seed())
    assert scores["dci_d"] > 0.9  # observed 0.985
    assert scores["exact_support"] == 1.0  # observed: exact (F = 1.00)
    assert scores["empty_rows"] == 0.0
    # no feature cut off from the latents: no row of W at or under 5 % of its
    # largest mask (observed 0; the smallest row was 0.16-0.50 of the largest
    # in 48 restarts at rho 0.8, docs/notes.md, branch wt-svae-syn4), and every
    # feature reconstructed: held-out R^2 of the worst one observed 0.816; a
    # fitted x1 = z1 + noise sits near 1 / 1.25 = 0.8 (0.79-0.82 in the kept
    # fits), a fit that leaves a latent unused reaches 0.58-0.62 and a
    # collapsed feature about 0
    assert scores["collapsed_rows"] == 0.0
    assert scores["min_feature_r2"] > 0.7
