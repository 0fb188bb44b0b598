"""Reports from records: results.csv, report.md beside the paper, LaTeX, plots."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from identrep.experiments import (
    RunConfig,
    published_results,
    run_sweep,
    write_report,
)

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


def test_report_has_required_columns_and_published_numbers(tmp_path):
    configs = [dataclasses.replace(SMALL, seed=s) for s in range(2)]
    run_sweep(configs, tmp_path, progress=False)
    df, text = write_report(tmp_path)
    results = pd.read_csv(tmp_path / "results.csv")
    for col in (
        "table",
        "model",
        "seed",
        "n_latents",
        "n_causal",
        "n_observed",
        "mixing",
        "mcc_task_spearman",
        "mcc_pooled",
        "causal_accuracy",
        "fit_seconds",
    ):
        assert col in results.columns, col
    assert len(results) == 2
    pub = published_results("table1")
    paper = pub[(pub.model == "MTLCM") & (pub.n_latents == 3) & (pub.n_causal == 2)]
    assert f"{float(paper.mcc_mean.iloc[0]):.2f}" in text
    assert (tmp_path / "report.md").read_text().startswith("# identrep results")
    mean = results["mcc_task_spearman"].mean() * 100
    assert f"{mean:.2f}" in text


def test_report_without_records_raises(tmp_path):
    (tmp_path / "records").mkdir()
    with pytest.raises(ValueError, match="No records"):
        write_report(tmp_path)


def test_report_writes_latex_and_plots_from_records_alone(tmp_path, monkeypatch):
    configs = [
        dataclasses.replace(SMALL, seed=s, n_latents=d, n_observed=d)
        for s in range(2)
        for d in (3, 4)
    ]
    run_sweep(configs, tmp_path, progress=False)
    write_report(tmp_path)
    tex = (tmp_path / "report.tex").read_text()
    assert "\\toprule" in tex and "\\bottomrule" in tex
    # one row per configuration; the paper's MTLCM number beside d = 3
    body = tex.split("\\midrule")[1].split("\\bottomrule")[0].strip().splitlines()
    assert len(body) == 2
    assert "$99.95 \\pm 0.01$" in body[0]
    png = tmp_path / "plots" / "table1_random_mcc_vs_n_latents.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        "plots/table1_random_mcc_vs_n_latents.png"
        in (tmp_path / "report.md").read_text()
    )
    # without matplotlib the tables are still written and the report says why
    import identrep.experiments.plots as plots

    def no_matplotlib():
        raise ImportError('Plots need matplotlib: pip install "identrep[plot]".')

    monkeypatch.setattr(plots, "_pyplot", no_matplotlib)
    (tmp_path / "report.tex").unlink()
    write_report(tmp_path)
    assert (tmp_path / "report.tex").exists()
    assert "No plots: Plots need matplotlib" in (tmp_path / "report.md").read_text()


def test_report_puts_models_side_by_side_with_the_paper(tmp_path):
    """One column per model (MTLCM first), one row per configuration, our
    mean ± std with the paper's number of that model in parentheses."""
    configs = [
        dataclasses.replace(SMALL, model=m, seed=s, max_epochs=2)
        for m in ("iVAE", "MTLCM")
        for s in range(2)
    ]
    recs = run_sweep(configs, tmp_path, progress=False)
    _, text = write_report(tmp_path, plots=False)
    lines = text.split("Side by side")[1].splitlines()
    assert lines[2] == "| n_causal | n_latents | MTLCM | iVAE |"
    row = lines[4].split(" | ")
    pub = published_results("table1").set_index(["model", "n_causal", "n_latents"])
    for col, model in ((2, "MTLCM"), (3, "iVAE")):
        vals = [
            r["metrics"]["mcc_task_spearman"] * 100
            for r in recs
            if r["config"]["model"] == model
        ]
        paper = pub.loc[(model, 2, 3), "mcc_mean"]
        assert row[col].startswith(f"{np.mean(vals):.2f} ± {np.std(vals):.2f}")
        assert row[col].rstrip(" |").endswith(f"({paper:.2f})")


def test_study_figures_are_a_grid_with_integer_ticks_and_plain_titles(
    tmp_path, monkeypatch
):
    pytest.importorskip("matplotlib")
    import identrep.experiments.plots as plots

    rows = [
        {
            "table": "table1", "model": "MTLCM", "mixing": "identity",
            "mixing_source": "reference", "n_latents": d, "n_causal": k,
            "n_observed": d, "mcc_task_spearman_mean": 0.9,
            "mcc_task_spearman_std": 0.01,
        }
        for d in (3, 5, 20) for k in range(1, 8)
    ]  # fmt: skip
    figures = []

    def keep(fig, path, dpi=130):
        figures.append((fig, path))
        return path

    monkeypatch.setattr(plots, "save_figure", keep)
    plots.plot_summary(pd.DataFrame(rows), tmp_path)
    fig = next(f for f, p in figures if p.name.endswith("mcc_vs_n_latents.png"))
    width, height = fig.get_size_inches()
    assert width <= 3 * 4.2 + 1e-9 and height > 3.4  # 7 panels: 3 rows of 3
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 7
    titles = [ax.get_title() for ax in visible]
    assert titles[0] == "number of causal factors k = 1"
    assert [t.get_text() for t in visible[0].get_xticklabels()] == ["3", "5", "20"]
    suptitle = fig._suptitle.get_text()
    assert "no mixing (identity)" in suptitle and "identity mixing" not in suptitle
