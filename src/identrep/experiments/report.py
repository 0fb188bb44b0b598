"""Tables from run records: results.csv (one row per run), report.md, report.tex.

Everything study-specific (columns, groups, sections, metrics, the published
numbers and footnotes) comes from the records' registry entries
(:class:`~identrep.experiments.registry.ReportSpec`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from identrep.experiments.io import atomic_write_text, latents_path, load_records
from identrep.experiments.registry import get_study, published_results

__all__ = [
    "build_latex",
    "build_report",
    "cross_seed_summary",
    "records_to_frame",
    "summarise",
    "write_report",
    "write_report_from_frame",
]

_SEEDS = ("seed", "data_seed", "model_seed")


def _tables(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["table"])) if "table" in df.columns else []


def _scalar(value) -> bool:
    return not isinstance(value, (list, dict, tuple))


def records_to_frame(records: list[dict]) -> pd.DataFrame:
    """One row per run: configuration fields (the study's ``columns``), seeds,
    scalar metric columns."""
    rows = []
    for r in records:
        if r.get("status") == "failed":
            continue  # listed by write_report, no metrics
        spec = get_study(r["config"]["table"]).report
        row = {k: r["config"].get(k) for k in spec.columns}
        row.update(data_seed=r["data_seed"], model_seed=r["model_seed"])
        row.update({k: v for k, v in r["metrics"].items() if _scalar(v)})
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        order = []
        for name in sorted(set(df["table"])):
            order += [k for k in get_study(name).report.sort if k not in order]
        df = df.sort_values(["table", "model", *order, "seed"]).reset_index(drop=True)
    return df


def _group_keys(name: str) -> list[str]:
    return ["table", "model", *get_study(name).report.group]


def _config_columns(df: pd.DataFrame) -> set[str]:
    cols = set(_SEEDS)
    for name in _tables(df):
        spec = get_study(name).report
        cols |= set(spec.columns) | set(spec.group)
    return cols


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std (ddof=0, as over seeds in the paper) per configuration (the
    study's ``group`` fields), one study after the other."""
    skip = _config_columns(df)
    metrics = [
        c
        for c in df.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(df[c])
        and not pd.api.types.is_bool_dtype(df[c])
    ]
    parts = []
    for name in sorted(_tables(df)):
        sub = df[df["table"] == name]
        g = sub.groupby(_group_keys(name), sort=True, dropna=False)
        mean = g[metrics].mean()
        std = g[metrics].std(ddof=0)
        out = mean.add_suffix("_mean").join(std.add_suffix("_std"))
        out["n_seeds"] = g.size()
        parts.append(out.reset_index())
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _pm(mean: float, std: float, scale: float, digits: int = 2) -> str:
    if mean is None or (isinstance(mean, float) and np.isnan(mean)):
        return "-"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def _published(pub, spec, row, metric, model):
    """The paper's (mean, std) x100 for this row's configuration: of ``model``, or
    of the row's own model when ``model`` is None; (None, None) if there is none."""
    model = row["model"] if model is None else model
    if pub is None or f"{metric}_mean" not in row.index:
        return None, None
    if any(row.get(f) != v for f, v in spec.published_when):
        return None, None
    if pd.isna(row[f"{metric}_mean"]):
        return None, None
    sel = (pub["model"] == model) & np.logical_and.reduce(
        [pub[k] == row[k] for k in spec.keys]
    )
    if "metric" in pub.columns:
        sel &= pub["metric"] == metric
    match = pub[sel]
    if not len(match):
        return None, None
    col = "mean" if "mean" in pub.columns else "mcc_mean"
    std = "std" if "std" in pub.columns else "mcc_std"
    return float(match[col].iloc[0]), float(match[std].iloc[0])


def cross_seed_summary(records: list[dict], out: str | Path) -> pd.DataFrame:
    """Agreement across seeds for the studies whose report asks for it (real
    data: Table 3, QM9), from the stored representations in ``out/latents``: for
    every configuration, every pair of seeds is scored with Pearson MCC of the
    latents (``cross_seed_mcc``) and in-sample CCA + Spearman MCC of the MTRN
    features (``cross_seed_weak_mcc``, where stored); mean and std (ddof=0) over
    the pairs."""
    from identrep.metrics import cross_seed_mcc

    groups: dict[tuple, list[dict]] = {}
    for r in records:
        name = r["config"]["table"]
        if r.get("status") == "failed" or not get_study(name).report.cross_seed:
            continue
        key = tuple(r["config"][k] for k in _group_keys(name))
        groups.setdefault(key, []).append(r)
    rows = []
    for key, recs in groups.items():
        recs = sorted(recs, key=lambda r: r["config"]["seed"])
        seeds = [r["config"]["seed"] for r in recs]
        if len(set(seeds)) < len(seeds):  # e.g. Table 3 baselines of two budgets
            raise ValueError(
                f"{out}: runs of one configuration group {key} share seed indices "
                f"({sorted(seeds)}): records of different settings (e.g. "
                "baseline_materials / baseline_steps) are in one folder; keep each "
                "setting in its own --out folder."
            )
        row = dict(zip(_group_keys(key[0]), key, strict=True), n_pairs=0)
        if len(recs) >= 2:
            arrays = []
            for r in recs:
                path = latents_path(Path(out) / "latents", r["run_id"])
                if not path.exists():
                    raise FileNotFoundError(
                        f"Record {r['run_id']} has no stored latents at {path}; "
                        "run the sweep again (it recomputes that run) to compare "
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


def _with_cross_seed(summ: pd.DataFrame, cross: pd.DataFrame | None) -> pd.DataFrame:
    """Join the cross-seed summary onto each study's rows (on its group keys)."""
    if cross is None or not len(cross):
        return summ
    parts = []
    for name in _tables(summ):
        part = summ[summ["table"] == name]
        mine = cross[cross["table"] == name]
        if len(mine):
            keys = _group_keys(name)
            part = part.merge(mine.dropna(axis=1, how="all"), on=keys, how="left")
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _sections(part: pd.DataFrame, fields: tuple[str, ...]):
    """(section dict, rows) of a study's summary, in order of appearance."""
    if not fields:
        yield {}, part
        return
    for values, rows in part.groupby(list(fields), sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        yield dict(zip(fields, values, strict=True)), rows


def _runs_of(df: pd.DataFrame, name: str, section: dict) -> pd.DataFrame:
    rows = df[df["table"] == name]
    for k, v in section.items():
        rows = rows[rows[k] == v]
    return rows


def build_report(
    df: pd.DataFrame, cross_seed: pd.DataFrame | None = None
) -> tuple[str, pd.DataFrame]:
    """Markdown report with our mean ± std beside the published numbers
    (``cross_seed``: the summary of :func:`cross_seed_summary`, joined on the
    configuration)."""
    summ = _with_cross_seed(summarise(df), cross_seed)
    lines, footnotes = [], []
    for name in _tables(summ):
        study = get_study(name)
        spec = study.report
        pub = published_results(name)
        for section, part in _sections(summ[summ["table"] == name], spec.sections):
            how = spec.heading(section) if spec.heading else ""
            lines.append(f"## {study.title}{how}\n")
            intro = (
                spec.intro(_runs_of(df, name, section))
                if callable(spec.intro)
                else spec.intro
            )
            if intro:
                lines.append(intro + "\n")
            lines += _table_lines(part, spec, pub)
            if pub is not None:
                for f, v in spec.published_when:
                    if section.get(f, v) != v:
                        lines.append(f"\n(The paper reports {v} {f} only.)")
            elif study.published_note:
                lines.append(f"\n{study.published_note}")
            lines.append("")
            if part["model"].nunique() > 1:
                lines += _side_by_side(part, study, pub)
        if spec.footnote and spec.footnote not in footnotes:
            footnotes.append(spec.footnote)
    lines += footnotes
    return "\n".join(lines) + "\n", summ


def _table_lines(part: pd.DataFrame, spec, pub) -> list[str]:
    """One row per model and configuration: the metrics, then each compared
    metric's published number and our difference."""
    shown = [(m, lab, sc) for m, lab, sc in spec.metrics if f"{m}_mean" in part.columns]
    head = ["model", *spec.keys, "seeds"]
    head += [lab + (" ×100" if sc == 100 else "") for _, lab, sc in shown]
    compare = spec.compare if pub is not None else ()
    for metric, _, label in compare:
        x100 = " ×100" if spec.scale(metric) == 100 else ""
        head += [f"{label}{x100}", "ours − paper"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, row in part.iterrows():
        cells = [
            row["model"],
            *[str(int(row[k])) for k in spec.keys],
            str(int(row["n_seeds"])),
        ]
        for m, _, scale in shown:
            digits = 2 if scale == 100 else 1
            cells.append(_pm(row.get(f"{m}_mean"), row.get(f"{m}_std"), scale, digits))
        for metric, model, _ in compare:
            pm, ps = _published(pub, spec, row, metric, model)
            if pm is None:
                cells += ["-", "-"]
            else:
                ours = row[f"{metric}_mean"] * spec.scale(metric)
                cells += [f"{pm:.2f} ± {ps:.2f}", f"{ours - pm:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _side_by_side(part: pd.DataFrame, study, pub) -> list:
    """Markdown lines of one configuration per row and one column per model:
    our mean ± std of the study's main metric with the paper's mean beside it
    (and, where the study compares one, MTRN's weak MCC as its own column)."""
    spec = study.report
    metric = spec.main_metric
    if f"{metric}_mean" not in part.columns:
        return []
    labels = {m: lab for m, lab, _ in spec.metrics}
    # columns: (title, model whose rows hold it, metric, published model)
    cols = [
        ("MTRN weak", "MTLCM", m, pub_model)
        for m, pub_model, _ in spec.compare[:-1]
        if pub_model is not None
        and f"{m}_mean" in part.columns
        and part[f"{m}_mean"].notna().any()
    ]
    present = list(dict.fromkeys(part["model"]))
    ordered = [m for m in study.models if m in present] + [
        m for m in present if m not in study.models
    ]
    cols += [(m, m, metric, None) for m in ordered]
    x100 = " ×100" if spec.scale(metric) == 100 else ""
    weak = (
        " (MTRN weak: its weak MCC)" if any(c[0] == "MTRN weak" for c in cols) else ""
    )
    lines = [
        f"Side by side: {labels.get(metric, metric)}{x100}{weak}, ours (paper).\n",
        "| " + " | ".join([*spec.keys, *(c[0] for c in cols)]) + " |",
        "|" + "---|" * (len(spec.keys) + len(cols)),
    ]
    for key, grp in part.groupby(list(spec.keys), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cells = [str(int(v)) for v in key]
        by_model = {r["model"]: r for _, r in grp.iterrows()}
        for _, model, m, pub_model in cols:
            row = by_model.get(model)
            if row is None or pd.isna(row.get(f"{m}_mean")):
                cells.append("-")
                continue
            ours = _pm(row[f"{m}_mean"], row[f"{m}_std"], spec.scale(m), 2)
            pm, _ = _published(pub, spec, row, m, pub_model)
            cells.append(ours + ("" if pm is None else f" ({pm:.2f})"))
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#"}


def _tex(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def build_latex(summ: pd.DataFrame) -> str:
    """LaTeX (booktabs) tables of a summary: per study and section, one row per
    model and configuration with our mean ± std (x100) of the compared metrics and
    the paper's numbers beside them (a study without published numbers: its
    x100 metrics); the best model of each configuration is set in bold (on the
    main metric)."""
    chunks = [
        "% identrep results; needs \\usepackage{booktabs}. Mean $\\pm$ std "
        "over seeds (x100)."
    ]
    for name in _tables(summ):
        study = get_study(name)
        spec = study.report
        pub = published_results(name)
        compare = (
            spec.compare
            if pub is not None
            else tuple((m, None, None) for m, _, sc in spec.metrics if sc == 100)
        )
        main = spec.main_metric
        labels = {m: lab for m, lab, _ in spec.metrics}
        for section, part in _sections(summ[summ["table"] == name], spec.sections):
            best = {}
            if f"{main}_mean" in part.columns:
                for key, grp in part.groupby(list(spec.keys)):
                    vals = grp[f"{main}_mean"]
                    if vals.notna().any():
                        at = (
                            vals.idxmin()
                            if main in spec.lower_is_better
                            else vals.idxmax()
                        )
                        best[key if isinstance(key, tuple) else (key,)] = grp.loc[
                            at, "model"
                        ]
            head = ["model", *[k.replace("n_", "") for k in spec.keys]]
            for metric, _, label in compare:
                head += [f"{labels.get(metric, metric)}"]
                head += [label] if label is not None else []
            where = spec.heading(section) if spec.heading else ""
            lines = [
                "\\begin{table}[t]",
                "\\centering\\small",
                f"\\caption{{{_tex(study.title + where)}.}}",
                f"\\begin{{tabular}}{{l{'r' * (len(head) - 1)}}}",
                "\\toprule",
                " & ".join(_tex(h) for h in head) + " \\\\",
                "\\midrule",
            ]
            previous_model = None
            for _, row in part.sort_values(["model", *spec.keys]).iterrows():
                if previous_model is not None and row["model"] != previous_model:
                    lines.append("\\midrule")
                previous_model = row["model"]
                key = tuple(row[k] for k in spec.keys)
                cells = [_tex(row["model"]), *[str(int(v)) for v in key]]
                for metric, model, label in compare:
                    cells.append(
                        _tex_ours(
                            row,
                            metric,
                            metric == main and (best.get(key) == row["model"]),
                            spec.scale(metric),
                        )
                    )
                    if label is not None:
                        pm, ps = _published(pub, spec, row, metric, model)
                        cells.append(
                            "--" if pm is None else f"${pm:.2f} \\pm {ps:.2f}$"
                        )
                lines.append(" & ".join(cells) + " \\\\")
            lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
            chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def _tex_ours(row, metric: str, bold: bool, scale: float = 100) -> str:
    mean = row.get(f"{metric}_mean")
    if mean is None or pd.isna(mean):
        return "--"
    std = row[f"{metric}_std"] * scale
    if bold:
        return f"$\\mathbf{{{mean * scale:.2f}}} \\pm " + f"{std:.2f}$"
    return f"${mean * scale:.2f} \\pm {std:.2f}$"


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
    cross = cross_seed_summary(records, out)
    failed = sorted(
        (r["run_id"], r["error"]) for r in records if r.get("status") == "failed"
    )
    tail = ""
    if failed:
        tail = (
            f"\n## Failed runs ({len(failed)})\n\nNo metrics; the seeds are fixed, "
            "so running them again fails the same way (delete a record to retry).\n\n"
            + "".join(f"- `{rid}`: {err}\n" for rid, err in failed)
        )
    return write_report_from_frame(
        out, df, source="the records in `records/`", cross=cross, plots=plots, tail=tail
    )


def write_report_from_frame(
    out: str | Path,
    df: pd.DataFrame,
    *,
    source: str,
    cross: pd.DataFrame | None = None,
    plots: bool = True,
    tail: str = "",
) -> tuple[pd.DataFrame, str]:
    """Write ``results.csv``, ``report.md`` (headed "Rebuilt from ``source``"),
    ``report.tex`` and (with matplotlib) ``plots/*.png`` in ``out`` from the
    per-run rows ``df`` (:func:`records_to_frame`, or a stored ``results.csv``);
    ``cross``: :func:`cross_seed_summary` of the runs' latents, ``tail``: text
    after the tables. Returns ``df`` and the report's text."""
    out = Path(out)
    atomic_write_text(out / "results.csv", df.to_csv(index=False))
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
    text += tail
    header = f"# identrep results\n\nRebuilt from {source}.\n\n"
    atomic_write_text(out / "report.md", header + text + figures)
    return df, text
