"""Table 2 baseline cells at a longer epoch cap, paired with the stored fits.

Reads the lines that ``benchmarks/chen2024_baseline_budget_probe.py --study table2``
printed (files given as arguments) and the stored 30-epoch records of
``docs/results/table2_baselines_partial`` (``--folder``; same data and model seeds), and
prints per cell (model, k, p): the seeds refitted, the cell at the probe's cap
(mean ± std over those seeds, ddof=0, x100), the stored cell over the same seeds,
the per-seed change and how many seeds rose, and the stored cell over all five
seeds. ``--patience none`` summarises the probe's ``--patience none`` refits instead.
Used for docs/notes.md, "Coordinator, stop 30" and "Coordinator, stop 31"::

    PYTHONPATH=src python benchmarks/chen2024_table2_budget_cells.py \\
        docs/results/table2_baselines_partial/epoch_cap_probe/*.txt
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from identrep.experiments import load_records

LINE = re.compile(r"(\S+) k=(\d+) p=(\d+) seed=(\d+) cap=(\d+) mcc_task=([\d.]+)")
PATIENCE = re.compile(r" patience=(\S+)$")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe_output", nargs="+", type=Path)
    ap.add_argument(
        "--folder",
        type=Path,
        default=Path("docs/results/table2_baselines_partial"),
        help="a reproduce table2 --out folder (its records/)",
    )
    ap.add_argument("--cap", type=int, default=100)
    ap.add_argument(
        "--patience",
        default=None,
        help="only the probe's --patience refits of this value (lines ending in "
        "patience=VALUE); default: only the refits with the study's patience",
    )
    args = ap.parse_args()
    stored = {}
    for r in load_records(args.folder):
        c = r["config"]
        key = (c["model"], c["n_causal"], c["n_observed"], c["seed"])
        stored[key] = r["metrics"]["mcc_task_spearman"]
    new = {}
    for path in args.probe_output:
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            p = PATIENCE.search(line)
            if (p[1] if p else None) != args.patience:
                continue
            if m and int(m[5]) == args.cap:
                new[(m[1], int(m[2]), int(m[3]), int(m[4]))] = float(m[6])
    for cell in sorted({k[:3] for k in new}):
        seeds = sorted(k[3] for k in new if k[:3] == cell)
        a = 100 * np.array([new[(*cell, s)] for s in seeds])
        b = 100 * np.array([stored[(*cell, s)] for s in seeds])
        every = 100 * np.array([v for k, v in stored.items() if k[:3] == cell])
        model, k, p = cell
        tag = "" if args.patience is None else f" patience={args.patience}"
        print(
            f"{model} k={k} p={p} seeds={seeds} cap{args.cap}{tag} "
            f"{a.mean():.2f} ± {a.std():.2f} | cap 30, same seeds {b.mean():.2f} | "
            f"change {(a - b).mean():+.2f} ± {(a - b).std():.2f}, "
            f"up in {int((a > b).sum())} of {len(a)} | cap 30, all "
            f"{every.mean():.2f} ± {every.std():.2f} ({len(every)} seeds)"
        )


if __name__ == "__main__":
    main()
