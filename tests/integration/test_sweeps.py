"""Sweeps across backends, and a sweep killed with SIGKILL that resumes without loss."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from identrep.experiments import RunConfig, load_records, run_sweep

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


def _strip(rec: dict) -> dict:
    """A record without what legitimately differs between runs: timings and the
    machine description."""
    rec = json.loads(json.dumps(rec))
    rec["metrics"].pop("fit_seconds")
    rec.pop("timings")
    rec.pop("environment")
    return rec


@pytest.mark.slow
def test_dask_local_cluster_gives_records_identical_to_local_processes(tmp_path):
    import distributed  # noqa: F401  - fail loudly if the extra is missing

    configs = [dataclasses.replace(SMALL, seed=s) for s in range(4)]
    local = run_sweep(configs, tmp_path / "local", jobs=1, progress=False)
    dask = run_sweep(configs, tmp_path / "dask", jobs=2, backend="dask", progress=False)
    assert [_strip(r) for r in dask] == [_strip(r) for r in local]
    files = sorted(p.name for p in (tmp_path / "dask" / "records").iterdir())
    assert files == sorted(f"{c.run_id}.json" for c in configs)
    assert not (tmp_path / "dask" / ".sweep.lock").exists()


def test_executor_rejects_bad_settings():
    from identrep.experiments.executor import make_executor

    with pytest.raises(ValueError, match="backend must be one of"):
        make_executor("spark")
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        make_executor("loky", jobs=0)
    with pytest.raises(ValueError, match="use backend='dask'"):
        make_executor("loky", scheduler="tcp://127.0.0.1:8786")


def test_a_second_live_sweep_on_the_same_folder_is_refused(tmp_path):
    (tmp_path / "records").mkdir()
    # a live process that is not this one holds the lock
    hold = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from identrep.experiments.sweep import _SweepLock
        with _SweepLock(Path(sys.argv[1])):
            print("holding", flush=True)
            time.sleep(60)
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(RuntimeError, match=f"Another sweep \\(pid {holder.pid} on"):
            run_sweep([SMALL], tmp_path, progress=False)
    finally:
        holder.kill()  # SIGKILL: the kernel releases its lock
        holder.wait()
    # the holder died without cleaning up: the next sweep runs
    recs = run_sweep([SMALL], tmp_path, progress=False)
    assert len(recs) == 1


_RACE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from identrep.experiments.sweep import _SweepLock
    out, me, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    (out / f"ready.{me}").touch()  # barrier: try only once every process is ready
    deadline = time.time() + 100
    while len(list(out.glob("ready.*"))) < n and time.time() < deadline:
        time.sleep(0.01)
    try:
        with _SweepLock(out):
            # hold until every other process has tried
            while len(list(out.glob("refused.*"))) < n - 1 and time.time() < deadline:
                time.sleep(0.01)
        print("held")
    except RuntimeError:
        (out / f"refused.{me}").touch()
        print("refused")
    """
)


def test_of_sweeps_started_together_exactly_one_holds_the_lock(tmp_path):
    for trial in range(2):
        out = tmp_path / f"t{trial}"
        out.mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACE, str(out), str(i), "4"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        results = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
        assert results.count("held") == 1, (trial, results)
        assert results.count("refused") == 3, (trial, results)


_DRIVER = textwrap.dedent(
    """
    import dataclasses, sys
    from identrep.experiments import RunConfig, run_sweep
    base = RunConfig(table="table1", n_latents=8, n_causal=2, n_observed=8,
                     n_tasks=150, n_samples=60)
    configs = [dataclasses.replace(base, seed=s) for s in range(int(sys.argv[2]))]
    run_sweep(configs, sys.argv[1], jobs=1, progress=False)
    """
)


def _valid_records(folder: Path, ids: set[str]) -> dict[str, int]:
    """Every file in records/ is a complete record of a known run (or a hidden
    temporary of a write in progress); returns run_id -> mtime of the records."""
    found = {}
    for p in (folder / "records").iterdir():
        if p.name.startswith(".") and p.name.endswith(".tmp"):
            continue  # a write the kill interrupted: never read as a record
        rec = json.loads(p.read_text())  # raises on a partial file
        assert p.name == f"{rec['run_id']}.json" and rec["run_id"] in ids
        assert "mcc_pooled" in rec["metrics"]
        found[rec["run_id"]] = p.stat().st_mtime_ns
    return found


@pytest.mark.slow
def test_sweep_killed_with_sigkill_at_random_moments_resumes_without_loss(tmp_path):
    n_runs = 10
    out = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    rng = np.random.default_rng(0)
    base = RunConfig(
        table="table1", n_latents=8, n_causal=2, n_observed=8, n_tasks=150, n_samples=60
    )
    configs = [dataclasses.replace(base, seed=s) for s in range(n_runs)]
    ids = {c.run_id for c in configs}
    kills, finished = 0, {}
    for _ in range(n_runs + 5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _DRIVER, str(out), str(n_runs)],
            env=env,
            start_new_session=True,
        )
        # wait for this attempt to add a record (or to end), then kill it at a
        # random moment of the following run: mid-fit or mid-write
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "records").is_dir() and len(_valid_records(out, ids)) > len(
                finished
            ):
                break
            time.sleep(0.01)
        if proc.poll() is None:
            time.sleep(rng.uniform(0.0, 0.4))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        now = _valid_records(out, ids)
        # nothing finished is lost, and a finished record is never rewritten
        for run_id, mtime in finished.items():
            assert now[run_id] == mtime, f"{run_id} was lost or rewritten"
        finished = now
        if proc.returncode == 0:
            break
    assert kills >= 3, f"only {kills} kill(s) landed; the runs are too fast"
    assert set(finished) == ids
    # the records equal those of a sweep that was never interrupted
    clean = run_sweep(configs, tmp_path / "clean", jobs=1, progress=False)
    resumed = {r["run_id"]: r for r in load_records(out)}
    assert [_strip(resumed[r["run_id"]]) for r in clean] == [_strip(r) for r in clean]
    # no temporaries or lock left once the last attempt finished
    assert not list((out / "records").glob(".*"))
    assert not (out / ".sweep.lock").exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [("{not json", "is not valid JSON"), ("[1, 2]", "holds a list, not a run record")],
    ids=["truncated", "wrong-shape"],
)
def test_a_corrupt_record_is_set_aside_not_blocking_resume_or_report(
    tmp_path, content, why
):
    from identrep.experiments import write_report

    other = dataclasses.replace(SMALL, seed=1)
    run_sweep([SMALL, other], tmp_path, progress=False)
    bad = tmp_path / "records" / f"{other.run_id}.json"
    bad.write_text(content)
    with pytest.warns(UserWarning, match=f"{bad.name} {why}.*records_set_aside"):
        recs = run_sweep([SMALL, other], tmp_path, progress=False)
    assert [r["run_id"] for r in recs] == [SMALL.run_id, other.run_id]
    assert (tmp_path / "records_set_aside" / bad.name).read_text() == content
    assert json.loads(bad.read_text())["run_id"] == other.run_id  # run again
    bad.write_text(content)
    with pytest.warns(UserWarning, match="records_set_aside"):
        frame, _ = write_report(tmp_path)  # the report is built from the rest
    assert len(frame) == 1 and frame["seed"].tolist() == [SMALL.seed]
