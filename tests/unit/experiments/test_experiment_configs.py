"""Run configurations: validated choices, stable run ids, derived seeds."""

from __future__ import annotations

import pytest

from identrep.experiments import RunConfig, get_study
from identrep.utils.seeding import derive_seed


def test_run_config_validates_choices():
    with pytest.raises(ValueError, match="mixing must be one of"):
        RunConfig(table="table1", mixing="weird")
    with pytest.raises(ValueError, match="n_causal must lie in"):
        RunConfig(table="table1", n_latents=3, n_causal=4)
    with pytest.raises(ValueError, match="mixing_source"):
        RunConfig(table="table1", mixing_source="elsewhere")


def test_run_ids_are_unique_and_stable():
    grid = get_study("table1").grid(seeds=5)
    assert len(grid) == 5 * 45  # MTLCM and four baselines
    ids = [c.run_id for c in grid]
    assert len(set(ids)) == len(ids)
    assert ids == [c.run_id for c in get_study("table1").grid(seeds=5)]
    assert get_study("table1").grid(seeds=5, quick=True)[0].seed == 0
    assert len(get_study("table1").grid(quick=True, models=["MTLCM"])) == 3
    assert {c.model for c in get_study("table2").grid(quick=True)} == {
        "MTLCM",
        "iVAE",
        "MT-iVAE",
        "iCaRL",
        "MT-iCaRL",
    }
    with pytest.raises(ValueError, match="models must be a non-empty subset"):
        get_study("table1").grid(models=["PCA"])


def test_derived_seeds_depend_on_content_not_order():
    assert derive_seed("data", 1, "a") == derive_seed("data", 1, "a")
    assert derive_seed("data", 1, "a") != derive_seed("data", 2, "a")
    assert 0 <= derive_seed("x") < 2**32
