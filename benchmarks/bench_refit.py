"""Exact head refit of MTRN on wide data: per-observation sums vs the masked form.

After every epoch MTRN replaces its joint heads by their exact ridge solution given
the current features. On wide data (rows observed in many tasks, e.g. the
superconductivity table: 21,263 materials x 80 tasks) the per-observation form
(:func:`~identrep.models.multitask.heads.fit_ridge_heads`, the baseline) gathers
every row's features once per task it is observed in; the masked form
(:func:`~identrep.models.multitask.heads.fit_ridge_heads_wide`) forms the per-task
sums as matrix products with the (rows x tasks) mask, each row once. Both give the same
heads (checked here, and in tests/unit/models/multitask/test_heads.py); the ratio
is against the
baseline measured in the same run, one thread.

Usage::

    python benchmarks/bench_refit.py                 # 21,263 x 80, d in 5 10 20 40 80
    python benchmarks/bench_refit.py --rows 5000 --dims 10
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from pathlib import Path

import torch

from identrep.models.multitask.heads import fit_ridge_heads, fit_ridge_heads_wide


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=21263)
    ap.add_argument("--tasks", type=int, default=80)
    ap.add_argument("--dims", type=int, nargs="+", default=[5, 10, 20, 40, 80])
    ap.add_argument("--observed", type=float, default=0.9, help="fraction observed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/refit.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    results = []
    print(
        f"{args.rows} rows x {args.tasks} tasks, {args.observed:.0%} observed, 1 thread"
    )
    head = ("d", "per-observation s", "masked s", "speed-up", "max |dW|")
    print(f"{head[0]:>4} {head[1]:>18} {head[2]:>9} {head[3]:>9} {head[4]:>9}")
    for d in args.dims:
        F = torch.randn(args.rows, d, generator=g, dtype=torch.float64)
        Y = torch.randn(args.rows, args.tasks, generator=g, dtype=torch.float64)
        mask = torch.rand(args.rows, args.tasks, generator=g) < args.observed
        rows, tasks = torch.nonzero(mask, as_tuple=True)

        long = functools.partial(
            fit_ridge_heads, F[rows], Y[rows, tasks], tasks, args.tasks, 1e-3
        )
        wide = functools.partial(fit_ridge_heads_wide, F, Y, mask, 1e-3)

        diff = float((long()[0] - wide()[0]).abs().max())
        t_long, t_wide = best_of(long, args.repeat), best_of(wide, args.repeat)
        results.append(
            dict(
                d=d,
                per_observation_s=t_long,
                masked_s=t_wide,
                speedup=t_long / t_wide,
                max_abs_weight_diff=diff,
            )
        )
        ratio = t_long / t_wide
        print(f"{d:>4} {t_long:>18.3f} {t_wide:>9.3f} {ratio:>8.1f}x {diff:>9.1e}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "args": vars(args),
                "machine": platform.platform(),
                "torch": torch.__version__,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
