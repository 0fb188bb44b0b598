"""Pair the refits of ``moran2022_svae_probe.py`` with a stored row, split by split.

Reads probe output (files or stdin) and a table's results folder, and prints for
every (variant, shift) the mean ± std over splits of the refit's metric, of the
stored ``--against`` row's, and of their per-split difference (refit − stored,
std with ddof 1), with the number of splits where the refit is better (lower
NLL, higher accuracy / recall; differences within the probe's printed digits
are counted as equal). ``folder`` may instead be a probe output file: its
``--against`` lines are then the reference (two refits paired with each other,
e.g. both rows at three hidden layers). Used for docs/notes.md, "Coordinator,
stop 32" and "Coordinator, stop 33".

Usage::

    python benchmarks/moran2022_probe_pairs.py docs/results/moran2022_table2_e50 \\
        --against SVAE_KL1overK --metric nll probe_output.txt
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

import numpy as np
import pandas as pd

LINE = re.compile(
    r"^(?P<table>table\w+) K=\d+(?: sigma=(?P<sigma>[\d.]+))? split (?P<split>\d+) "
    r"(?P<model>\S+) variant=\[(?P<variant>[^\]]*)\] (?P<rest>.*)$"
)
#: Half a unit of the probe's last printed digit (4 decimals).
TIE = 5e-5
HIGHER_IS_BETTER = ("accuracy", "recall_at_5_same_rows", "ndcg_at_10_same_rows")


def parse(lines):
    """Probe lines -> rows of (model, variant, sigma_pct, split, metrics)."""
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        metrics = dict(
            (k, float(v))
            for k, v in (item.split("=", 1) for item in m["rest"].split())
            if k != "cpu_s" and v.replace(".", "", 1).isdigit()
        )
        sigma = 0 if m["sigma"] is None else round(float(m["sigma"]) * 100)
        yield m["model"], m["variant"], sigma, int(m["split"]), metrics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "folder", help="results folder of the stored row, or a probe output file"
    )
    ap.add_argument("--against", required=True, help="stored row (model) to pair")
    ap.add_argument("--metric", default="nll")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("probe", nargs="*", help="probe output files (default: stdin)")
    args = ap.parse_intermixed_args()
    lines = []
    for path in args.probe or ["-"]:
        if path == "-":
            lines += sys.stdin.read().splitlines()
        else:
            with open(path) as f:
                lines += f.read().splitlines()
    ref = _reference(args.folder, args.against, args.metric)
    label = "probe" if os.path.isfile(args.folder) else "stored"
    groups = defaultdict(list)
    for model, variant, sigma, split, metrics in parse(lines):
        if args.metric in metrics and (sigma, split) in ref:
            groups[(model, variant, sigma)].append(
                (split, metrics[args.metric], ref[(sigma, split)])
            )
    sign = -1.0 if args.metric in HIGHER_IS_BETTER else 1.0
    s = args.scale
    for (model, variant, sigma), rows in groups.items():
        new = np.array([r[1] for r in rows]) * s
        old = np.array([r[2] for r in rows]) * s
        diff = new - old
        # the probe prints 4 decimals: closer than that is a tie, not a win
        wins = int(np.sum(sign * diff < -TIE * s))
        ties = int(np.sum(np.abs(diff) <= TIE * s))
        sd = f"{diff.std(ddof=1):.2f}" if len(diff) > 1 else "-"
        shift = f" sigma_pct={sigma}" if sigma else ""
        print(
            f"{model} [{variant}]{shift} vs {args.against}: splits "
            f"{sorted(r[0] for r in rows)} refit {new.mean():.2f} ± {new.std():.2f}"
            f" {label} {old.mean():.2f} ± {old.std():.2f} diff {diff.mean():+.2f} ± "
            f"{sd} refit better in {wins}/{len(rows)}"
            + (f" ({ties} equal to the printed digits)" if ties else "")
        )


def _reference(folder: str, row: str, metric: str) -> dict:
    """(sigma_pct, split) -> the reference row's metric, from a results folder
    or from the ``row`` lines of a probe output file (one variant)."""
    if os.path.isfile(folder):
        with open(folder) as f:
            found = [r for r in parse(f.read().splitlines()) if r[0] == row]
        if len({r[1] for r in found}) > 1:
            raise SystemExit(f"{folder} holds several variants of {row}.")
        return {(r[2], r[3]): r[4][metric] for r in found if metric in r[4]}
    stored = pd.read_csv(f"{folder}/results.csv")
    stored = stored[stored.model == row]
    if "sigma_pct" not in stored:  # Table 4's records have no shift
        stored = stored.assign(sigma_pct=0)
    return {
        (int(r.sigma_pct), int(r.seed)): float(getattr(r, metric))
        for r in stored.itertuples()
    }


if __name__ == "__main__":
    main()
