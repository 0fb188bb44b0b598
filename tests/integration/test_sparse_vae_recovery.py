"""The Sparse VAE recovers the factors of Moran et al. (2022), Eq. 9, at rho = 0 and
rho = 0.2.

The runs are those of the ``moran2022_synthetic`` study (its data seeds, its
estimator: the SparseVAE defaults with 2 latents, 1,000 training points, 200
epochs): DCI with gradient-boosted trees fitted on 1,000 fresh points and scored on
1,000 more.

Calibration (``identrep reproduce moran2022_synthetic --seeds 10 --models "Sparse
VAE,VAE"``, study seeds 0-9; ``IDENTREP_TEST_SEEDS`` does not apply, the seeds are
the study's):

    rho  seed: 0     1     2     3     4     5     6     7     8     9   anchor
    0  SVAE  .991  .984  .990  .990  .992  .989  .992  .990  .990  .987   0.99
       VAE   .961  .288  .944  .960  .070  .967  .875  .955  .654  .884   0.53
    0.2 SVAE .990  .990  .992  .989  .306  .991  .990  .991  .992  .385   0.94
       VAE   .750  .723  .123  .453  .224  .248  .925  .962  .288  .309   0.62

Asserted, on three fits to stay near a minute on 2 cores: DCI-D > 0.95 at rho = 0
(seeds 0 and 1) and at rho = 0.2 (seed 0). At rho = 0 every seed is in
[0.984, 0.992], so the margin of 0.03 is several times the spread; at rho = 0.2
two of ten seeds fail (4 and 9: a rotated solution), so this case checks the
typical seed, not the failure rate. Not asserted, because they do not hold yet
(docs/notes.md, "Sparse VAE on the synthetic process"): the support read from the
inclusion probabilities (rows of W fall below the spike threshold while the
features stay fitted) and rho >= 0.4 (at 0.4, 5 of 10 seeds reach 0.9).
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
