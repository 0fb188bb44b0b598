"""Rebuild a study's report (Chen et al. Table 1 or 3) from run folders plus rows
kept from an earlier report whose records or latents are gone.

``identrep report DIR`` needs every run's stored latents to score seeds against
each other. The MTLCM runs at d = 5-40 of ``docs/results/table3_report.md`` were
measured in a folder that no longer exists: their per-run rows survive in
``table3_results.csv`` and their cross-seed MCCs (x100, two decimals) in the
report's table. This script takes the runs of ``--run`` (records and latents, as
``identrep report`` does; ``--run`` may be given several times, each as ``DIR`` or
``DIR:M1,M2`` to take only those models' records from DIR, and no model and
n_latents may come from two folders), adds the kept models' rows of the old CSV
for the configurations the runs lack, with the old report's cross-seed numbers, and
writes ``report.md``, ``report.tex``, ``results.csv`` and ``plots/`` to ``--out``
through the study's own report code. It then checks that every kept row of the
old report appears unchanged in the new one, and fails if not. Run from the
repository root, e.g.::

    PYTHONPATH=src python benchmarks/merge_report.py --run /tmp/t3 \\
        --old-csv docs/results/table3_results.csv \\
        --old-report docs/results/table3_report.md --keep MTLCM --out /tmp/merged

    PYTHONPATH=src python benchmarks/merge_report.py --run /tmp/t3 \
        --run /tmp/mtlcm_d40:MTLCM --run /tmp/mtlcm_d80:MTLCM ...

``DIR:M1,M2@D1,D2`` (or ``DIR@D1,D2``) also keeps only those n_latents, so that a
folder still filling up contributes its complete latent dimensions only.

``--variant SPEC`` (repeatable, same syntax) builds a second table from other
runs of the same configurations, e.g. the Table 3 baselines trained on the
3,000-material subset beside the main table's all-materials rows; it is scored
from its own latents, shown under ``## Variant: --variant-title`` after the
main tables, and its rows go to ``variant_results.csv``::

    PYTHONPATH=src python benchmarks/merge_report.py \
        --run /work/runs/t3_baselines_all@5,10,20 \
        --run /work/runs/t3_mtlcm_d5_20:MTLCM ... \
        --variant /work/runs/t3_baselines --variant-title "baselines on one subset" ...

A configuration is (model, n_causal, n_latents). ``--study table1`` rebuilds
Table 1, whose report has no cross-seed columns (its iVAE and iCaRL rows survive
only in ``table1_results.csv``)::

    PYTHONPATH=src python benchmarks/merge_report.py --study table1 \
        --run /tmp/t1_mtlcm:MTLCM --run /work/runs/t1_mt:MT-iVAE \
        --run /work/runs/t1_mticarl:MT-iCaRL --old-csv docs/results/table1_results.csv \
        --old-report docs/results/table1_report.md --keep iVAE iCaRL --out /tmp/t1
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from identrep.experiments.io import atomic_write_text, load_records
from identrep.experiments.registry import get_study
from identrep.experiments.report import (
    build_latex,
    build_report,
    cross_seed_summary,
    records_to_frame,
)

_PM = re.compile(r"^(-?[0-9.]+) ± ([0-9.]+)$")
_CROSS = {
    "MTRN weak MCC across seeds ×100": "cross_seed_weak_mcc",
    "strong MCC across seeds (latents) ×100": "cross_seed_mcc",
}


def _table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the report's first markdown table."""
    lines = [ln for ln in text.splitlines() if ln.startswith("| model |")]
    if not lines:
        raise ValueError("The old report has no '| model | ...' table.")
    start = text.splitlines().index(lines[0])
    body = []
    for ln in text.splitlines()[start + 2 :]:
        if not ln.startswith("|"):
            break
        body.append([c.strip() for c in ln.strip("|").split("|")])
    return [c.strip() for c in lines[0].strip("|").split("|")], body


def _row_key(row: dict) -> tuple[str, int, int]:
    """(model, n_causal, n_latents) of a report row (a study without n_causal in
    its table, Table 3, has 0 there)."""
    return row["model"], int(row.get("n_causal", 0)), int(row["n_latents"])


def _keys(frame: pd.DataFrame) -> list[tuple[str, int, int]]:
    cols = zip(frame["model"], frame["n_causal"], frame["n_latents"], strict=True)
    return [(m, int(k), int(d)) for m, k, d in cols]


def old_cross_seed(
    text: str, keep: set[str], old: pd.DataFrame, study: str
) -> pd.DataFrame:
    """Cross-seed mean and std (fractions) of the kept models, parsed from the old
    report, keyed on the study's group fields (filled from the old CSV)."""
    head, body = _table_rows(text)
    keys = ["table", "model", *get_study(study).report.group]
    rows = []
    for cells in body:
        row = dict(zip(head, cells, strict=True))
        if row["model"] not in keep:
            continue
        key = _row_key(row)
        first = old[[k == key for k in _keys(old)]]
        if not len(first):
            raise ValueError(f"{key} is in the report, not the CSV.")
        out = {k: first.iloc[0][k] for k in keys}
        for col, metric in _CROSS.items():
            m = _PM.match(row.get(col, ""))
            if m:
                out[f"{metric}_mean"] = float(m.group(1)) / 100
                out[f"{metric}_std"] = float(m.group(2)) / 100
        rows.append(out)
    return pd.DataFrame(rows)


def _absent(frame: pd.DataFrame, have: set) -> list[bool]:
    """Rows whose (model, n_causal, n_latents) the new runs do not have."""
    return [k not in have for k in _keys(frame)]


def parse_spec(spec: str) -> tuple[str, set[str] | None, set[int] | None]:
    """``DIR[:M1,M2][@D1,D2]`` as (folder, models or None, n_latents or None)."""
    rest, _, dims = spec.partition("@")
    folder, _, models = rest.partition(":")
    try:
        wanted_d = {int(d) for d in dims.split(",")} if dims else None
    except ValueError:
        raise ValueError(
            f"--run {spec}: the part after '@' must be n_latents values such as "
            f"5,10,20; got {dims!r}."
        ) from None
    return folder, (set(models.split(",")) if models else None), wanted_d


def load_runs(specs: list[str]) -> tuple[list[dict], pd.DataFrame, pd.DataFrame]:
    """Records, their rows and their cross-seed summary from every ``DIR``,
    ``DIR:M1,M2`` or ``DIR[:M1,M2]@D1,D2`` of ``specs`` (each folder scored from
    its own latents)."""
    records, frames, cross = [], [], []
    seen: dict[tuple[str, int], str] = {}
    for spec in specs:
        folder, models, dims = parse_spec(spec)
        recs = load_records(folder)
        if models:
            recs = [r for r in recs if r["config"]["model"] in models]
        if dims:
            recs = [r for r in recs if int(r["config"]["n_latents"]) in dims]
        if not recs:
            raise ValueError(f"--run {spec}: no records of the wanted runs there.")
        for key in {_row_key(r["config"]) for r in recs}:
            if key in seen:
                raise ValueError(
                    f"{key[0]} n_causal={key[1]} n_latents={key[2]} is in both "
                    f"{seen[key]} and {folder}; give each configuration one folder "
                    "(--run DIR:MODELS)."
                )
            seen[key] = folder
        records += recs
        frames.append(records_to_frame(recs))
        cross.append(cross_seed_summary(recs, folder))
    return (
        records,
        pd.concat(frames, ignore_index=True),
        pd.concat(cross, ignore_index=True),
    )


def _variant_section(text: str, title: str, study: str) -> str:
    """The variant's report under its own heading, without the study's footnote
    (the main report already has it)."""
    footnote = get_study(study).report.footnote
    if footnote:
        text = text.replace(footnote, "")
    lines = text.rstrip().splitlines()
    lines = [f"## Variant: {title}" if ln.startswith("## ") else ln for ln in lines]
    return "\n" + "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--run",
        required=True,
        action="append",
        help="run folder (records/, latents/), or DIR:M1,M2 for some models only; "
        "repeatable",
    )
    ap.add_argument("--study", default="table3", choices=["table1", "table3"])
    ap.add_argument("--old-csv", required=True)
    ap.add_argument("--old-report", required=True)
    ap.add_argument("--keep", nargs="+", default=["MTLCM"])
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="run folder (same syntax as --run) of a second table of other runs "
        "of the same configurations; repeatable",
    )
    ap.add_argument(
        "--variant-title",
        default="other runs",
        help="heading of the --variant table (after '## Variant: ')",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    keep = set(args.keep)

    records, new, cross_new = load_runs(args.run)
    have = set(_keys(new))
    old = pd.read_csv(args.old_csv)
    old = old[old["model"].isin(keep)]
    old_text = Path(args.old_report).read_text(encoding="utf-8")
    # parsed before dropping the rows the runs replace: every kept report row
    # must still have its CSV rows
    cross_old = old_cross_seed(old_text, keep, old, args.study)
    old = old[_absent(old, have)]
    cross_old = cross_old[_absent(cross_old, have)]

    spec = get_study(args.study).report
    df = pd.concat([new, old], ignore_index=True)
    df = df.sort_values(["table", "model", *spec.sort, "seed"]).reset_index(drop=True)
    cross = pd.concat([cross_new, cross_old], ignore_index=True)
    text, summ = build_report(df, cross)

    from identrep.experiments.plots import plot_summary

    paths = plot_summary(summ, out / "plots")
    figures = "".join(f"\n![{p.stem}](plots/{p.name})\n" for p in paths)
    failed = sorted(
        (r["run_id"], r["error"]) for r in records if r.get("status") == "failed"
    )
    if failed:
        text += f"\n## Failed runs ({len(failed)})\n\n" + "".join(
            f"- `{rid}`: {err}\n" for rid, err in failed
        )

    def _named(spec: str) -> str:
        folder, models, dims = parse_spec(spec)
        what = [", ".join(sorted(models))] if models else []
        what += [f"n_latents {', '.join(str(d) for d in sorted(dims))}"] if dims else []
        return f"`{Path(folder).name}`" + (f" ({'; '.join(what)})" if what else "")

    folders = ", ".join(_named(spec) for spec in args.run)
    variant_from = (
        "; the variant table from "
        + ", ".join(_named(s) for s in args.variant)
        + f" ('Variant: {args.variant_title}' below)"
        if args.variant
        else ""
    )
    kept_from = (
        f" plus the {', '.join(sorted(keep))} rows at n_latents "
        f"{', '.join(str(int(d)) for d in sorted(set(old['n_latents'])))} kept from "
        "the previous report (their records or latents are not stored)"
        if len(old)
        else " (no row kept from the previous report)"
    )
    header = (
        "# identrep results\n\nRebuilt with `benchmarks/merge_report.py`: "
        f"the records of the run folders {folders}{kept_from}{variant_from}.\n\n"
    )
    variant = ""
    if args.variant:
        _, vdf, vcross = load_runs(args.variant)
        vdf = vdf.sort_values(["table", "model", *spec.sort, "seed"])
        vtext, _ = build_report(vdf.reset_index(drop=True), vcross)
        variant = _variant_section(vtext, args.variant_title, args.study)
        atomic_write_text(out / "variant_results.csv", vdf.to_csv(index=False))
    atomic_write_text(out / "report.md", header + text + figures + variant)
    atomic_write_text(out / "report.tex", build_latex(summ))
    atomic_write_text(out / "results.csv", df.to_csv(index=False))

    # every kept row of the old report's first table, unchanged
    new_lines = set(text.splitlines())
    head, body = _table_rows(old_text)
    kept_keys = set(_keys(old))
    # (the header repeats "ours − paper", so rows are rebuilt from their cells)
    kept = [
        "| " + " | ".join(cells) + " |"
        for cells in body
        if cells[0] in keep
        and _row_key(dict(zip(head, cells, strict=True))) in kept_keys
    ]
    missing = [ln for ln in kept if ln not in new_lines]
    if missing:
        raise SystemExit("Kept rows changed:\n" + "\n".join(missing))
    print(f"{len(kept)} kept rows unchanged; report in {out / 'report.md'}")


if __name__ == "__main__":
    main()
