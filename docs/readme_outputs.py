"""Produce the printed outputs and timings in README.md from fresh runs.

Every block of README.md between ``<!-- output: NAME -->`` and ``<!-- /output -->``
is what the producer NAME below prints on this machine. ``python
docs/readme_outputs.py`` runs them all and rewrites the blocks in place;
``--check`` rewrites nothing and exits 1 when a block differs from a fresh run in
anything but its timings; ``--only NAME ...`` limits either to some blocks.

Producers:

* ``demo``: ``identrep demo``;
* ``fit``: ``identrep fit`` / ``transform`` on a long table made by
  ``make_nonlinear_tasks`` (written to a temporary folder);
* ``reproduce``: ``identrep reproduce table1 --quick --models MTLCM``;
* ``quick``: the wall time of ``identrep reproduce <study> --quick`` for every
  Chen et al. study (a few minutes each; ``benchmarks/bench_quick.py`` gives the
  same with a reference workload for loaded machines).

Run from the repository root with identrep importable (``PYTHONPATH=src``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
_BLOCK = re.compile(
    r"(<!-- output: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /output -->)", re.S
)
#: A timing: seconds, minutes, "~N s left", "N s elapsed" (masked by --check).
_TIMING = re.compile(r"~?\d+(\.\d+)? ?(s|min)\b")


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    env.setdefault("IDENTREP_PROGRESS_SECONDS", "3600")  # no periodic lines
    return env


def _identrep(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "identrep.cli", *args]
    return subprocess.run(
        cmd, env=_env(), cwd=cwd, capture_output=True, text=True, check=True
    )


def _fenced(text: str) -> str:
    return "```\n" + text.rstrip("\n") + "\n```\n"


def produce_demo() -> str:
    return _fenced(_identrep("demo").stdout)


def produce_fit() -> str:
    import pandas as pd

    sys.path.insert(0, str(ROOT / "src"))
    import identrep as ir

    d = ir.datasets.make_nonlinear_tasks(
        n_tasks=30, n_samples=100, n_latents=3, n_causal=1, n_observed=10,
        random_state=0,
    )  # fmt: skip
    frame = pd.DataFrame(d.X, columns=[f"x{j}" for j in range(d.X.shape[1])])
    frame.insert(0, "sample", [f"s{i}" for i in range(len(frame))])
    frame["task"] = [f"assay{t}" for t in d.task_ids]
    frame["value"] = d.y
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        frame.to_csv(cwd / "tasks.csv", index=False)
        args = [
            "fit", "tasks.csv", "--target", "value", "--task-col", "task",
            "--id-col", "sample", "--n-latents", "3", "--seeds", "3", "--out", "fit",
        ]  # fmt: skip
        res = _identrep(*args, cwd=cwd)
        out += [
            f"$ identrep {' '.join(args)}",
            res.stderr.rstrip(),
            res.stdout.rstrip(),
        ]
        out.append("$ head -3 fit/latents.csv fit/causal_map.csv")
        for name in ("latents.csv", "causal_map.csv"):
            lines = (cwd / "fit" / name).read_text().splitlines()[:3]
            out += [f"==> fit/{name} <==", *lines, ""]
        out.pop()
        args = ["transform", "fit/model", "tasks.csv", "--out", "new.csv"]
        res = _identrep(*args, cwd=cwd)
        same = (cwd / "new.csv").read_text() == (cwd / "fit/latents.csv").read_text()
        out += [
            f"$ identrep {' '.join(args)}"
            + ("     # same latents, bit for bit" if same else ""),
            res.stdout.rstrip(),
        ]
    return _fenced("\n".join(s for s in out if s))


def produce_reproduce() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        args = ["reproduce", "table1", "--quick", "--models", "MTLCM", "--out"]
        res = _identrep(*args, str(Path(tmp) / "t1"))
        err = res.stderr.rstrip().replace(str(Path(tmp) / "t1"), "results/t1")
    shown = " ".join(args[:-1]) + " --out results/t1"
    return _fenced(f"$ identrep {shown}\n{err}")


QUICK_STUDIES = ("table1", "table2", "table3", "qm9")


def produce_quick() -> str:
    load = os.getloadavg()[0]
    rows = ["| study | runs | wall time |", "|---|---|---|"]
    for study in QUICK_STUDIES:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = _identrep(
                "reproduce", study, "--quick", "--no-progress",
                "--out", str(Path(tmp) / study),
            )  # fmt: skip
            wall = time.perf_counter() - t0
        runs = re.search(r"(\d+) run\(s\)", res.stderr)
        rows.append(
            f"| `identrep reproduce {study} --quick` | "
            f"{runs.group(1) if runs else '?'} | {wall:.0f} s |"
        )
    load = max(load, os.getloadavg()[0])
    rows.append("")
    where = (
        "a quiet machine"
        if load < 1.5
        else "a shared machine: on a quiet one these runs are faster"
    )
    rows.append(
        f"(measured on {os.cpu_count()} cores at a load average of up to "
        f"{load:.1f}; {where})"
    )
    return "\n".join(rows) + "\n"


PRODUCERS = {
    "demo": produce_demo,
    "fit": produce_fit,
    "reproduce": produce_reproduce,
    "quick": produce_quick,
}


def _masked(text: str) -> str:
    """The text with its timings and machine load masked (they vary by run)."""
    text = re.sub(r"load average of up to [\d.]+; [^)]*", "load <l>", text)
    return _TIMING.sub("<t>", text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare, do not rewrite")
    ap.add_argument("--only", nargs="+", choices=sorted(PRODUCERS))
    args = ap.parse_args(argv)
    text = README.read_text()
    names = [m["name"] for m in _BLOCK.finditer(text)]
    unknown = sorted(set(names) - set(PRODUCERS))
    if unknown:
        print(f"README.md has blocks no producer makes: {unknown}", file=sys.stderr)
        return 1
    wanted = args.only or names
    fresh = {name: PRODUCERS[name]() for name in wanted}
    status = 0

    def replace(m):
        nonlocal status
        name = m["name"]
        if name not in fresh:
            return m.group(0)
        if args.check and _masked(m["body"]) != _masked(fresh[name]):
            print(
                f"README.md block {name!r} differs from a fresh run.", file=sys.stderr
            )
            status = 1
        return m.group(1) + fresh[name] + m.group(4)

    new = _BLOCK.sub(replace, text)
    if not args.check:
        from identrep.utils.io import atomic_write_text

        atomic_write_text(README, new)
        print(f"Rewrote {len(fresh)} block(s) of {README.name}: {', '.join(fresh)}.")
    return status


if __name__ == "__main__":
    sys.exit(main())
