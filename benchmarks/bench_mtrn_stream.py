"""MTRN on memory-mapped inputs: epoch time and peak memory against the number of rows.

Writes a float64 ``np.memmap`` of N rows x 100 features (long layout, 100 tasks,
linear targets plus noise) in a temporary directory, in chunks, and fits
``identrep.MTRN`` (default MLP, d = 10, one epoch of training plus the head refit
and the final heads) on it, each N in a fresh process so the peak memory is that
fit's. The baseline, measured in the same run, is the same fit on an in-memory
100,000-row array; ratios are per row against it.

Memory is reported three ways, all in MiB: ``rss_peak`` (``ru_maxrss``, which
counts the memmap's file pages once touched, so it grows with N by the file size
even when nothing is copied), ``anon_peak`` (the largest anonymous resident memory,
``RssAnon`` of ``/proc/self/status`` polled every 10 ms: what the process itself
allocated) and ``anon_fit`` (``anon_peak`` minus ``RssAnon`` just before ``fit``,
with the inputs already open: the fit's own memory beyond its inputs). Linux only.

Usage::

    python benchmarks/bench_mtrn_stream.py                    # N = 100k, 300k, 1M
    python benchmarks/bench_mtrn_stream.py --rows 100000 300000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

P, N_TASKS, N_LATENTS = 100, 100, 10
CHUNK = 50_000


def write_data(folder: Path, n: int, seed: int = 0) -> None:
    """X (memmap, float64), y and task ids of n rows, written chunk by chunk."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(N_TASKS, P)) / np.sqrt(P)
    X = np.lib.format.open_memmap(folder / "X.npy", "w+", np.float64, (n, P))
    y = np.empty(n)
    tasks = rng.integers(0, N_TASKS, size=n).astype(np.int32)
    for s in range(0, n, CHUNK):
        x = rng.normal(size=(min(CHUNK, n - s), P))
        X[s : s + CHUNK] = x
        t = tasks[s : s + CHUNK]
        y[s : s + CHUNK] = np.einsum("ij,ij->i", np.tanh(x), W[t])
    y += 0.1 * rng.normal(size=n)
    X.flush()
    del X
    np.save(folder / "y.npy", y)
    np.save(folder / "tasks.npy", tasks)


def _rss_anon_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(folder: str, in_memory: bool, epochs: int) -> None:
    """One fit, in this (fresh) process; prints a JSON line."""
    import torch

    import identrep as ir

    torch.set_num_threads(1)
    X = np.load(Path(folder) / "X.npy", mmap_mode="r")
    if in_memory:
        X = np.array(X)
    y = np.load(Path(folder) / "y.npy")
    tasks = np.load(Path(folder) / "tasks.npy")
    before = _rss_anon_mib()
    peak = [before]
    done = threading.Event()

    def poll():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_anon_mib())
            time.sleep(0.01)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    model = ir.MTRN(
        n_latents=N_LATENTS, max_epochs=epochs, patience=None, random_state=0
    )
    t0 = time.perf_counter()
    model.fit(X, y, task_ids=tasks)
    total = time.perf_counter() - t0
    done.set()
    th.join()
    peak[0] = max(peak[0], _rss_anon_mib())
    h = model.history_
    print(
        json.dumps(
            {
                "n": int(X.shape[0]),
                "input": "in-memory" if in_memory else "memmap",
                "epoch_s": h["seconds"] / h["n_epochs"],
                "fit_s": total,
                "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "anon_peak": peak[0],
                "anon_fit": peak[0] - before,
                "x_mib": X.nbytes / 2**20,
            }
        )
    )


def run_one(folder: Path, in_memory: bool, epochs: int) -> dict:
    cmd = [sys.executable, __file__, "--child", str(folder), "--epochs", str(epochs)]
    if in_memory:
        cmd.append("--in-memory")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000]
    )
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--baseline-rows", type=int, default=100_000)
    ap.add_argument("--child")
    ap.add_argument("--in-memory", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.in_memory, args.epochs)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, in_memory in [(args.baseline_rows, True)] + [
            (n, False) for n in args.rows
        ]:
            folder = Path(tmp) / str(n)
            if not folder.exists():
                folder.mkdir()
                write_data(folder, n)
            results.append(run_one(folder, in_memory, args.epochs))
            r = results[-1]
            base = results[0]
            r["epoch_ratio_per_row"] = (r["epoch_s"] / r["n"]) / (
                base["epoch_s"] / base["n"]
            )
            print(
                f"{r['input']:>9} N={r['n']:>9,}  epoch {r['epoch_s']:7.2f} s "
                f"(per row x{r['epoch_ratio_per_row']:.2f} of baseline)  fit "
                f"{r['fit_s']:7.2f} s  X {r['x_mib']:6.0f} MiB  rss_peak "
                f"{r['rss_peak']:6.0f}  anon_peak {r['anon_peak']:6.0f}  anon_fit "
                f"{r['anon_fit']:6.0f} MiB",
                flush=True,
            )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
