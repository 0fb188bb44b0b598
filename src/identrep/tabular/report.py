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

__all__ = [
    "CROSS_SEED_HELP",
    "FitSummary",
    "heatmap_figure",
    "heatmap_png",
    "render_report",
]


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
    latents : list of ndarray of shape (n_units, K), optional
        The latents of every seed (rows of ``latents.csv``), for the seed
        agreement of the causal sets and the latents' correlations with inputs.
    fit_args : tuple, optional
        ``(X, y, task_ids)`` the models were fitted with (held-out R^2).
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
    latents: list | None = None
    fit_args: tuple | None = None


def heatmap_figure(C: np.ndarray, tasks, title: str):
    """The causal map as a matplotlib ``Figure`` (off-screen, Agg canvas).

    Parameters
    ----------
    C : ndarray of shape (n_tasks, n_latents)
        Causal indicators in [0, 1].
    tasks : sequence of length n_tasks
        Task labels: every one up to 120 tasks (the figure grows about 0.15 inch
        a task, so 80 task names stay readable), else about 60 evenly spaced ones.
    title : str
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    T, d = C.shape
    height = min(1.8 + 0.15 * T, 20.0) if T <= 120 else 12.0
    fig = Figure(figsize=(min(3.0 + 0.45 * d, 12.0), height))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    im = ax.imshow(C, aspect="auto", vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(d), [f"z{j}" for j in range(d)], fontsize=8)
    step = 1 if T <= 120 else int(np.ceil(T / 60))
    ax.set_yticks(range(0, T, step), [str(t) for t in list(tasks)[::step]], fontsize=7)
    ax.set_xlabel("latent")
    ax.set_ylabel(f"task ({T})" + (f", every {step}th labelled" if step > 1 else ""))
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="causal indicator c (1 = cause, 0 = effect)")
    fig.tight_layout()
    return fig


def heatmap_png(C: np.ndarray, tasks, title: str) -> bytes | None:
    """PNG bytes of :func:`heatmap_figure`, or None without matplotlib."""
    import io

    try:
        fig = heatmap_figure(C, tasks, title)
    except ImportError:
        return None
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
        """A titled table; ``rows`` are tuples of strings as long as ``header``."""
        md, h = self.md, self.h
        md.extend(
            [
                f"## {title}",
                "",
                "| " + " | ".join(header) + " |",
                "|" + "---|" * len(header),
            ]
        )
        md.extend(
            "| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows
        )
        md.append("")
        h.append(f"<h2>{html.escape(title)}</h2><table>")
        if any(header):
            h.append(
                "<tr>" + "".join(f"<th>{html.escape(x)}</th>" for x in header) + "</tr>"
            )
        h.extend(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
            for r in rows
        )
        h.append("</table>")

    def bullets(self, title: str, items: list[str]) -> None:
        self.md.extend([f"## {title}", "", *(f"- {n}" for n in items), ""])
        self.h.append(f"<h2>{html.escape(title)}</h2><ul>")
        self.h.extend(f"<li>{html.escape(n)}</li>" for n in items)
        self.h.append("</ul>")

    def para(self, text: str) -> None:
        self.md.extend([text, ""])
        self.h.append(f"<p>{html.escape(text)}</p>")


#: How to read the cross-seed MCC, in one line (report and README).
CROSS_SEED_HELP = (
    "How to read it: the MCC is the mean absolute correlation between matched "
    "latents of two seeds; 1.0 means every seed found the same latents up to "
    "order, sign and scale (the evidence, without ground truth, that they are "
    "identified); well below 1, single latents are not reproducible and only "
    "their span should be interpreted."
)
_MAX_TASKS = 100  # tasks listed one by one in the report


def _fmt(v: float) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3f}"


def _heldout(info: FitSummary):
    """Held-out R^2 per task of the saved model's stage 1, or None."""
    if info.stage2_only or info.fit_args is None:
        return None
    from identrep.tabular.diagnostics import heldout_r2

    return heldout_r2(info.models[0].mtrn_, *info.fit_args)


def _stability(info: FitSummary):
    if info.latents is None or len(info.latents) < 2:
        return None
    from identrep.tabular.diagnostics import causal_stability

    return causal_stability([m.causal_indicators_ for m in info.models], info.latents)


def _seed_rows(info: FitSummary, stab) -> list[tuple[str, str]]:
    cross = info.cross
    worst = min(cross["pairs"], key=lambda p: p[1])
    rows = [
        (
            "MCC of the latents (Pearson)",
            f"{cross['mean']:.4f} +/- {cross['std']:.4f} over "
            f"{len(cross['pairs'])} pair(s) of seeds (lowest {worst[1]:.4f}, seeds "
            f"{info.seed + worst[0][0]} and {info.seed + worst[0][1]})",
        )
    ]
    if stab is not None:
        T = len(stab["task_agreement"])
        rows.append(
            (
                f"causal sets (latents matched to seed {info.seed})",
                f"{stab['identical_tasks']} of {T} tasks have the same causal set in "
                f"every seed; {100 * stab['entry_agreement']:.1f}% of the (task, "
                "latent) entries agree",
            )
        )
    return rows


def render_report(info: FitSummary) -> tuple[str, str]:
    """Markdown and HTML text of the report.

    Sections: Data, Settings, Fit (with stage 1's held-out R^2), Read with care
    (degenerate causal maps or latents, when any), Causal map (heat-map, latent
    usage), Causal sets (per task: causal latents, held-out R^2, agreement across
    seeds), Latents and inputs, Agreement across seeds (with 2 or more seeds),
    Notes (notes and caught warnings, when any) and Outputs.

    Returns
    -------
    md, html : str
    """
    from identrep.tabular.diagnostics import degenerate_findings, input_correlations

    m = info.models[0]
    C = m.causal_indicators_
    K = C.shape[1]
    causal = causal_mask(C)
    rule = f"c >= {CAUSAL_THRESHOLD:g}"
    r2 = _heldout(info)
    stab = _stability(info)
    n_show = min(len(C), _MAX_TASKS)
    header = ["task", "causal latents"]
    if r2 is not None:
        header.append("held-out R^2")
    if stab is not None:
        header.append(f"same set in the other {len(info.models) - 1} seed(s)")
    sets = []
    for i, (lab, row) in enumerate(zip(list(m.tasks_)[:n_show], causal[:n_show],
                                        strict=True)):  # fmt: skip
        causes = [f"z{j}" for j in np.flatnonzero(row)]
        cells = [str(lab), ", ".join(causes) if causes else "(none)"]
        if r2 is not None:
            cells.append(_fmt(r2[i]))
        if stab is not None:
            cells.append(f"{100 * stab['task_agreement'][i]:.0f}%")
        sets.append(tuple(cells))
    usage = causal.sum(axis=0)
    usage_text = ", ".join(f"z{j}: {int(usage[j])}" for j in range(K))

    page = _Page("identrep fit report")
    page.section("Data", _data_rows(info.table))
    page.section("Settings", _settings_rows(info))
    fit_rows = _fit_rows(info)
    if r2 is not None and np.isfinite(r2).any():
        ok = r2[np.isfinite(r2)]
        fit_rows.insert(
            -1 if len(info.models) == 1 else -2,
            (
                "stage 1 held-out R^2 per task",
                f"median {np.median(ok):.3f} (min {ok.min():.3f}, max "
                f"{ok.max():.3f}) over {ok.size} tasks, on the "
                f"{len(m.mtrn_.validation_index_)} observations held out from "
                "training (used only for early stopping)",
            ),
        )
    page.section("Fit", fit_rows)
    Z0 = None if info.latents is None else info.latents[0]
    findings = degenerate_findings(C, Z0) if Z0 is not None else []
    if findings:
        page.bullets("Read with care: this result is degenerate", findings)
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
            "(No heat-map: matplotlib is not installed; pip install matplotlib to "
            "get causal_map.png.)"
        )
    page.para(f"Number of tasks each latent causes ({rule}): {usage_text}.")
    page.section(
        f"Causal sets ({rule})"
        + (f", first {n_show} of {len(C)} tasks" if len(C) > n_show else ""),
        sets,
        header=tuple(header),
    )
    if Z0 is not None:
        X_units = info.table.X[info.table.unit_rows]
        feats = info.table.features
        corr = input_correlations(Z0, X_units)
        page.section(
            "Latents and inputs",
            [
                (f"z{k}", ", ".join(f"{feats[j]} ({r:+.2f})" for j, r in top))
                for k, top in enumerate(corr)
            ],
            header=("latent", "most correlated inputs (Pearson r)"),
        )
    if info.cross is not None:
        page.section("Agreement across seeds", _seed_rows(info, stab))
        page.para(CROSS_SEED_HELP)
    if info.notes or info.warnings:
        page.bullets("Notes", info.notes + info.warnings)
    outputs = (
        "latents.csv (latents of every input), causal_map.csv, "
        + ("causal_map.png, " if info.png is not None else "")
        + "model/ (identrep transform model/ DATA --out FILE applies it to new data)"
    )
    page.md.extend(["## Outputs", "", outputs, ""])
    page.h.append(f"<h2>Outputs</h2><p>{html.escape(outputs)}</p></body></html>")
    return "\n".join(page.md), "\n".join(page.h) + "\n"
