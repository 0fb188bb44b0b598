"""Chen et al. Table 1: the authors' mixing matrices."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from identrep.experiments import RunConfig
from identrep.experiments.runner import make_data
from identrep.experiments.studies.chen2024_table1 import reference_mixing

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


def test_reference_mixing_is_the_authors_draw():
    torch.manual_seed(3)
    expected = torch.randn(7, 7).double().numpy()
    np.testing.assert_array_equal(reference_mixing(7, "random", 3), expected)
    Q = reference_mixing(7, "orthogonal", 3)
    np.testing.assert_allclose(Q.T @ Q, np.eye(7), atol=1e-12)
    np.testing.assert_array_equal(reference_mixing(4, "identity", 0), np.eye(4))
    data, _ = make_data(dataclasses.replace(SMALL, seed=3))
    np.testing.assert_array_equal(data.mixing, reference_mixing(3, "random", 3))
    seeded, _ = make_data(dataclasses.replace(SMALL, seed=3, mixing_source="seeded"))
    assert not np.allclose(seeded.mixing, data.mixing)


def test_multitask_baselines_get_their_own_settings():
    from identrep.experiments.studies._chen2024 import baseline_estimator
    from identrep.experiments.studies.chen2024_table1 import (
        BASELINE_SETTINGS,
        MT_BASELINE_SETTINGS,
    )

    def est(model, **over):
        config = dataclasses.replace(SMALL, model=model, **over)
        return baseline_estimator(config, 0, BASELINE_SETTINGS, MT_BASELINE_SETTINGS)

    mt = est("MT-iVAE")
    assert (mt.task_prior, mt.whiten, mt.decoder_var) == ("free", "zca", "learned")
    assert (mt.lr, mt.max_epochs, mt.encoder) == (1e-2, 200, "linear")
    assert est("MT-iVAE", max_epochs=10).max_epochs == 10  # --quick caps
    assert est("MT-iCaRL").whiten == "zca" and est("MT-iCaRL").max_epochs == 100
    single = est("iVAE")  # the single-task rows keep the shared settings
    assert (single.lr, single.decoder_var, single.max_epochs) == (1e-3, 0.01, 100)
