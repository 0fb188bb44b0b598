"""The report of a fit on a user's table (:mod:`identrep.tabular.report`)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from identrep.tabular import load_table
from identrep.tabular.report import FitSummary, heatmap_png, render_report, stage1_r2


@pytest.fixture
def wide_table(tmp_path, rng):
    n = 12
    df = pd.DataFrame({"a": rng.standard_normal(n), "b": rng.standard_normal(n)})
    df["y0"] = np.where(np.arange(n) % 2 == 0, rng.standard_normal(n), np.nan)
    df["y1"] = np.where(np.arange(n) % 3 != 0, rng.standard_normal(n), np.nan)
    df["y2"] = 4.0  # a constant target: R^2 undefined, left out of the mean
    df.to_csv(tmp_path / "w.csv", index=False)
    return load_table(tmp_path / "w.csv", target=["y0", "y1", "y2"], features=["a"])


def _r2(y, p):
    return 1.0 - np.sum((y - p) ** 2) / np.sum((y - y.mean()) ** 2)


def test_stage1_r2_wide_averages_tasks_in_model_order(wide_table, rng):
    P = rng.standard_normal((wide_table.n_rows, 3))
    order = ["y1", "y2", "y0"]  # the model's task order, not the file's
    mtrn = SimpleNamespace(tasks_=np.asarray(order, dtype=object), predict=lambda X: P)
    expected = []
    for task, col in (("y1", 0), ("y0", 2)):  # y2 (column 1) is constant
        y = wide_table.Y[task].to_numpy()
        obs = ~np.isnan(y)
        expected.append(_r2(y[obs], P[obs, col]))
    assert stage1_r2(mtrn, wide_table) == pytest.approx(np.mean(expected), rel=1e-12)


def test_stage1_r2_long(tmp_path, rng):
    n = 10
    df = pd.DataFrame(
        {
            "a": rng.standard_normal(n),
            "task": ["p", "q"] * (n // 2),
            "v": rng.standard_normal(n),
        }
    )
    df.to_csv(tmp_path / "l.csv", index=False)
    tab = load_table(tmp_path / "l.csv", target="v", task_col="task")
    P = rng.standard_normal((n, 2))
    mtrn = SimpleNamespace(
        tasks_=np.array(["p", "q"], dtype=object), predict=lambda X: P
    )
    y = df["v"].to_numpy()
    expected = np.mean([_r2(y[0::2], P[0::2, 0]), _r2(y[1::2], P[1::2, 1])])
    assert stage1_r2(mtrn, tab) == pytest.approx(expected, rel=1e-12)


def _summary(table, C, tasks, **kw):
    model = SimpleNamespace(
        causal_indicators_=np.asarray(C, dtype=float),
        tasks_=np.asarray(tasks, dtype=object),
        log_likelihood_=-1.23456,
        n_iter_=7,
        converged_=True,
        fit_seconds_=0.25,
    )
    args = dict(
        table=table, what="MTLCM", K=len(C[0]), seed=3, seeds=1, max_epochs=200,
        stage2_only=True, models=[model], seconds=[0.5], cross=None, notes=[],
        warnings=[], png=None, command=None, version="0.0",
    )  # fmt: skip
    args.update(kw)
    return FitSummary(**args)


def test_report_causal_sets_use_the_one_threshold_rule(wide_table):
    C = [[0.5, 0.49999], [0.9, 0.1], [0.2, 1.0]]  # 0.5 itself is a cause (>= 0.5)
    md, page = render_report(_summary(wide_table, C, ["y0", "y1", "y2"]))
    assert "Number of tasks each latent causes (c >= 0.5): z0: 2, z1: 1." in md
    assert "## Causal sets (c >= 0.5)" in md
    for row in ("| y0 | z0 |", "| y1 | z0 |", "| y2 | z1 |"):
        assert row in md, row
    assert "<h2>Causal sets (c &gt;= 0.5)</h2><table>" in page
    assert "<tr><th>task</th><th>causal latents</th></tr>" in page
    assert "| task | causal latents |" in md


def test_report_sections_and_settings(wide_table):
    C = np.zeros((25, 2))
    C[:, 1] = 0.9
    tasks = [f"t<{i}>" for i in range(25)]
    cross = {"mean": 0.9, "std": 0.05, "pairs": [((0, 1), 0.95), ((0, 2), 0.85)]}
    md, page = render_report(
        _summary(
            wide_table, C, tasks, seeds=3, cross=cross, notes=["a note"],
            warnings=["seed 3: UserWarning: careful"], command="identrep fit x",
            models=[_summary(wide_table, C, tasks).models[0]] * 3,
            seconds=[0.5, 0.25, 0.25],
        )
    )  # fmt: skip
    assert md.startswith("# identrep fit report\n\n## Data\n")
    for text in (
        "| file | " + str(wide_table.path) + " |",
        "| layout | wide (target columns y0, y1, y2) |",
        "| features | 1: a |",
        "| observed targets | 26 (per task: min 6, median 8, max 12) |",
        "| model | MTLCM on the inputs (--stage2-only) |",
        "| seeds | 3..5 (the model of seed 3 is saved) |",
        "| command | identrep fit x |",
        "| fit time | 0.5 s (seed 3); all 3 seeds 1.0 s |",
        "| stage 2 (MTLCM) | mean log-likelihood per observation -1.2346 (on the "
        "inputs), 7 L-BFGS iterations, converged=True, 0.25 s |",
        "| log-likelihood per seed | -1.2346, -1.2346, -1.2346 |",
        "## Causal sets (c >= 0.5)\n",
        "| MCC of the latents (Pearson) | 0.9000 +/- 0.0500 over 2 pair(s) of seeds "
        "(lowest 0.8500, seeds 3 and 5) |",
        "## Notes\n\n- a note\n- seed 3: UserWarning: careful\n",
        "(No heat-map: matplotlib is not installed",
    ):
        assert text in md, text
    assert "max_epochs" not in md  # stage 2 only
    assert "| t<24> | z1 |" in md  # every task up to 100
    assert "<td>t&lt;19&gt;</td>" in page and "<img" not in page
    assert page.endswith("</body></html>\n") and "<title>identrep fit report" in page


def test_report_embeds_the_heatmap(wide_table):
    summary = _summary(
        wide_table, [[1.0], [0.0], [0.7]], ["y0", "y1", "y2"], png=b"\x89PNG-fake"
    )
    md, page = render_report(summary)
    assert "![causal map](causal_map.png)" in md
    assert "causal_map.png, model/" in md
    assert "<img alt='causal map' src='data:image/png;base64,iVBORy1mYWtl'>" in page


def test_heatmap_png(monkeypatch):
    pytest.importorskip("matplotlib")
    png = heatmap_png(np.array([[0.1, 0.9], [0.5, 0.5]]), ["a", "b"], "title")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    assert heatmap_png(np.eye(2), ["a", "b"], "title") is None


def test_report_flags_a_degenerate_causal_map(wide_table, rng):
    C = np.zeros((21, 10))
    C[:, :8] = 0.9  # 8 of 10 latents cause all 21 tasks (seen on a real table)
    Z = rng.standard_normal((len(wide_table.unit_rows), 10))
    md, page = render_report(
        _summary(wide_table, C, [f"t{i}" for i in range(21)], latents=[Z])
    )
    assert "## Read with care: this result is degenerate" in md
    assert "- 8 of 10 latents cause all 21 tasks: the causal map does not tell" in md
    assert "Latent(s) z8, z9 cause no task" in md
    assert md.index("Read with care") < md.index("## Causal map")
    ordinary = np.eye(10)[np.arange(21) % 10] * 0.9
    md, _ = render_report(
        _summary(wide_table, ordinary, [f"t{i}" for i in range(21)], latents=[Z])
    )
    assert "Read with care" not in md


def test_degenerate_latents_are_named():
    from identrep.tabular.diagnostics import degenerate_findings

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((50, 4))
    Z[:, 2] = 3.0  # constant
    Z[:, 3] = -2 * Z[:, 0] + 1e-6 * rng.standard_normal(50)  # duplicate of z0
    out = " ".join(degenerate_findings(np.eye(4)[[0, 1, 3, 0]] * 0.9, Z))
    assert "z2 are constant" in out and "z0~z3" in out


def test_heatmap_names_every_task_of_80():
    pytest.importorskip("matplotlib")
    from identrep.tabular.report import heatmap_figure

    tasks = [f"element property {i}" for i in range(80)]
    fig = heatmap_figure(np.random.default_rng(0).random((80, 5)), tasks, "t")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == tasks  # before: no task names beyond 40 tasks
    height_in = fig.get_size_inches()[1]
    assert height_in / 80 >= 7 / 72  # at least a 7-point line per task name
