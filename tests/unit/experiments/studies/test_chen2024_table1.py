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
