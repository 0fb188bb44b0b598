"""MTLCM fit memory beyond the input against the number of samples per task.

numpy's traced peak (``tracemalloc``) during ``MTLCM.fit`` on T tasks x N rows x p
features (long layout, rows shuffled across tasks), one fit per N in this process
after a small warm-up fit. ``--wide``: the wide layout instead, X of N rows and a
target matrix Y (N, T) with 30 % of its entries unobserved (NaN). Run with
``PYTHONPATH=`` another tree's ``src`` for a before/after pair:

    PYTHONPATH=src python benchmarks/bench_mtlcm_memory.py --tasks 200 --features 10 \
        --rows 100 1000 10000
    PYTHONPATH=src python benchmarks/bench_mtlcm_memory.py --wide --tasks 12 \
        --features 8 --rows 10000 100000 1000000
"""

from __future__ import annotations

import argparse
import tracemalloc
import warnings

import numpy as np

import identrep as ir


def data(T: int, n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = np.repeat(np.arange(T), n)
    X = rng.normal(size=(T * n, p))
    y = X[:, 0] * rng.normal(size=T)[t] + rng.normal(size=T * n)
    perm = rng.permutation(T * n)
    return X[perm], y[perm], t[perm]


def wide_data(T: int, n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = X[:, :1] * rng.normal(size=T) + rng.normal(size=(n, T))
    Y[rng.random((n, T)) < 0.3] = np.nan
    return X, Y


def traced_peak(T: int, n: int, p: int, wide: bool = False) -> tuple[int, int]:
    X, y, t = (*wide_data(T, n, p), None) if wide else data(T, n, p)
    model = ir.MTLCM(random_state=0)
    tracemalloc.start()
    tracemalloc.reset_peak()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y, task_ids=t)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, X.nbytes + y.nbytes + (0 if t is None else t.nbytes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--rows", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--wide", action="store_true", help="wide layout, N rows in all")
    args = ap.parse_args()
    traced_peak(args.tasks, 20, args.features, args.wide)  # one-time allocations
    for n in args.rows:
        peak, size = traced_peak(args.tasks, n, args.features, args.wide)
        unit = "rows" if args.wide else "rows/task"
        print(
            f"T={args.tasks} p={args.features} {unit}={n}: input "
            f"{size / 2**20:.1f} MiB, traced peak during fit {peak / 2**20:.2f} MiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
