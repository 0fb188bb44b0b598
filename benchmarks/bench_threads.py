"""Thread policy of the fits: the demo's MTLCM fit with the environment's default
thread pools against the same fit with one thread forced from outside, in one run.

Each measurement is a fresh process (thread pools are set up at import), timed from
the fit's start to its end by the process itself; the two settings alternate, and
the medians and their ratio are printed. identrep's fits pick one thread for small
batched linear algebra on their own (``identrep/utils/threads.py``), so the ratio
should be near 1; before that policy it was 4.5 on a 2-core machine.

Run: ``python benchmarks/bench_threads.py [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

FIT = """
import json, time
import identrep as ir
d = ir.datasets.make_linear_tasks(n_tasks=200, n_samples=100, n_latents=10,
                                  n_causal=2, mixing="random", random_state=0)
t0 = time.perf_counter()
ir.MTLCM(random_state=0).fit(d.X, d.y, task_ids=d.task_ids)
print(json.dumps({"fit_s": time.perf_counter() - t0}))
"""
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _fit_seconds(one_thread: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    env.pop("IDENTREP_NUM_THREADS", None)
    if one_thread:
        env.update(dict.fromkeys(_THREAD_VARS, "1"))
    out = subprocess.run(
        [sys.executable, "-c", FIT], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["fit_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    default, single = [], []
    for _ in range(args.repeats):
        default.append(_fit_seconds(False))
        single.append(_fit_seconds(True))
    ratios = [a / b for a, b in zip(default, single, strict=True)]
    print(f"cpus: {os.cpu_count()}, repeats: {args.repeats}")
    print(f"default environment: median fit {statistics.median(default):.3f} s")
    print(f"OMP/MKL/OPENBLAS=1:  median fit {statistics.median(single):.3f} s")
    print(
        f"ratio default / one thread: median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
