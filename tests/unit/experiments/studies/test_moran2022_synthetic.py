"""Moran et al. (2022) synthetic study: its grid, and a tiny run through the
sweep and the report (anchors beside ours, support metrics for the Sparse VAE)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from identrep.experiments import get_study, published_results, run_sweep, write_report
from identrep.experiments.studies.moran2022_synthetic import (
    MORAN_MODELS,
    QUICK_EPOCHS,
    RHO_PCTS,
    VARIANTS,
    SparseFactorConfig,
    _estimator,
)


def test_grid_covers_every_model_correlation_and_seed():
    study = get_study("moran2022_synthetic")
    assert MORAN_MODELS == ("Sparse VAE", "VAE", "beta-VAE", "VSC")
    assert study.models == (*MORAN_MODELS, *VARIANTS) and VARIANTS == ("VAE_KL1overK",)
    grid = study.grid(seeds=3)
    assert len(grid) == 5 * 5 * 3
    assert sorted({c.rho_pct for c in grid}) == list(RHO_PCTS) == [0, 20, 40, 60, 80]
    assert {c.max_epochs for c in grid} == {None}
    assert {(c.n_train, c.n_eval, c.n_latents) for c in grid} == {(1000, 2000, 2)}
    # every model of a cell sees the same data
    cells = {}
    for c in grid:
        cells.setdefault((c.rho_pct, c.seed), set()).add(c.data_key())
    assert all(len(v) == 1 for v in cells.values())
    assert len({c.model_seed() for c in grid}) == len(grid)
    quick = study.grid(quick=True)
    assert {c.rho_pct for c in quick} == {0, 60} and {c.seed for c in quick} == {0}
    assert {c.max_epochs for c in quick} == {QUICK_EPOCHS}


def test_added_models_keep_the_stored_run_ids_and_their_settings():
    """VSC and VAE_KL1overK joined the study after its 100 stored runs (Sparse VAE
    and VAE, docs/results/moran2022_synthetic); those and the registered beta-VAE
    keep their ids and seeds, and the new rows train with the shared settings."""
    grid = get_study("moran2022_synthetic").grid(seeds=10)
    ids = {c.run_id: c for c in grid}
    first = ids["moran2022_synthetic-SparseVAE-r0-s0-7c8f7ea4"]
    assert first.model_seed() == 1101706994  # as in the stored results.csv
    assert "moran2022_synthetic-beta-VAE-r80-s9-787fcccb" in ids
    c = next(c for c in grid if c.model == "VAE_KL1overK")
    est = _estimator(c, 7)
    assert type(est).__name__ == "BetaVAE" and est.beta == 0.5  # 1 / K, K = 2
    vsc = _estimator(next(c for c in grid if c.model == "VSC"), 7)
    vae = _estimator(next(c for c in grid if c.model == "VAE"), 7)
    assert type(vsc).__name__ == "VSC"
    shared = ("hidden_sizes", "lr", "batch_size", "max_epochs", "lr_schedule")
    for name in (*shared, "decoder_var", "val_fraction", "patience"):
        assert getattr(vsc, name) == getattr(vae, name) == getattr(est, name), name
    assert vsc.max_epochs == 200 and vsc.random_state == 7


def test_config_errors():
    with pytest.raises(ValueError, match="rho_pct"):
        SparseFactorConfig(rho_pct=99)
    with pytest.raises(ValueError, match="model must be one of"):
        SparseFactorConfig(model="NMF")
    with pytest.raises(ValueError, match="n_train"):
        SparseFactorConfig(n_train=0)


def test_anchors_are_the_issue_table():
    pub = published_results("moran2022_synthetic")
    svae = pub[pub["model"] == "Sparse VAE"].set_index("rho_pct")["mcc_mean"]
    assert svae.to_dict() == {0: 99, 20: 94, 40: 90, 60: 68, 80: 26}


def test_tiny_run_reports_dci_and_support_beside_the_anchors(tmp_path):
    study = get_study("moran2022_synthetic")
    configs = [
        dataclasses.replace(c, n_train=60, n_eval=40, max_epochs=1)
        for c in study.grid(seeds=1, rhos=(0, 40))
    ]
    recs = run_sweep(configs, tmp_path, progress=False)
    assert len(recs) == 10
    for r in recs:
        m = r["metrics"]
        assert 0 <= m["dci_d"] <= 1 and 0 <= m["dci_c"] <= 1
        assert np.isfinite(m["mse"]) and m["mse"] > 0  # Figure 3a's panel
        assert m["min_feature_r2"] <= 1
        if r["config"]["model"] == "Sparse VAE":
            assert 0 <= m["support_f"] <= 1 and m["exact_support"] in (0.0, 1.0)
            assert 0 <= m["empty_rows"] <= 7
            assert 0 <= m["collapsed_rows"] <= 7
            # 4 restarts: the kept fit's training objective is recorded
            assert np.isfinite(m["objective"])
        else:
            assert "support_f" not in m
    df, text = write_report(tmp_path)
    res = pd.read_csv(tmp_path / "results.csv")
    assert {"dci_d", "dci_c", "dci_i", "support_f", "exact_support"} <= set(res.columns)
    assert "anchor DCI-D" in text and "Quick run: 1 epochs" in text
    # the paper's VSC row and the labelled variant are reported with the others
    for name in ("VSC", "VAE_KL1overK"):
        assert any(ln.startswith(f"| {name} | 0 ") for ln in text.splitlines())
    # the anchors (99 at rho 0, 90 at rho 0.4) stand beside our Sparse VAE rows
    line = next(ln for ln in text.splitlines() if ln.startswith("| Sparse VAE | 40 "))
    assert "90.00" in line
    ours = res[(res["model"] == "Sparse VAE") & (res["rho_pct"] == 0)]["dci_d"]
    assert np.isfinite(ours).all()
    # one figure per plotted metric (DCI-D, held-out MSE, support F), none lost
    plots = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert {
        f"moran2022_synthetic_{tag}_vs_rho_pct.png"
        for tag in ("mcc", "mse", "support_f")
    } <= plots
    assert "held-out MSE" in text


def test_report_counts_paired_wins_empty_rows_and_exact_supports():
    from identrep.experiments.studies.moran2022_synthetic import _intro

    rows = []
    # rho 0: the Sparse VAE wins on seeds 0 and 1, loses on seed 2; one run has
    # an empty row, one the exact support, one (another) a collapsed row of W
    for seed, (s, v, empty, exact, cut, r2) in enumerate(
        [
            (0.99, 0.5, 0, 1, 0, 0.81),
            (0.98, 0.9, 2, 0, 0, 0.79),
            (0.3, 0.6, 0, 0, 1, 0.02),
        ]
    ):
        rows.append(
            dict(
                model="Sparse VAE",
                rho_pct=0,
                seed=seed,
                dci_d=s,
                empty_rows=empty,
                exact_support=exact,
                collapsed_rows=cut,
                min_feature_r2=r2,
                max_epochs=None,
            )
        )
        rows.append(dict(model="VAE", rho_pct=0, seed=seed, dci_d=v, max_epochs=None))
    # rho 0.8: two seeds, records from before the collapsed-row metric on one;
    # a VAE run without its Sparse VAE partner is not paired
    for seed, cut, r2 in ((0, np.nan, np.nan), (2, 0, 0.85)):
        rows.append(
            dict(
                model="Sparse VAE",
                rho_pct=80,
                seed=seed,
                dci_d=0.2,
                empty_rows=0,
                exact_support=1,
                collapsed_rows=cut,
                min_feature_r2=r2,
                max_epochs=None,
            )
        )
    rows.append(dict(model="VAE", rho_pct=80, seed=0, dci_d=0.1, max_epochs=None))
    rows.append(dict(model="VAE", rho_pct=80, seed=1, dci_d=0.9, max_epochs=None))
    rows.append(dict(model="VAE", rho_pct=80, seed=2, dci_d=0.1, max_epochs=None))
    text = _intro(pd.DataFrame(rows))
    assert "| 0 | 3 | 2/3 | 30.00 | 1/3 | 1/3 | 0.02 | 1/3 |" in text
    assert "| 80 | 2 | 2/2 | 20.00 | 0/2 | 0/1 | 0.85 (1 of 2 runs) | 2/2 |" in text
    # records without the collapsed-row metric at all
    old = pd.DataFrame(rows).drop(columns=["collapsed_rows", "min_feature_r2"])
    assert "| 0 | 3 | 2/3 | 30.00 | 1/3 | - | - | 1/3 |" in _intro(old)
    # no table without both models
    only = pd.DataFrame([r for r in rows if r["model"] == "VAE"])
    assert "Sparse VAE > VAE" not in _intro(only)
