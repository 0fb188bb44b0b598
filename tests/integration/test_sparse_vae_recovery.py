"""The Sparse VAE recovers the factors of Moran et al. (2022), Eq. 9, at rho = 0 and
rho = 0.2.

The runs are those of the ``moran2022_synthetic`` study (its data seeds, its
estimator: the SparseVAE defaults with 2 latents, 1,000 training points, 200
epochs): DCI with gradient-boosted trees fitted on 1,000 fresh points and scored on
1,000 more.

Calibration (``identrep reproduce moran2022_synthetic --seeds 3 --models "Sparse
VAE,VAE"``, study seeds 0-2; ``IDENTREP_TEST_SEEDS`` does not apply, the seeds are
the study's):

    rho    seed 0   seed 1   seed 2    authors' code (anchor, 10 seeds)
    0      0.991    0.984    0.990     0.99
    0.2    0.990    0.990    0.992     0.94

Asserted: DCI-D > 0.95 at rho = 0 (seeds 0 and 1) and at rho = 0.2 (seed 0);
observed minimum 0.984, so the margin is 0.03, several times the spread of DCI-D
over seeds here (0.008) and over the trees' randomness. Three fits keep the test
near a minute on 2 cores. Not asserted, because they do not hold yet (see
docs/notes.md, "Sparse VAE on the synthetic process"): the support read from the
inclusion probabilities (rows of W fall below the spike threshold while the
features stay fitted) and rho >= 0.4, where some seeds fail.
"""

from __future__ import annotations

import functools

import pytest

from identrep.experiments.studies.moran2022_synthetic import (
    SparseFactorConfig,
    fit_and_score,
    make_data,
)

pytestmark = pytest.mark.slow


@functools.cache
def _dci_d(rho_pct: int, seed: int) -> float:
    config = SparseFactorConfig(model="Sparse VAE", rho_pct=rho_pct, seed=seed)
    data, _ = make_data(config)
    return fit_and_score(config, data, config.model_seed())["dci_d"]


@pytest.mark.parametrize(("rho_pct", "seed"), [(0, 0), (0, 1), (20, 0)])
def test_sparse_vae_disentangles_uncorrelated_and_correlated_factors(rho_pct, seed):
    assert _dci_d(rho_pct, seed) > 0.95  # observed >= 0.984: margin 0.03
