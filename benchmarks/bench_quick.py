"""Wall time of ``identrep reproduce <study> --quick`` for the Chen et al. studies,
each against a fixed reference workload timed in the same run.

Every quick run is a fresh process into a fresh output folder, timed from start to
exit (imports and data loading included), as a user would see it. The reference
workload (the demo's MTLCM fit, ``make_linear_tasks(200 x 100, d=10)``, one
thread) is timed before each quick run; the printed ratio quick / reference lets a
loaded machine's numbers be compared with a quiet one's. The target is under
3 minutes on 2 cores for each study.

Run: ``python benchmarks/bench_quick.py [--studies table1 table2 table3 qm9]
[--jobs 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCE = """
import json, time, torch
torch.set_num_threads(1)
import identrep as ir
d = ir.datasets.make_linear_tasks(n_tasks=200, n_samples=100, n_latents=10,
                                  n_causal=2, mixing="random", random_state=0)
t0 = time.perf_counter()
ir.MTLCM(random_state=0).fit(d.X, d.y, task_ids=d.task_ids)
print(json.dumps({"fit_s": time.perf_counter() - t0}))
"""
STUDIES = ("table1", "table2", "table3", "qm9")


def _env() -> dict:
    env = dict(os.environ)
    src = Path(__file__).resolve().parents[1] / "src"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(src), env.get("PYTHONPATH", "")) if p
    )
    return env


def reference_seconds() -> float:
    out = subprocess.run(
        [sys.executable, "-c", REFERENCE],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["fit_s"]


def quick_seconds(study: str, jobs: int) -> tuple[float, int]:
    """(wall seconds, exit status) of one ``identrep reproduce STUDY --quick``."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "identrep.cli", "reproduce", study, "--quick",
            "--jobs", str(jobs), "--out", str(Path(tmp) / study), "--no-progress",
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
        return wall, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", nargs="+", default=list(STUDIES))
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    print(f"cpus: {os.cpu_count()}, jobs: {args.jobs}")
    for study in args.studies:
        ref = reference_seconds()
        wall, rc = quick_seconds(study, args.jobs)
        print(
            f"{study:7s} --quick: {wall:6.1f} s (exit {rc}); reference fit "
            f"{ref:.2f} s; ratio {wall / ref:.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
