"""The Sparse VAE recovers the factors of Moran et al. (2022), Eq. 9, at rho = 0 and
at a strong correlation, rho = 0.6.

The runs are those of the ``moran2022_synthetic`` study (its data seeds, its
estimator: the SparseVAE defaults with 2 latents, a learned prior correlation,
the best of 4 restarts by the training objective, 1,000 training points, 200
epochs): DCI with gradient-boosted trees fitted on 1,000 fresh points and scored
on 1,000 more.

Calibration: the restarts of these two fits, measured one by one (training
objective in nats per datum, DCI-D; docs/notes.md, branch wt-svae-synth2):

    rho 0,   seed 0: (3.343, .992) (3.351, .991) (3.374, .993) (3.064, .991) -> .991
    rho 0.6, seed 0: (2.495, .987) (2.832, .236) (3.074, .979) (2.989, .989) -> .987

Asserted: DCI-D > 0.9 for the kept fit. At rho = 0.6 one restart of four finds a
rotated solution (DCI-D 0.24) with a training objective 0.34 nats per datum
worse, so the test fails if the objective stops telling the sparse solution from
the rotated one, or if the restarts all rotate; the margin of 0.09 below the
observed 0.987-0.991 is wide against the seed-to-seed spread of the successful
fits (0.979-0.993). The support read from the inclusion probabilities is not
asserted: rows of W can fall below the spike threshold while the features stay
fitted through the per-feature heads (docs/notes.md).
"""

from __future__ import annotations

import pytest

from identrep.experiments.studies.moran2022_synthetic import (
    SparseFactorConfig,
    fit_and_score,
    make_data,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("rho_pct", "seed"), [(0, 0), (60, 0)])
def test_sparse_vae_disentangles_uncorrelated_and_correlated_factors(rho_pct, seed):
    config = SparseFactorConfig(model="Sparse VAE", rho_pct=rho_pct, seed=seed)
    data, _ = make_data(config)
    scores = fit_and_score(config, data, config.model_seed())
    assert scores["dci_d"] > 0.9  # observed 0.991 (rho 0) and 0.987 (rho 0.6)
