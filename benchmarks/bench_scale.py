"""MTLCM fit time and peak memory against tasks T, latents d and samples per task N.

Each fit runs in a fresh process on the Table 1 process (``make_linear_tasks``,
random mixing, 4 causal latents per task, p = d) with one thread. Beside each time
the *physical floor* is printed, measured in the same run: the floating-point
operations of one likelihood-and-gradient evaluation in the form the objective
uses, dense

    T (2 p^2 d + 4 p d^2 + 16 d^3 / 3)

(the three products of ``_mtlcm_objective`` and one Newton step of the indicator
solve: Cholesky, inverse, K P, K P K and the Newton system), or, when every task's
N_t has rank r < d (the factor form N_t = U_t U_t^T, "r" column),

    T (4 p d r + 6 d^2 r + 4 d^3 / 3)

(C = A^+ U, C C^T, U (K C)^T; Cholesky, inverse, K C, (K C)(K C)^T and the Newton
system), divided by the batched Cholesky throughput measured on (T, d, d) matrices
(CPU time), times the number of evaluations the fit made. Times are CPU seconds of
the fit's process (wall seconds beside them: on a shared machine they include
waiting). "floor x" is fit time / that floor (the overhead above the arithmetic of
one Newton step per evaluation at Cholesky speed); "of floor" its inverse, the
achieved fraction of the floor. Below 1x where small batched factorisations are
dominated by per-matrix overhead (d = 10: the measured Cholesky throughput is low).
Peak memory is the peak resident set of the fit's process above its resident set
just before the fit (the input arrays already loaded). "loglik" is the fit's
``log_likelihood_`` (per sample).

Run: ``python benchmarks/bench_scale.py [--quick] [--out docs/results]``
(writes ``scale.csv`` and ``plots/scale.png`` there).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, os, resource, sys, time, warnings
import numpy as np, torch
torch.set_num_threads(1)
import identrep as ir
try:
    from identrep.models.multitask import _mtlcm_objective as obj
except ImportError:  # an older source tree (--src): evaluations not counted
    obj = None

T, N, d, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
z = np.load(path)
X, y, t, Z = z["X"], z["y"], z["t"], z["Z"]
# batched-Cholesky throughput on (T, d, d) SPD matrices, measured here
M = torch.randn(min(T, 2000), d, d, dtype=torch.float64)
S = M @ M.transpose(1, 2) + d * torch.eye(d, dtype=torch.float64)
torch.linalg.cholesky(S)
reps, t0 = 0, time.process_time()  # CPU time: the machine may be shared
while time.process_time() - t0 < 0.5:
    torch.linalg.cholesky(S); reps += 1
chol_flops = reps * S.shape[0] * d**3 / 3 / (time.process_time() - t0)
calls, rank = [0], [None]
if obj is not None:
    orig = obj.ProfiledObjective.__call__
    def counted(self, A, *, grad=True):
        calls[0] += 1
        rank[0] = None if getattr(self, "U", None) is None else int(self.r)
        return orig(self, A, grad=grad)
    obj.ProfiledObjective.__call__ = counted
rss0 = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
c0, w0 = time.process_time(), time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    m = ir.MTLCM(random_state=0).fit(X, y, task_ids=t)
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
p = X.shape[1]
calls[0] = calls[0] or m.n_iter_  # uncounted: at least one per iteration
r = rank[0]
if r is None:  # the dense form
    flops_eval = T * (2 * p * p * d + 4 * p * d * d + 16 * d**3 / 3)
else:  # the factor form N_t = U_t U_t^T, rank r < d
    flops_eval = T * (4 * p * d * r + 6 * d * d * r + 4 * d**3 / 3)
print(json.dumps(dict(
    T=T, N=N, d=d, cpu_s=cpu, wall_s=wall, n_iter=m.n_iter_, n_eval=calls[0],
    rank=r or 0, loglik=m.log_likelihood_,
    flops_eval=flops_eval, chol_gflops=chol_flops / 1e9,
    floor_s=calls[0] * flops_eval / chol_flops,
    peak_mib=max(peak - rss0, 0) / 2**20,
    mcc=ir.metrics.mcc(Z, m.transform(X)),
)))
"""

FULL = {
    "T": [(T, 20, 10) for T in (100, 1000, 10000)],
    "d": [(200, 100, d) for d in (10, 20, 50, 100)],
    "N": [(200, N, 10) for N in (20, 100, 500, 2000)],
}
QUICK = {
    "T": [(T, 20, 10) for T in (100, 1000)],
    "d": [(200, 100, d) for d in (10, 20)],
    "N": [(200, N, 10) for N in (20, 200)],
}


def run_one(T: int, N: int, d: int, tmp: Path, src: Path) -> dict:
    import numpy as np

    import identrep as ir

    data = ir.datasets.make_linear_tasks(
        n_tasks=T, n_samples=N, n_latents=d, n_causal=min(4, d), mixing="random",
        random_state=0,
    )  # fmt: skip
    path = tmp / f"data_{T}_{N}_{d}.npz"
    np.savez(path, X=data.X, y=data.y, t=data.task_ids, Z=data.Z)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(T), str(N), str(d), str(path)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    path.unlink()
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (axis, label) in zip(
        axes, (("T", "tasks T (N=20, d=10)"), ("d", "latents d (T=200, N=100)"),
               ("N", "samples per task N (T=200, d=10)")), strict=True,
    ):  # fmt: skip
        sel = [r for r in rows if r["sweep"] == axis]
        x = [r[axis] for r in sel]
        ax.loglog(x, [r["cpu_s"] for r in sel], "o-", label="fit (CPU s)")
        ax.loglog(x, [r["floor_s"] for r in sel], "s--", label="floor (s)")
        ax.set_xlabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds, one thread")
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--only", choices=["T", "d", "N"], nargs="*")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--config", type=int, nargs=3, metavar=("T", "N", "d"),
                    help="one fit of this size instead of the sweeps")  # fmt: skip
    ap.add_argument("--src", help="identrep source tree to time (default: this one)")
    args = ap.parse_args()
    grid = QUICK if args.quick else FULL
    if args.config:
        grid = {"config": [tuple(args.config)]}
    src = Path(args.src or Path(__file__).resolve().parents[1] / "src")
    rows = []
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    hdr = "sweep      T     N    d   r  iters evals  CPU s  wall s  floor s  floor x"
    print(hdr + "  of floor  peak MiB  chol GF/s  MCC     loglik")
    with tempfile.TemporaryDirectory() as tmp:
        for axis, cfgs in grid.items():
            if args.only and axis not in args.only:
                continue
            for T, N, d in cfgs:
                r = run_one(T, N, d, Path(tmp), src)
                r["sweep"] = axis
                rows.append(r)
                print(
                    f"{axis:>5} {T:>6} {N:>5} {d:>4} {r.get('rank', 0):>3}"
                    f" {r['n_iter']:>6} {r['n_eval']:>5}"
                    f" {r['cpu_s']:>6.1f} {r['wall_s']:>7.1f} {r['floor_s']:>8.2f}"
                    f" {r['cpu_s'] / r['floor_s']:>8.1f}"
                    f" {r['floor_s'] / r['cpu_s']:>9.0%} {r['peak_mib']:>9.1f}"
                    f" {r['chol_gflops']:>10.2f} {r['mcc']:.4f}"
                    f" {r.get('loglik', float('nan')):.11f}",
                    flush=True,
                )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    if args.config:
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "scale.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, out / "plots" / "scale.png")
    print(f"wrote {out / 'scale.csv'}, {out / 'plots' / 'scale.png'}; {time.ctime()}")


if __name__ == "__main__":
    main()
