"""MTRN head solvers: epoch throughput and time to the final weak MCC (CPU).

Fits ``identrep.MTRN`` with ``heads="joint"`` (the baseline, the paper's heads) and
``heads="ridge"`` (closed-form per-task ridge on every minibatch, differentiated
through) on the same Table 2 data in the same run, with the library defaults (early
stopping), and reports for each: seconds per epoch, training samples per second,
epochs run, total time, and the MTRN weak MCC of the paper's protocol (CCA +
Spearman MCC, in-sample, pooled random subsample of 10,000 points) plus a held-out
CCA variant. Ratios are against the joint heads measured in the same run.

Usage::

    python benchmarks/bench_mtrn.py                 # Table 2 config, k=4, p=100
    python benchmarks/bench_mtrn.py --n-tasks 100   # a quicker look
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import identrep as ir
from identrep.metrics import weak_mcc


def measure(data, heads: str, seed: int) -> dict:
    model = ir.MTRN(n_latents=data.n_latents, heads=heads, random_state=seed)
    t0 = time.perf_counter()
    model.fit(data.X, data.y, task_ids=data.task_ids)
    seconds = time.perf_counter() - t0
    h = model.history_
    rng = np.random.default_rng(0)
    sub = rng.choice(len(data.X), size=min(10_000, len(data.X)), replace=False)
    F = model.transform(data.X[sub])
    n_train = len(data.X) * (1 - model.val_fraction)
    return {
        "heads": heads,
        "fit_seconds": seconds,
        "epochs": h["n_epochs"],
        "best_epoch": h["best_epoch"] + 1,
        "seconds_per_epoch": h["seconds"] / h["n_epochs"],
        "samples_per_second": n_train * h["n_epochs"] / h["seconds"],
        "weak_mcc": weak_mcc(data.Z[sub], F, method="spearman"),
        "weak_mcc_heldout": weak_mcc(
            data.Z[sub], F, method="spearman", split=0.5, random_state=0
        ),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-tasks", type=int, default=500)
    p.add_argument("--n-samples", type=int, default=200)
    p.add_argument("--n-causal", type=int, default=4)
    p.add_argument("--n-observed", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    data = ir.datasets.make_nonlinear_tasks(
        n_tasks=args.n_tasks,
        n_samples=args.n_samples,
        n_latents=20,
        n_causal=args.n_causal,
        n_observed=args.n_observed,
        random_state=args.seed,
    )
    with threadpool_limits(limits=args.threads):
        rows = [measure(data, heads, args.seed) for heads in ("joint", "ridge")]
    base = rows[0]
    lines = [
        f"# MTRN heads benchmark ({args.n_tasks} tasks x {args.n_samples} samples, "
        f"d=20, k={args.n_causal}, p={args.n_observed}, seed {args.seed}, "
        f"{args.threads} thread(s); torch {torch.__version__}, "
        f"{platform.machine()}, {time.strftime('%Y-%m-%d')})",
        "",
        "| heads | s/epoch | samples/s | throughput vs joint | epochs (best) | "
        "fit s | time vs joint | weak MCC | weak MCC held-out |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['heads']} | {r['seconds_per_epoch']:.3f} | "
            f"{r['samples_per_second']:,.0f} | "
            f"{r['samples_per_second'] / base['samples_per_second']:.2f}x | "
            f"{r['epochs']} ({r['best_epoch']}) | {r['fit_seconds']:.1f} | "
            f"{r['fit_seconds'] / base['fit_seconds']:.2f}x | {r['weak_mcc']:.4f} | "
            f"{r['weak_mcc_heldout']:.4f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"mtrn_heads_T{args.n_tasks}_k{args.n_causal}_p{args.n_observed}"
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
