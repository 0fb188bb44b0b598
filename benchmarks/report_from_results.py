"""Rebuild a study's report from ``results.csv`` files, for runs whose records
are gone.

``identrep report DIR`` reads a folder's records. Some stored results survive
only as the ``results.csv`` of their report (one row per run, every configuration
field and metric; e.g. the 100 Sparse VAE and VAE runs of
``docs/results/moran2022_synthetic``, measured before records were kept in the
repository). This script concatenates
the rows of every ``--csv`` (and, with ``--run DIR``, the records of run
folders), refuses a run that two sources both hold (same configuration), and
writes ``report.md``, ``report.tex``, ``results.csv`` and ``plots/`` to ``--out``
with :func:`identrep.experiments.report.write_report_from_frame` (the code behind
``identrep report``). Only for studies whose report needs no
stored latents (no cross-seed columns). Run from the repository root::

    PYTHONPATH=src python benchmarks/report_from_results.py \\
        --csv docs/results/moran2022_synthetic/results_sparse_vae_vae.csv \\
        --run docs/results/moran2022_synthetic/new_rows \\
        --out docs/results/moran2022_synthetic
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from identrep.experiments.io import load_records
from identrep.experiments.registry import get_study
from identrep.experiments.report import records_to_frame, write_report_from_frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", nargs="*", default=[], type=Path)
    ap.add_argument("--run", nargs="*", default=[], type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    parts = [pd.read_csv(p) for p in args.csv]
    parts += [records_to_frame(load_records(d)) for d in args.run]
    if not parts:
        raise SystemExit("give at least one --csv or --run")
    df = pd.concat(parts, ignore_index=True)
    tables = df["table"].unique()
    if len(tables) != 1:
        raise SystemExit(f"the sources hold several studies: {list(tables)}")
    spec = get_study(tables[0]).report
    key = [c for c in spec.columns if c in df]
    dup = df[df.duplicated(key, keep=False)]
    if len(dup):
        raise SystemExit(f"{len(dup)} rows share a configuration:\n{dup[key]}")
    args.out.mkdir(parents=True, exist_ok=True)
    sources = ", ".join(
        [f"`{p}`" for p in args.csv] + [f"the records of `{d}`" for d in args.run]
    )
    write_report_from_frame(args.out, df, source=f"{sources} ({len(df)} runs)")
    print(f"{len(df)} runs -> {args.out / 'report.md'}")


if __name__ == "__main__":
    main()
