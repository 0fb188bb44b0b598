"""MTLCM on CUDA against the CPU: fit time, iterations and agreement, one run.

For each (T tasks, N samples per task, d latents) of the Table 1 process
(``make_linear_tasks``, random mixing, 4 causal latents per task, p = d; the
configurations of ``bench_scale.py``) the fit runs with ``device="cuda"`` and,
where ``--cpu-max-d`` allows, with ``device="cpu"`` on one thread in the same
process, on the same data and seed. Printed: wall seconds (CUDA work is
synchronised by the fit's own copies back to the host), iterations, the pooled MCC
against the true latents, the per-sample log-likelihood and the CPU/CUDA ratio of
the times. Same seed, same numbers on any backend: the two fits' log-likelihoods
and latents are compared (float64 on both).

Run on a machine with a GPU: ``python benchmarks/bench_cuda.py --json out.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch

import identrep as ir

CONFIGS = [(200, 100, 20), (200, 100, 100), (10000, 20, 20), (10000, 20, 100)]


#: torch's host threads at start: CUDA fits keep them, CPU fits use one
_THREADS = torch.get_num_threads()


def fit(data, device: str, **params) -> dict:
    torch.set_num_threads(1 if device == "cpu" else _THREADS)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = ir.MTLCM(device=device, random_state=0, **params).fit(
            data.X, data.y, task_ids=data.task_ids
        )
    wall = time.perf_counter() - t0
    Z = m.transform(data.X)
    return dict(
        wall_s=wall,
        n_iter=int(m.n_iter_),
        loglik=float(m.log_likelihood_),
        mcc=float(ir.metrics.mcc(data.Z, Z)),
        Z=Z,
    )


def profile(data, iters: int) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    fit(data, "cuda", max_iter=1)  # warm-up: kernels loaded, workspaces allocated
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with torch_profile(activities=acts) as prof:
        out = fit(data, "cuda", max_iter=iters)
    print(f"# {iters} iterations, {out['wall_s']:.2f} s under the profiler")
    table = prof.key_averages()
    for key in ("self_cuda_time_total", "self_cpu_time_total"):
        print(table.table(sort_by=key, row_limit=12, max_name_column_width=40))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config",
        type=int,
        nargs=3,
        action="append",
        metavar=("T", "N", "d"),
        help="default: " + str(CONFIGS),
    )
    ap.add_argument(
        "--cpu-max-work",
        type=float,
        default=3e6,
        help="also fit on the CPU when T * d^3 is at most this",
    )
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument(
        "--profile",
        type=int,
        metavar="ITERS",
        help="instead: profile a CUDA fit of ITERS iterations per configuration "
        "(torch.profiler, the top operations by CUDA and by CPU time)",
    )
    args = ap.parse_args()  # fmt: skip
    if not torch.cuda.is_available():
        raise SystemExit("bench_cuda: CUDA is not available on this machine.")
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    torch.zeros(1, device="cuda")  # context start-up outside the timings
    rows = []
    for T, N, d in args.config or CONFIGS:
        data = ir.datasets.make_linear_tasks(
            n_tasks=T, n_samples=N, n_latents=d, n_causal=min(4, d),
            mixing="random", random_state=0,
        )  # fmt: skip
        row = dict(T=T, N=N, d=d)
        if args.profile:
            profile(data, args.profile)
            continue
        gpu = fit(data, "cuda")
        row.update({f"cuda_{k}": v for k, v in gpu.items() if k != "Z"})
        if T * d**3 <= args.cpu_max_work:
            cpu = fit(data, "cpu")
            row.update({f"cpu_{k}": v for k, v in cpu.items() if k != "Z"})
            row["cpu_over_cuda"] = cpu["wall_s"] / gpu["wall_s"]
            row["loglik_diff"] = abs(cpu["loglik"] - gpu["loglik"])
            row["latents_max_diff"] = float(np.abs(cpu["Z"] - gpu["Z"]).max())
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
