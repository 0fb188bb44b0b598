"""Figures of a results folder: MCC against each varied configuration field.

matplotlib is imported lazily (optional extra ``identrep[plot]``); figures are
rendered off-screen (Agg) and written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from identrep.experiments.io import atomic_path
from identrep.experiments.tables import get_table, published_results

__all__ = ["plot_summary", "save_figure"]

_KEY_LABELS = {
    "n_latents": "number of latents d",
    "n_causal": "number of causal factors k",
    "n_observed": "observed dimension p",
}


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
            'Plots need matplotlib: pip install "identrep[plot]".'
        ) from exc
    return plt


def plot_summary(summ: pd.DataFrame, out_dir: str | os.PathLike) -> list[Path]:
    """One figure per table, mixing and varied key field: the main strong-MCC
    metric (x100, mean with std over seeds as error bars) against that field, one
    panel per value of the other key field, one line per model; the paper's
    numbers for the same model dashed in the same colour.

    Returns the written PNG paths.
    """
    plt = _pyplot()
    written = []
    for (table_name, mixing), part in summ.groupby(["table", "mixing"], sort=False):
        table = get_table(table_name)
        metric = table.compare[-1][0]
        ylabel = {m: lab for m, lab, _ in table.metrics}.get(metric, metric)
        if f"{metric}_mean" not in part.columns:
            continue
        pub = published_results(table_name)
        show_pub = mixing == table.published_mixing
        for x in table.keys:
            if part[x].nunique() < 2:
                continue
            others = [k for k in table.keys if k != x]
            panels = sorted(part[others[0]].unique()) if others else [None]
            fig, axes = plt.subplots(
                1,
                len(panels),
                figsize=(4.2 * len(panels), 3.4),
                squeeze=False,
                sharey=True,
            )
            models = list(dict.fromkeys(part["model"]))
            colours = {m: f"C{i}" for i, m in enumerate(models)}
            for ax, val in zip(axes[0], panels, strict=True):
                sub = part if val is None else part[part[others[0]] == val]
                for m in models:
                    rows = sub[sub["model"] == m].sort_values(x)
                    if rows.empty:
                        continue
                    ax.errorbar(
                        rows[x],
                        rows[f"{metric}_mean"] * 100,
                        yerr=rows[f"{metric}_std"] * 100,
                        marker="o",
                        ms=4,
                        capsize=2,
                        color=colours[m],
                        label=f"{m} (identrep)",
                    )
                    if show_pub:
                        p = pub[pub["model"] == m]
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
                                color=colours[m],
                                alpha=0.7,
                                label=f"{m} (paper)",
                            )
                if val is not None:
                    ax.set_title(f"{others[0].replace('n_', '')} = {val}")
                ax.set_xlabel(_KEY_LABELS.get(x, x))
                if x == "n_latents":
                    ax.set_xscale("log")
                    ax.set_xticks(sorted(sub[x].unique()))
                    ax.set_xticklabels([str(v) for v in sorted(sub[x].unique())])
                    ax.set_xticks([], minor=True)  # no 4x10^0-style minor labels
                ax.grid(alpha=0.3)
            axes[0][0].set_ylabel(f"{ylabel} (x100)")
            handles, labels = axes[0][0].get_legend_handles_labels()
            fig.legend(
                handles,
                labels,
                loc="lower center",
                ncol=min(4, max(1, len(labels))),
                fontsize=8,
                bbox_to_anchor=(0.5, -0.02 - 0.05 * (len(labels) // 5)),
            )
            fig.suptitle(f"{table_name}, {mixing} mixing", fontsize=10)
            fig.tight_layout(rect=(0, 0.12 + 0.04 * (len(labels) // 5), 1, 1))
            path = Path(out_dir) / f"{table_name}_{mixing}_mcc_vs_{x}.png"
            written.append(save_figure(fig, path))
            plt.close(fig)
    return written
