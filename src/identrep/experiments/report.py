"""Tables from run records: results.csv (one row per run) and report.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from identrep.experiments.configs import MODELS
from identrep.experiments.io import atomic_write_text, load_records
from identrep.experiments.tables import get_table, published_results

__all__ = [
    "build_latex",
    "build_report",
    "cross_seed_summary",
    "records_to_frame",
    "summarise",
    "write_report",
]

_CONFIG_COLS = [
    "table",
    "model",
    "seed",
    "n_latents",
    "n_causal",
    "n_observed",
    "n_tasks",
    "n_samples",
    "mixing",
    "mixing_source",
    "n_init",
]


def records_to_frame(records: list[dict]) -> pd.DataFrame:
    """One row per run: configuration fields, seeds, metric columns."""
    rows = []
    for r in records:
        if r.get("status") == "failed":
            continue  # listed by write_report, no metrics
        row = {k: r["config"].get(k) for k in _CONFIG_COLS}
        row.update(data_seed=r["data_seed"], model_seed=r["model_seed"])
        row.update(r["metrics"])
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values(
            ["table", "model", "mixing", "n_causal", "n_latents", "n_observed", "seed"]
        ).reset_index(drop=True)
    return df


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=0, as over seeds in the paper) per configuration."""
    keys = [
        "table",
        "model",
        "mixing",
        "mixing_source",
        "n_causal",
        "n_latents",
        "n_observed",
    ]
    skip = set(keys) | {
        "seed",
        "data_seed",
        "model_seed",
        "n_tasks",
        "n_samples",
        "n_init",
        "heads",
        "max_epochs",
    }
    metrics = [
        c
        for c in df.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])
    ]
    g = df.groupby(keys, sort=True, dropna=False)
    mean = g[metrics].mean()
    std = g[metrics].std(ddof=0)
    out = mean.add_suffix("_mean").join(std.add_suffix("_std"))
    out["n_seeds"] = g.size()
    return out.reset_index()


def _pm(mean: float, std: float, scale: float, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "-"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def _published(pub, table, row, metric, model, mixing):
    """The paper's (mean, std) x100 for this row's configuration: of ``model``, or
    of the row's own model when ``model`` is None; (None, None) if there is none."""
    model = row["model"] if model is None else model
    if mixing != table.published_mixing or f"{metric}_mean" not in row.index:
        return None, None
    if pd.isna(row[f"{metric}_mean"]):
        return None, None
    match = pub[
        (pub["model"] == model)
        & np.logical_and.reduce([pub[k] == row[k] for k in table.keys])
    ]
    if not len(match):
        return None, None
    return float(match["mcc_mean"].iloc[0]), float(match["mcc_std"].iloc[0])


_SUMMARY_KEYS = [
    "table",
    "model",
    "mixing",
    "mixing_source",
    "n_causal",
    "n_latents",
    "n_observed",
]


def cross_seed_summary(records: list[dict], out: str | Path) -> pd.DataFrame:
    """Agreement across seeds for real-data records (Table 3), from the stored
    representations in ``out/latents``: for every configuration, every pair of
    seeds is scored with Pearson MCC of the MTLCM latents (``cross_seed_mcc``)
    and in-sample CCA + Spearman MCC of the MTRN features
    (``cross_seed_weak_mcc``); mean and std (ddof=0) over the pairs."""
    from identrep.experiments.runner import latents_path
    from identrep.metrics import cross_seed_mcc

    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r["config"]["table"] != "table3" or r.get("status") == "failed":
            continue
        c = r["config"]
        key = tuple(c[k] for k in _SUMMARY_KEYS)
        groups.setdefault(key, []).append(r)
    rows = []
    for key, recs in groups.items():
        recs = sorted(recs, key=lambda r: r["config"]["seed"])
        row = dict(zip(_SUMMARY_KEYS, key, strict=True), n_pairs=0)
        if len(recs) >= 2:
            arrays = []
            for r in recs:
                path = latents_path(Path(out) / "latents", r["run_id"])
                if not path.exists():
                    raise FileNotFoundError(
                        f"Record {r['run_id']} has no stored latents at {path}; "
                        "rerun that configuration (delete its record) to compare "
                        "seeds."
                    )
                with np.load(path, allow_pickle=False) as z:
                    # baselines store their encoder means only (no MTRN features)
                    feats = z["features"] if "features" in z.files else None
                    arrays.append((z["latents"], feats))
            strong = cross_seed_mcc([a[0] for a in arrays], "pearson")
            row.update(
                cross_seed_mcc_mean=strong["mean"],
                cross_seed_mcc_std=strong["std"],
                n_pairs=len(strong["pairs"]),
            )
            if all(a[1] is not None for a in arrays):
                weak = cross_seed_mcc([a[1] for a in arrays], "spearman", weak=True)
                row.update(
                    cross_seed_weak_mcc_mean=weak["mean"],
                    cross_seed_weak_mcc_std=weak["std"],
                )
        rows.append(row)
    return pd.DataFrame(rows)


def build_report(
    df: pd.DataFrame, cross_seed: pd.DataFrame | None = None
) -> tuple[str, pd.DataFrame]:
    """Markdown report with our mean ± std beside the published numbers
    (``cross_seed``: the summary of :func:`cross_seed_summary`, joined on the
    configuration)."""
    summ = summarise(df)
    if cross_seed is not None and len(cross_seed):
        summ = summ.merge(cross_seed, on=_SUMMARY_KEYS, how="left")
    lines = []
    for (table_name, mixing, source), part in summ.groupby(
        ["table", "mixing", "mixing_source"], sort=False
    ):
        table = get_table(table_name)
        pub = published_results(table_name)
        how = ""
        if table_name == "table1":
            how = f", {mixing} mixing" + (
                " (the authors' mixing matrices)"
                if source == "reference"
                else " (mixing matrices from identrep's seeds)"
            )
        lines.append(f"## {table.title}{how}\n")
        if table_name == "table3":
            lines.append(
                "Std over the pairs of seeds (10 pairs for 5 seeds). Strong MCC: "
                "Pearson MCC between the latents of two seeds (MTLCM latents; the "
                "baselines' encoder means q(z | x) of all materials, trained on "
                "a fixed subset of the materials); weak MCC: in-sample CCA, then "
                "Spearman MCC, between their standardised MTRN features (the "
                "paper's protocol).\n"
            )
        shown = [
            (m, lab, sc) for m, lab, sc in table.metrics if f"{m}_mean" in part.columns
        ]
        head = ["model", *table.keys, "seeds"]
        head += [lab + (" ×100" if sc == 100 else "") for _, lab, sc in shown]
        for _, _, label in table.compare:
            head += [f"{label} ×100", "ours − paper"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for _, row in part.iterrows():
            cells = [
                row["model"],
                *[str(int(row[k])) for k in table.keys],
                str(int(row["n_seeds"])),
            ]
            for m, _, scale in shown:
                digits = 2 if scale == 100 else 1
                cells.append(
                    _pm(row.get(f"{m}_mean"), row.get(f"{m}_std"), scale, digits)
                )
            for metric, model, _ in table.compare:
                pm, ps = _published(pub, table, row, metric, model, mixing)
                if pm is None:
                    cells += ["-", "-"]
                else:
                    ours = row[f"{metric}_mean"] * 100
                    cells += [f"{pm:.2f} ± {ps:.2f}", f"{ours - pm:+.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
        if mixing != table.published_mixing:
            lines.append(f"\n(The paper reports {table.published_mixing} mixing only.)")
        lines.append("")
        if part["model"].nunique() > 1:
            lines += _side_by_side(part, table, pub, mixing)
    lines.append(
        "MCC per task: Spearman MCC with its own matching in every task, averaged "
        "over tasks (the paper's protocol). MCC pooled: one matching over all "
        "samples. 'true unmixing, per task' applies the true A^-1 to the noisy "
        "observations (the reference code's noise ceiling): an ill-conditioned "
        "random mixing amplifies the observation noise. "
        "'random unmixing, per task' is the per-task score of a random "
        "linear unmixing on the same data: the per-task metric is biased upward "
        "because a task's spurious latents are nearly collinear with its target. "
        "MTRN weak MCC: CCA to the latent dimension, then Spearman MCC of the "
        "canonical variates, fitted and scored on a pooled random subsample of "
        "10,000 points (the paper's protocol; 'held-out CCA' fits the CCA on half "
        "of them and scores the other half). "
        "Causal accuracy: indicators > 0.5 against the true causal sets after a "
        "pooled matching of latents. Std over seeds with ddof=0."
    )
    return "\n".join(lines) + "\n", summ


def _side_by_side(part: pd.DataFrame, table, pub: pd.DataFrame, mixing: str) -> list:
    """Markdown lines of one configuration per row and one column per model:
    our mean ± std of the table's main metric with the paper's mean beside it
    (and, where the table has one, MTRN's weak MCC as its own column)."""
    metric = table.compare[-1][0]
    if f"{metric}_mean" not in part.columns:
        return []
    labels = {m: lab for m, lab, _ in table.metrics}
    # columns: (title, model whose rows hold it, metric, published model)
    cols = [
        ("MTRN weak", "MTLCM", m, pub_model)
        for m, pub_model, _ in table.compare[:-1]
        if f"{m}_mean" in part.columns and part[f"{m}_mean"].notna().any()
    ]
    present = list(dict.fromkeys(part["model"]))
    ordered = [m for m in MODELS if m in present] + [
        m for m in present if m not in MODELS
    ]
    cols += [(m, m, metric, None) for m in ordered]
    lines = [
        f"Side by side: {labels.get(metric, metric)} ×100 (MTRN weak: its weak "
        "MCC), ours (paper).\n",
        "| " + " | ".join([*table.keys, *(c[0] for c in cols)]) + " |",
        "|" + "---|" * (len(table.keys) + len(cols)),
    ]
    for key, grp in part.groupby(list(table.keys), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cells = [str(int(v)) for v in key]
        by_model = {r["model"]: r for _, r in grp.iterrows()}
        for _, model, m, pub_model in cols:
            row = by_model.get(model)
            if row is None or pd.isna(row.get(f"{m}_mean")):
                cells.append("-")
                continue
            ours = _pm(row[f"{m}_mean"], row[f"{m}_std"], 100, 2)
            pm, _ = _published(pub, table, row, m, pub_model, mixing)
            cells.append(ours + ("" if pm is None else f" ({pm:.2f})"))
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#"}


def _tex(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def build_latex(summ: pd.DataFrame) -> str:
    """LaTeX (booktabs) tables of a summary: per table and mixing, one row per
    model and configuration with our mean ± std (x100) of the compared metrics and
    the paper's numbers beside them; the best model of each configuration is set
    in bold (on our main metric)."""
    chunks = [
        "% identrep results; needs \\usepackage{booktabs}. Mean $\\pm$ std "
        "over seeds (x100)."
    ]
    for (table_name, mixing, source), part in summ.groupby(
        ["table", "mixing", "mixing_source"], sort=False
    ):
        table = get_table(table_name)
        pub = published_results(table_name)
        main = table.compare[-1][0]
        best = {}
        if f"{main}_mean" in part.columns:
            for key, grp in part.groupby(list(table.keys)):
                vals = grp[f"{main}_mean"]
                if vals.notna().any():
                    best[key if isinstance(key, tuple) else (key,)] = grp.loc[
                        vals.idxmax(), "model"
                    ]
        head = ["model", *[k.replace("n_", "") for k in table.keys]]
        labels = {m: lab for m, lab, _ in table.metrics}
        for metric, _, label in table.compare:
            head += [f"{labels.get(metric, metric)}", label]
        lines = [
            "\\begin{table}[t]",
            "\\centering\\small",
            f"\\caption{{{_tex(table.title)}, {_tex(mixing)} mixing "
            f"({_tex(source)} matrices).}}",
            f"\\begin{{tabular}}{{l{'r' * (len(head) - 1)}}}",
            "\\toprule",
            " & ".join(_tex(h) for h in head) + " \\\\",
            "\\midrule",
        ]
        previous_model = None
        for _, row in part.sort_values(["model", *table.keys]).iterrows():
            if previous_model is not None and row["model"] != previous_model:
                lines.append("\\midrule")
            previous_model = row["model"]
            key = tuple(row[k] for k in table.keys)
            cells = [_tex(row["model"]), *[str(int(v)) for v in key]]
            for metric, model, _ in table.compare:
                mean = row.get(f"{metric}_mean")
                if mean is None or pd.isna(mean):
                    ours = "--"
                else:
                    ours = f"${mean * 100:.2f} \\pm {row[f'{metric}_std'] * 100:.2f}$"
                    if metric == main and best.get(key) == row["model"]:
                        ours = f"$\\mathbf{{{mean * 100:.2f}}} \\pm " + (
                            f"{row[f'{metric}_std'] * 100:.2f}$"
                        )
                pm, ps = _published(pub, table, row, metric, model, mixing)
                paper = "--" if pm is None else f"${pm:.2f} \\pm {ps:.2f}$"
                cells += [ours, paper]
            lines.append(" & ".join(cells) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def write_report(out: str | Path, *, plots: bool = True) -> tuple[pd.DataFrame, str]:
    """Rebuild ``results.csv``, ``report.md``, ``report.tex`` and (with
    matplotlib) ``plots/*.png`` in ``out`` from its records alone."""
    out = Path(out)
    records = load_records(out)
    df = records_to_frame(records)
    if df.empty:
        n_failed = sum(r.get("status") == "failed" for r in records)
        raise ValueError(
            f"No records in {out / 'records'}; nothing to report."
            if not n_failed
            else f"All {n_failed} runs in {out / 'records'} failed; see their errors."
        )
    atomic_write_text(out / "results.csv", df.to_csv(index=False))
    cross = cross_seed_summary(records, out)
    text, summ = build_report(df, cross)
    atomic_write_text(out / "report.tex", build_latex(summ))
    figures = ""
    if plots:
        from identrep.experiments.plots import plot_summary

        try:
            paths = plot_summary(summ, out / "plots")
        except ImportError as exc:
            figures = f"\n(No plots: {exc})\n"
        else:
            figures = "".join(f"\n![{p.stem}](plots/{p.name})\n" for p in paths)
    failed = sorted(
        (r["run_id"], r["error"]) for r in records if r.get("status") == "failed"
    )
    if failed:
        text += (
            f"\n## Failed runs ({len(failed)})\n\nNo metrics; the seeds are fixed, "
            "so running them again fails the same way (delete a record to retry).\n\n"
            + "".join(f"- `{rid}`: {err}\n" for rid, err in failed)
        )
    header = "# identrep results\n\nRebuilt from the records in `records/`.\n\n"
    atomic_write_text(out / "report.md", header + text + figures)
    return df, text
