"""Does Table 1a's gap between the networks and NMF shrink with more training users?

The paper's Table 1a trains on 80,000 MovieLens-25M users; ours on the 562
training users of a MovieLens-100K split, and every network row sits 21-38 nats
further from its published NLL than NMF does ([ML] in
docs/results/moran2022_vs_paper.md; not measurable on a larger MovieLens here).
This probe measures the trend inside 100K instead. Per split, the study's test
users stay fixed and the models are fit on nested random subsets of its training
users (``--fractions``; one seeded permutation per split, so each subset contains
the smaller ones), with the study's settings, data and model seeds: the same
epochs, so a smaller subset takes fewer steps, as the paper's budget is in
epochs; ``--same-steps`` raises the epochs of a subset so that it takes the full
set's optimiser steps, which separates the users from the steps. At fraction 1
each row reproduces its stored record.

Prints one line per split, fraction and model: the training users, the held-out
NLL on the fixed test users, the NLL of the popularity baseline (the subset's
item frequencies, the authors' +1e-6) and the CPU seconds; ``--ranking`` adds
the study's Recall@5 and NDCG@10 (same rows and fold-in).

``--summary`` reads such output back (and, with ``--stored``, the study's
results.csv for the fraction-1 rows not refitted) and prints, per model and
training-set size, the mean ± std over splits of the NLL (or of ``--metric``,
x100) and of its paired difference to NMF on the same split and subset; then,
per model, the change of the row and of that difference per doubling of the
training users (least squares on log2 of the users, per split, then mean ±
std). ``--plot`` draws the difference.

Usage (MovieLens 100K from ``pip install --no-deps recbole``)::

    OMP_NUM_THREADS=1 PYTHONPATH=src:benchmarks \\
        python benchmarks/moran2022_table1a_users_probe.py \\
        --splits 0 1 --models NMF VAE --fractions 0.125 0.25 0.5 1 > out.txt
    PYTHONPATH=src:benchmarks python benchmarks/moran2022_table1a_users_probe.py \\
        --summary out.txt --stored docs/results/moran2022_table1a/results.csv
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import math
import re
import time

import numpy as np

from _moran2022_probes import popularity_nll
from identrep.experiments import get_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.experiments.studies import moran2022_table1a as t1a
from identrep.utils.seeding import derive_seed

#: One colour per row in every plot of this probe.
COLOURS = ("VAE", "SparseVAE", "BetaVAE", "VSC", "VAE_KL1overK", "SVAE_KL1overK")


#: Columns ``--summary`` can read (the ranking ones need ``--ranking`` runs),
#: with the factor they are printed at.
METRICS = {
    "nll": 1.0,
    "recall_at_5_same_rows": 100.0,
    "ndcg_at_10_same_rows": 100.0,
    "recall_at_5": 100.0,
    "ndcg_at_10": 100.0,
}


def read_lines(paths, stored=None, metric="nll") -> dict:
    """{(model, split, n_train): value of ``metric``} from the probe's output
    files and, for models and splits without a refitted full-size row, the stored
    records."""
    out = {}
    for path in paths:
        with open(path) as fh:
            for line in fh:
                f = dict(re.findall(r"(\w+)=(\S+)", line))
                if metric in f:
                    out[f["model"], int(f["split"]), int(f["n_train"])] = float(
                        f[metric]
                    )
    if stored:
        with open(stored) as fh:
            for row in csv.DictReader(fh):
                key = (row["model"], int(row["seed"]), int(row["n_train"]))
                if any(k[:2] == key[:2] for k in out):
                    out.setdefault(key, float(row[metric]))
    return out


def _mean_std(values) -> str:
    v = np.asarray(values, float)
    return f"{v.mean():+.2f} ± {v.std(ddof=1):.2f}" if v.size > 1 else "-"


def summarise(values: dict, plot=None, title="", metric="nll") -> None:
    """Per model and size: ``metric`` and its paired difference to NMF; per
    model, the slopes of both per doubling of the users. ``plot``: a PNG of the
    paired difference against the users (mean ± std over splits)."""
    table = collections.defaultdict(dict)  # (model, users) -> {split: value}
    for (model, split, n), v in values.items():
        table[model, n][split] = v * METRICS[metric]
    if not any(model == "NMF" for model, _ in table):
        raise SystemExit("--summary needs the NMF rows (the paired baseline).")
    label = "NLL" if metric == "nll" else f"{metric} x100"
    print(f"| model | users | splits | {label} | minus NMF (paired) |")
    print("|---|---|---|---|---|")
    points = collections.defaultdict(list)  # (model, split) -> [(log2 n, diff)]
    levels = collections.defaultdict(list)  # (model, split) -> [(log2 n, value)]
    curves = collections.defaultdict(list)  # model -> [(n, mean, std)]
    for model, n in sorted(table):
        cells, nmf = table[model, n], table.get(("NMF", n), {})
        diffs = {s: v - nmf[s] for s, v in cells.items() if s in nmf}
        for s, d in diffs.items():
            points[model, s].append((math.log2(n), d))
        for s, v in cells.items():
            levels[model, s].append((math.log2(n), v))
        if model != "NMF" and len(diffs) > 1:
            d = np.array(list(diffs.values()))
            curves[model].append((n, d.mean(), d.std(ddof=1)))
        print(
            f"| {model} | {n} | {len(cells)} | "
            f"{_mean_std(list(cells.values())).lstrip('+')} | "
            f"{_mean_std(list(diffs.values()))} |"
        )
    print(
        "\n| model | change per doubling of the users | minus NMF, change per "
        "doubling | splits |"
    )
    print("|---|---|---|---|")
    for model in sorted({m for m, _ in levels}):
        own, paired = (
            [
                np.polyfit(*np.array(pts).T, 1)[0]
                for (m, _), pts in series.items()
                if m == model and len(pts) > 2
            ]
            for series in (levels, points)
        )
        paired_text = "-" if model == "NMF" else _mean_std(paired)
        print(f"| {model} | {_mean_std(own)} | {paired_text} | {len(own)} |")
    if plot:
        draw(curves, plot, title, metric)


def draw(curves: dict, path: str, title: str, metric: str = "nll") -> None:
    """The paired difference to NMF against the training users, one line a model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for model, pts in sorted(curves.items()):
        n, mean, std = np.array(pts).T
        color = f"C{COLOURS.index(model)}" if model in COLOURS else None
        ax.errorbar(n, mean, yerr=std, marker="o", capsize=3, label=model, color=color)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("training users (MovieLens 100K, fixed 141 test users)")
    ax.set_ylabel(
        "held-out NLL minus NMF's (nats, paired)"
        if metric == "nll"
        else f"{metric} x100 minus NMF's (paired)"
    )
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", nargs="+", type=int, default=[0])
    ap.add_argument("--models", nargs="+", default=["NMF", "VAE"])
    ap.add_argument(
        "--fractions", nargs="+", type=float, default=[0.125, 0.25, 0.5, 1.0]
    )
    ap.add_argument(
        "--same-steps",
        action="store_true",
        help="every subset takes the full training set's optimiser steps",
    )
    ap.add_argument("--summary", nargs="+", help="summarise these output files")
    ap.add_argument("--stored", help="the study's results.csv (fraction-1 rows)")
    ap.add_argument("--plot", help="with --summary: write this PNG")
    ap.add_argument("--title", default="", help="the plot's title")
    ap.add_argument(
        "--metric", default="nll", choices=sorted(METRICS), help="with --summary"
    )
    ap.add_argument(
        "--ranking",
        action="store_true",
        help="also print Recall@5 / NDCG@10, same rows and fold-in (the study's)",
    )
    args = ap.parse_args()
    if args.summary:
        summarise(
            read_lines(args.summary, args.stored, args.metric),
            args.plot,
            args.title,
            args.metric,
        )
        return
    if any(not 0 < f <= 1 for f in args.fractions):
        raise SystemExit(f"--fractions must lie in (0, 1]; got {args.fractions}.")
    grid = get_study(t1a.NAME).grid(
        seeds=max(args.splits) + 1, models=list(args.models)
    )
    for cfg in (c for c in grid if c.seed in args.splits):
        split, _ = t1a.make_data(cfg)
        n = split.X_train.shape[0]
        order = np.random.default_rng(derive_seed("users", cfg.seed)).permutation(n)
        for frac in sorted(args.fractions):
            m = max(1, int(round(frac * n)))
            rows = np.sort(order[:m])
            sub = dataclasses.replace(split, X_train=split.X_train[rows])
            run = cfg
            if args.same_steps:
                steps = cfg.max_epochs * math.ceil(n / cfg.batch_size)
                epochs = math.ceil(steps / math.ceil(m / cfg.batch_size))
                run = dataclasses.replace(cfg, max_epochs=epochs)
            t0 = time.process_time()
            est, _ = mo.fit_estimator(
                run, sub, cfg.model_seed(), "categorical", needs=("heldout_nll",)
            )
            cpu = time.process_time() - t0
            ranks = ""
            if args.ranking:
                scores = mo.ranking_scores(
                    est, split.X_test, seed=derive_seed("fold-in", *cfg.data_key())
                )
                ranks = "".join(f"{k}={scores[k]:.4f} " for k in METRICS if k in scores)
            print(
                f"split={cfg.seed} model={cfg.model} fraction={frac:g} n_train={m} "
                f"epochs={run.max_epochs} "
                f"nll={mo.heldout_nll(est, split.X_test):.3f} "
                f"popularity_nll={popularity_nll(sub.X_train, split.X_test):.3f} "
                f"{ranks}cpu={cpu:.1f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
