"""The report of a fit on a user's table: ``report.md``, ``report.html`` and the
causal-map heat-map (``causal_map.png``).

:func:`render_report` turns a :class:`FitSummary` (what :func:`identrep.tabular.fit`
knows after fitting) into Markdown and HTML text; :func:`heatmap_png` draws the
causal map. Neither writes a file: :mod:`identrep.tabular.fitting` writes them.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any

import numpy as np

from identrep.tabular.read import TableData
from identrep.utils.numerics import CAUSAL_THRESHOLD, causal_mask, r2_per_task

__all__ = ["FitSummary", "heatmap_png", "render_report"]


@dataclass(frozen=True)
class FitSummary:
    """Everything the report shows about one ``identrep fit`` run.

    Attributes
    ----------
    table : TableData
    what : str
        ``"MTLCM"`` or ``"MTRN + MTLCM"``.
    K : int
        Latent dimension.
    seed, seeds : int
        First seed and number of seeds.
    max_epochs : int
    stage2_only : bool
    models : list
        Fitted model of every seed (the first is the saved one).
    seconds : list of float
        Fit time of every seed.
    cross : dict or None
        :func:`identrep.metrics.cross_seed_mcc` of the latents across seeds.
    notes, warnings : list of str
    png : bytes or None
        The heat-map (None without matplotlib).
    command : str or None
        The command line, quoted in the report.
    version : str
        identrep's version.
    """

    table: TableData
    what: str
    K: int
    seed: int
    seeds: int
    max_epochs: int
    stage2_only: bool
    models: list[Any]
    seconds: list[float]
    cross: dict | None
    notes: list[str]
    warnings: list[str]
    png: bytes | None
    command: str | None
    version: str


def heatmap_png(C: np.ndarray, tasks, title: str) -> bytes | None:
    """PNG bytes of the causal map, or None without matplotlib.

    Parameters
    ----------
    C : ndarray of shape (n_tasks, n_latents)
        Causal indicators in [0, 1].
    tasks : sequence of length n_tasks
        Task labels (shown when there are at most 40 tasks).
    title : str
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    import io

    T, d = C.shape
    fig = Figure(figsize=(min(2.0 + 0.45 * d, 12.0), min(1.6 + 0.22 * T, 12.0)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    im = ax.imshow(C, aspect="auto", vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(d), [f"z{j}" for j in range(d)], fontsize=8)
    if T <= 40:
        ax.set_yticks(range(T), [str(t) for t in tasks], fontsize=7)
    ax.set_xlabel("latent")
    ax.set_ylabel(f"task ({T})")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="causal indicator c (1 = cause, 0 = effect)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def stage1_r2(mtrn, table: TableData) -> float:
    """Stage-1 R^2 per task on the fitted data (about each task's mean), averaged.

    Tasks whose R^2 is undefined (:func:`~identrep.utils.numerics.r2_per_task`
    gives NaN: a constant target) are left out of the average.
    """
    P = mtrn.predict(table.frame())  # (n_rows, n_tasks), columns in mtrn.tasks_ order
    if table.layout == "wide":
        Y = table.Y[list(mtrn.tasks_)].to_numpy()
        obs = ~np.isnan(Y)
        rows, cols = np.nonzero(obs)
        y, pred = Y[rows, cols], P[rows, cols]
    else:
        cols = np.searchsorted(np.asarray(mtrn.tasks_), table.task_ids)
        y, pred = table.y, P[table.obs_rows, cols]
    r2 = r2_per_task(y, pred, cols, P.shape[1])
    return float(np.mean(r2[~np.isnan(r2)]))


def _fit_rows(info: FitSummary) -> list[tuple[str, str]]:
    rows = []
    secs = info.seconds
    rows.append(
        (
            "fit time",
            f"{secs[0]:.1f} s"
            + (
                f" (seed {info.seed}); all {len(secs)} seeds {sum(secs):.1f} s"
                if len(secs) > 1
                else ""
            ),
        )
    )
    m = info.models[0]
    if info.stage2_only:
        lcm = m
    else:
        lcm = m.mtlcm_
        h = m.mtrn_.history_
        rows.append(
            (
                "stage 1 (MTRN)",
                f"{h['n_epochs']} epochs (best {h['best_epoch'] + 1}"
                + (", stopped early" if h.get("stopped_early") else "")
                + f"), {m.mtrn_.fit_seconds_:.1f} s, in-sample R^2 averaged over "
                f"tasks {stage1_r2(m.mtrn_, info.table):.3f}",
            )
        )
    where = "standardised stage-1 features" if not info.stage2_only else "inputs"
    rows.append(
        (
            "stage 2 (MTLCM)",
            f"mean log-likelihood per observation {lcm.log_likelihood_:.4f} (on the "
            f"{where}), {lcm.n_iter_} L-BFGS iterations, converged={lcm.converged_}, "
            f"{lcm.fit_seconds_:.2f} s",
        )
    )
    if len(info.models) > 1:
        lls = [
            (mm if info.stage2_only else mm.mtlcm_).log_likelihood_
            for mm in info.models
        ]
        rows.append(("log-likelihood per seed", ", ".join(f"{v:.4f}" for v in lls)))
    return rows


def _data_rows(table: TableData) -> list[tuple[str, str]]:
    counts = table.task_counts()
    feats = table.features
    fshow = ", ".join(feats[:12])
    if len(feats) > 12:
        fshow += f", ... ({len(feats)} in all)"
    rows = [
        ("file", str(table.path)),
        (
            "layout",
            f"{table.layout} ("
            + (
                f"target columns {', '.join(table.targets[:8])}"
                + (" ..." if len(table.targets) > 8 else "")
                if table.layout == "wide"
                else f"target {table.targets[0]!r}, task column {table.task_col!r}"
            )
            + ")",
        ),
        ("rows", f"{table.n_rows}"),
        ("distinct inputs (rows of latents.csv)", f"{len(table.unit_rows)}"),
        ("features", f"{len(feats)}: {fshow}"),
        ("tasks", f"{len(counts)}"),
        (
            "observed targets",
            f"{int(counts.sum())} (per task: min {int(counts.min())}, median "
            f"{float(np.median(counts)):g}, max {int(counts.max())})",
        ),
    ]
    if table.id_col:
        rows.append(("id column", table.id_col))
    return rows


def _settings_rows(info: FitSummary) -> list[tuple[str, str]]:
    import torch

    rows = [
        (
            "model",
            "MTLCM on the inputs (--stage2-only)"
            if info.stage2_only
            else "TaskIdentifiable: MTRN (stage 1) then MTLCM (stage 2)",
        ),
        ("n_latents", str(info.K)),
        (
            "seeds",
            f"{info.seed}"
            if info.seeds == 1
            else f"{info.seed}..{info.seed + info.seeds - 1} (the model "
            f"of seed {info.seed} is saved)",
        ),
    ]
    if not info.stage2_only:
        rows.append(("max_epochs", str(info.max_epochs)))
    rows.append(("versions", f"identrep {info.version}, torch {torch.__version__}"))
    if info.command:
        rows.append(("command", info.command))
    return rows


class _Page:
    """The report's Markdown and HTML, built side by side."""

    def __init__(self, title: str) -> None:
        self.md: list[str] = [f"# {title}", ""]
        self.h: list[str] = [
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{title}</title><style>body{{font-family:sans-serif;"
            "max-width:60em;margin:2em auto;padding:0 1em}td,th{padding:2px 8px;"
            "text-align:left;vertical-align:top}table{border-collapse:collapse}"
            "tr:nth-child(even){background:#f3f3f3}</style></head><body>",
            f"<h1>{title}</h1>",
        ]

    def heading(self, title: str) -> None:
        self.md.extend([f"## {title}", ""])
        self.h.append(f"<h2>{html.escape(title)}</h2>")

    def section(self, title, rows, header=("", "")) -> None:
        md, h = self.md, self.h
        md.extend([f"## {title}", "", f"| {header[0]} | {header[1]} |", "|---|---|"])
        md.extend(f"| {a} | {b.replace('|', '/')} |" for a, b in rows)
        md.append("")
        h.append(f"<h2>{html.escape(title)}</h2><table>")
        if any(header):
            h.append(
                "<tr>" + "".join(f"<th>{html.escape(x)}</th>" for x in header) + "</tr>"
            )
        h.extend(
            f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>"
            for a, b in rows
        )
        h.append("</table>")

    def para(self, text: str) -> None:
        self.md.extend([text, ""])
        self.h.append(f"<p>{html.escape(text)}</p>")


def render_report(info: FitSummary) -> tuple[str, str]:
    """Markdown and HTML text of the report.

    Sections: Data, Settings, Fit, Causal map (heat-map, latent usage), Causal
    sets (first 20 tasks), Agreement across seeds (with 2 or more seeds), Notes
    (notes and caught warnings, when any) and Outputs.

    Returns
    -------
    md, html : str
    """
    m = info.models[0]
    C = m.causal_indicators_
    K = C.shape[1]
    causal = causal_mask(C)
    rule = f"c >= {CAUSAL_THRESHOLD:g}"
    n_show = min(len(C), 20)
    sets = []
    for lab, row in zip(list(m.tasks_)[:n_show], causal[:n_show], strict=True):
        causes = [f"z{j}" for j in np.flatnonzero(row)]
        sets.append((str(lab), ", ".join(causes) if causes else "(none)"))
    usage = causal.sum(axis=0)
    usage_text = ", ".join(f"z{j}: {int(usage[j])}" for j in range(K))

    page = _Page("identrep fit report")
    page.section("Data", _data_rows(info.table))
    page.section("Settings", _settings_rows(info))
    page.section("Fit", _fit_rows(info))
    page.heading("Causal map")
    page.para(
        "Causal indicator c_tj in [0, 1] of every task t and latent z_j: near 1 the "
        "latent causes the task's target, near 0 it is an effect of it (spurious). "
        "All values: causal_map.csv."
    )
    if info.png is not None:
        page.md.extend(["![causal map](causal_map.png)", ""])
        b64 = base64.b64encode(info.png).decode("ascii")
        page.h.append(
            f"<p><img alt='causal map' src='data:image/png;base64,{b64}'></p>"
        )
    else:
        page.para(
            "(No heat-map: matplotlib is not installed; pip install "
            '"identrep[plot]" to get causal_map.png.)'
        )
    page.para(f"Number of tasks each latent causes ({rule}): {usage_text}.")
    page.section(
        f"Causal sets ({rule})"
        + (f", first {n_show} of {len(C)} tasks" if len(C) > n_show else ""),
        sets,
        header=("task", "causal latents"),
    )
    cross = info.cross
    if cross is not None:
        worst = min(cross["pairs"], key=lambda p: p[1])
        page.section(
            "Agreement across seeds",
            [
                (
                    "MCC of the latents (Pearson)",
                    f"{cross['mean']:.4f} +/- {cross['std']:.4f} over "
                    f"{len(cross['pairs'])} pair(s) of seeds (lowest "
                    f"{worst[1]:.4f}, seeds {info.seed + worst[0][0]} and "
                    f"{info.seed + worst[0][1]})",
                )
            ],
        )
        page.para(
            "1.0 means every seed recovers the same latents up to permutation and "
            "scale; without ground truth this is the evidence that they are "
            "identified (the paper's Table 3 protocol)."
        )
    if info.notes or info.warnings:
        page.md.extend(["## Notes", ""])
        page.h.append("<h2>Notes</h2><ul>")
        for n in info.notes + info.warnings:
            page.md.append(f"- {n}")
            page.h.append(f"<li>{html.escape(n)}</li>")
        page.md.append("")
        page.h.append("</ul>")
    outputs = (
        "latents.csv (latents of every input), causal_map.csv, "
        + ("causal_map.png, " if info.png is not None else "")
        + "model/ (identrep transform model/ DATA --out FILE applies it to new data)"
    )
    page.md.extend(["## Outputs", "", outputs, ""])
    page.h.append(f"<h2>Outputs</h2><p>{html.escape(outputs)}</p></body></html>")
    return "\n".join(page.md), "\n".join(page.h) + "\n"
