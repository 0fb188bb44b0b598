"""The Table 2 baseline table of ``docs/results/table2_baselines_partial/README.md``.

Reads the records of a ``reproduce table2`` folder (the four baselines at the
paper's size), and prints, per (k, p) and model, the per-task Spearman MCC x100 as
mean ± std (ddof 0) over the seeds found / the paper's mean ± std, in bold where
ours is below the paper's mean by more than its std; then the cells below and above
the paper by more than its std. Only seeds complete for every cell are used, so a
seed still running does not tilt some cells.

Usage::

    PYTHONPATH=src python benchmarks/chen2024_table2_baselines_table.py \\
        docs/results/table2_baselines_partial
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from identrep.experiments import load_records
from identrep.experiments.registry import published_results

MODELS = ("iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="a reproduce table2 --out folder")
    args = ap.parse_args()
    cells = defaultdict(dict)  # (model, k, p) -> {seed: mcc}
    for rec in load_records(args.folder):
        c = rec["config"]
        if c["table"] == "table2" and c["model"] in MODELS and "metrics" in rec:
            key = (c["model"], c["n_causal"], c["n_observed"])
            cells[key][c["seed"]] = 100 * rec["metrics"]["mcc_task_spearman"]
    if not cells:
        raise SystemExit(f"{args.folder}: no Table 2 baseline records")
    seeds = sorted(set.intersection(*(set(v) for v in cells.values())))
    pub = published_results("table2").set_index(["model", "n_causal", "n_observed"])
    below, above = [], []
    print(f"seeds {seeds}, {len(cells)} cells\n")
    print("| k | p | " + " | ".join(MODELS) + " |")
    print("|---|---|" + "---|" * len(MODELS))
    for k, p in sorted({(k, p) for _, k, p in cells}):
        row = []
        for m in MODELS:
            vals = np.array([cells[(m, k, p)][s] for s in seeds])
            mean, std = vals.mean(), vals.std()
            pm, ps = pub.loc[(m, k, p), ["mcc_mean", "mcc_std"]]
            text = f"{mean:.2f} ± {std:.2f}"
            if mean < pm - ps:
                text = f"**{text}**"
                below.append(f"{m} k = {k}, p = {p} ({mean - pm:+.2f})")
            elif mean > pm + ps:
                above.append(f"{m} k = {k}, p = {p} ({mean - pm:+.2f})")
            row.append(f"{text} / {pm:.2f} ± {ps:.2f}")
        print(f"| {k} | {p} | " + " | ".join(row) + " |")
    print(f"\nbelow the paper by more than its std ({len(below)}): " + "; ".join(below))
    print(f"above the paper by more than its std ({len(above)}): " + "; ".join(above))


if __name__ == "__main__":
    main()
