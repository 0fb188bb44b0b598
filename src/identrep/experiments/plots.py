"""Figures of a results folder: MCC against each varied configuration field, as
the studies' report specs declare (no per-study code here).

matplotlib is imported lazily (optional extra ``identrep[plot]``); figures are
rendered off-screen (Agg) and written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from identrep.experiments.io import atomic_path
from identrep.experiments.registry import get_study, published_results

__all__ = ["plot_summary", "save_figure"]

_KEY_LABELS = {
    "n_latents": "number of latents d",
    "n_causal": "number of causal factors k",
    "n_observed": "observed dimension p",
}
#: Words for the values of the fields figures are split by (titles say what the
#: data are, not identrep's field names).
_SECTION_WORDS = {
    "mixing": {
        "random": "random mixing matrix",
        "orthogonal": "orthogonal mixing matrix",
        "identity": "no mixing (identity)",
        "none": "no mixing",
        "mlp": "MLP mixing",
    },
    "mixing_source": {
        "reference": "the authors' mixing matrices",
        "seeded": "mixing matrices drawn by identrep",
    },
}
_MAX_COLUMNS = 3  # panels per row of a figure


def describe(field: str, value) -> str:
    """Plain words for one configuration value, e.g. ``("mixing", "none")`` ->
    "no mixing", ``("n_causal", 2)`` -> "number of causal factors k = 2"."""
    words = _SECTION_WORDS.get(field, {})
    if value in words:
        return words[value]
    return f"{_KEY_LABELS.get(field, field.replace('_', ' '))} = {value}"


def save_figure(fig, path: str | os.PathLike, dpi: int = 130) -> Path:
    """Save a matplotlib figure atomically (see :func:`~identrep.experiments.io.
    atomic_path`); the format follows the suffix of ``path``."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=path.suffix[1:])
    return path


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "Plots need matplotlib (a dependency of identrep): pip install matplotlib."
        ) from exc
    return plt


def plot_summary(summ: pd.DataFrame, out_dir: str | os.PathLike) -> list[Path]:
    """The figures of every study's report spec (``ReportSpec.plots``): per study
    and value of the spec's ``by`` fields, one figure per varied key field with
    the metrics (x100, mean with std over seeds as error bars) against that field,
    one panel per value of the other key field, one line per model (and metric);
    the paper's numbers for the same model dashed in the same colour.

    Returns the written PNG paths.
    """
    plt = _pyplot()
    written = []
    for name in dict.fromkeys(summ["table"]):
        study = get_study(name)
        for i, plot in enumerate(study.report.plots):
            # the first family keeps the "mcc" file name; later ones are named
            # after their metrics (they would overwrite the first otherwise)
            tag = "mcc" if i == 0 else "_".join(plot.metrics) or "mcc"
            for values, part in _split(summ[summ["table"] == name], plot.by):
                written += _figures(plt, study, plot, values, part, out_dir, tag)
    return written


def _split(part: pd.DataFrame, by: tuple[str, ...]):
    if not by:
        yield (), part
        return
    for values, rows in part.groupby(list(by), sort=False):
        yield (values if isinstance(values, tuple) else (values,)), rows


def _figures(plt, study, plot, values, part, out_dir, tag="mcc") -> list[Path]:
    spec = study.report
    labels = {m: lab for m, lab, _ in spec.metrics}
    # each metric drawn at its report scale (x100 for the fractions)
    scales = {m: sc for m, _, sc in spec.metrics}
    metrics = [m for m in (plot.metrics or (spec.main_metric,)) if f"{m}_mean" in part]
    if not metrics:
        return []
    ylabel = plot.ylabel or (
        labels.get(metrics[0], metrics[0]) if len(metrics) == 1 else "MCC"
    )
    pub = published_results(study.name)
    section = dict(zip(plot.by, values, strict=True))
    show_pub = pub is not None and all(
        section.get(f, v) == v for f, v in spec.published_when
    )
    published_model = {m: model for m, model, _ in spec.compare}
    stem = "_".join([study.name, *map(str, values)])
    written = []
    for x in spec.keys:
        if part[x].nunique() < 2:
            continue
        others = [k for k in spec.keys if k != x]
        panels = sorted(part[others[0]].unique()) if others else [None]
        ncols = min(len(panels), _MAX_COLUMNS)
        nrows = -(-len(panels) // ncols)  # a grid, never a long strip
        fig, grid = plt.subplots(
            nrows,
            ncols,
            figsize=(4.2 * ncols, 3.4 * nrows),
            squeeze=False,
            sharey=True,
        )
        axes = [list(grid.ravel())]
        for ax in axes[0][len(panels) :]:
            ax.set_visible(False)
        lines = [
            (m, metric) for m in dict.fromkeys(part["model"]) for metric in metrics
        ]
        colours = {line: f"C{i}" for i, line in enumerate(lines)}
        for ax, val in zip(axes[0][: len(panels)], panels, strict=True):
            sub = part if val is None else part[part[others[0]] == val]
            for m, metric in lines:
                rows = sub[sub["model"] == m].sort_values(x)
                if rows.empty or rows[f"{metric}_mean"].isna().all():
                    continue
                what = m if len(metrics) == 1 else f"{m}: {labels.get(metric, metric)}"
                ax.errorbar(
                    rows[x],
                    rows[f"{metric}_mean"] * scales.get(metric, 100),
                    yerr=rows[f"{metric}_std"] * scales.get(metric, 100),
                    marker="o",
                    ms=4,
                    capsize=2,
                    color=colours[(m, metric)],
                    label=f"{what} (identrep)",
                )
                if show_pub and metric in published_model:
                    p = pub[pub["model"] == (published_model[metric] or m)]
                    if val is not None:
                        p = p[p[others[0]] == val]
                    p = p[p[x].isin(rows[x])].sort_values(x)
                    if len(p):
                        ax.plot(
                            p[x],
                            p["mcc_mean"],
                            ls="--",
                            marker="x",
                            ms=4,
                            color=colours[(m, metric)],
                            alpha=0.7,
                            label=f"{what} (paper)",
                        )
            if val is not None:
                ax.set_title(describe(others[0], val), fontsize=9)
            ax.set_xlabel(_KEY_LABELS.get(x, x.replace("_", " ")))
            ticks = sorted(sub[x].unique())
            if x == "n_latents":
                ax.set_xscale("log")
            ax.set_xticks(ticks)  # the values run, as integers
            ax.set_xticklabels([f"{v:g}" for v in ticks])
            ax.set_xticks([], minor=True)  # no 4x10^0-style minor labels
            ax.grid(alpha=0.3)
        for row in grid:
            scale = scales.get(metrics[0], 100)
            row[0].set_ylabel(ylabel if scale == 1 else f"{ylabel} (x{scale:g})")
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(
            handles,
            names,
            loc="lower center",
            ncol=min(4, max(1, len(names))),
            fontsize=8,
            bbox_to_anchor=(0.5, -0.02 - 0.05 * (len(names) // 5)),
        )
        title = "; ".join(
            [study.title.split(":")[0], *(describe(k, v) for k, v in section.items())]
        )
        fig.suptitle(title, fontsize=10)
        fig.tight_layout(rect=(0, 0.12 + 0.04 * (len(names) // 5), 1, 1))
        path = Path(out_dir) / f"{stem}_{tag}_vs_{x}.png"
        written.append(save_figure(fig, path))
        plt.close(fig)
    return written
