"""The study registry: every study builds its grid, has its published numbers, and
declares everything the runner, sweep, report and CLI need."""

from __future__ import annotations

import dataclasses
import re

import pytest

from identrep.experiments import (
    STUDIES,
    TABLES,
    get_study,
    get_table,
    published_results,
)
from identrep.experiments.configs import StudyConfig
from identrep.experiments.registry import Study, register_study


def test_the_paper_studies_are_registered():
    assert {
        "lachapelle2023",
        "lachapelle2023_frozen",
        "moran2022_synthetic",
        "moran2022_table1a",
        "moran2022_table1b",
        "moran2022_table2",
        "moran2022_table4",
        "qm9",
        "table1",
        "table2",
        "table3",
    } <= set(STUDIES)
    assert TABLES is STUDIES and get_table is get_study


def test_unknown_table_lists_known_ones():
    with pytest.raises(
        ValueError,
        match=r"Unknown study 'table9'; known studies: "
        + re.escape(", ".join(sorted(STUDIES)))
        + r"\.",
    ):
        get_study("table9")


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        register_study(dataclasses.replace(get_study("table1")))


@pytest.mark.parametrize(
    "name", ["qm9", "table1", "table2", "table3", "moran2022_table4"]
)
def test_every_study_builds_its_grid(name):
    study = get_study(name)
    assert isinstance(study, Study) and study.models
    for quick in (False, True):
        grid = study.grid(quick=quick)
        assert grid, name
        ids = [c.run_id for c in grid]
        assert len(set(ids)) == len(ids)
        assert ids == [c.run_id for c in study.grid(quick=quick)]  # stable
        for c in grid:
            assert isinstance(c, StudyConfig) and dataclasses.is_dataclass(c)
            assert c.table == name and c.model in study.models
            with pytest.raises(dataclasses.FrozenInstanceError):
                c.seed = 99
            # the report's configuration columns exist on the configuration (a
            # field its record leaves out at the default, as QM9's mtlcm_n_init,
            # is a blank cell of the runs that predate it)
            names = {f.name for f in dataclasses.fields(c)}
            assert set(study.report.columns) <= names
            assert set(study.report.columns) - set(c.to_dict()) <= {"mtlcm_n_init"}
            assert set(study.report.group) <= set(c.to_dict())
            assert set(study.report.keys) <= set(c.to_dict())
        assert {c.model for c in grid} == set(study.models)
    with pytest.raises(ValueError, match="models must be a non-empty subset"):
        study.grid(models=["PCA"])
    # every study-declared option has a default the grid accepts
    defaults = {o.param: o.value(o.default) for o in study.options}
    assert study.grid(quick=True, **defaults)


@pytest.mark.parametrize("name", ["table1", "table2", "table3"])
def test_every_published_row_is_a_row_of_the_grid_and_mtlcm_has_all(name):
    """The published numbers cover the study's rows: every MTLCM row of the
    default grid has one, and the baselines have one wherever the paper reports
    it (Table 3 leaves out diverged baselines); no published row is orphaned."""
    study = get_study(name)
    pub = published_results(name)
    keys = list(study.report.keys)
    assert {"model", *keys, "mcc_mean", "mcc_std"} <= set(pub.columns)
    rows = {(c.model, *(getattr(c, k) for k in keys)) for c in study.grid(seeds=2)}
    published = {tuple(r) for r in pub[["model", *keys]].itertuples(index=False)}
    compared = {m for _, m, _ in study.report.compare if m is not None}
    mtlcm = {r for r in rows if r[0] == "MTLCM"}
    assert mtlcm <= published
    for extra in compared:  # e.g. the MTRN weak MCC beside the MTLCM rows
        assert {(extra, *r[1:]) for r in mtlcm} <= published
    assert {r for r in published if r[0] not in compared} <= rows
    baseline_rows = {r for r in rows if r[0] != "MTLCM"}
    covered = baseline_rows & published
    assert len(covered) >= (len(baseline_rows) * 3) // 4
    if name != "table3":
        assert covered == baseline_rows
    assert not pub[["mcc_mean", "mcc_std"]].isna().any().any()


def test_qm9_has_no_published_table_and_says_what_the_paper_reports():
    study = get_study("qm9")
    assert published_results("qm9") is None
    assert "above 0.9" in study.published_note


def test_studies_declare_their_options_and_qm9_grid_errors():
    qm9 = get_study("qm9")
    assert [o.flag for o in qm9.options] == [
        "--latent-dims",
        "--n-molecules",
        "--max-epochs",
        "--patience",
        "--mtlcm-n-init",
        "--qm9-source",
    ]
    grid = qm9.grid(latent_dims=(2, 3), seeds=2, n_molecules=50, hidden=8)
    assert [(c.n_latents, c.seed) for c in grid] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    assert {c.hidden for c in grid} == {8} and {c.n_molecules for c in grid} == {50}
    with pytest.raises(ValueError, match="Unknown QM9 settings"):
        qm9.grid(width=3)
    with pytest.raises(ValueError, match="latent_dims must be distinct"):
        qm9.grid(latent_dims=(2, 2))
    with pytest.raises(ValueError, match="seeds must be"):
        qm9.grid(seeds=0)
    with pytest.raises(ValueError, match="max_epochs must be"):
        qm9.grid(max_epochs=0)
    with pytest.raises(ValueError, match="n_molecules must be"):
        qm9.grid(n_molecules=0)
    assert {c.patience for c in qm9.grid(seeds=1, patience=5)} == {5}
    with pytest.raises(ValueError, match="patience must be a positive integer or None"):
        qm9.grid(patience=0)
    latent = qm9.options[0]
    assert latent.value("5, 6,7") == [5, 6, 7]
    with pytest.raises(ValueError, match="--latent-dims must be comma-separated"):
        latent.value("5,x")
    flags = {o.flag for o in get_study("table1").options}
    assert flags == {"--mixing", "--mixing-source"}
