"""Run a grid of configurations through joblib, one atomic record per run.

Every run executes with one BLAS/torch thread, so records do not depend on the number
of jobs, and its seeds come from its configuration (``derive_seed``), never from the
order of execution. Finished records are skipped, so an interrupted sweep resumes.
The sweep serves every study of the registry: what differs between studies (the
metrics of the progress line, stored representations, settings the runs in one
folder must share) is read from the study's entry.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from identrep.experiments.executor import make_executor
from identrep.experiments.io import (
    latents_path,
    load_records,
    write_record,
)
from identrep.experiments.registry import get_study
from identrep.training.progress import Progress

__all__ = ["record_path", "run_sweep"]


def record_path(out: str | Path, config) -> Path:
    return Path(out) / "records" / f"{config.run_id}.json"


def _run_single_threaded(config, out: str | None) -> dict:
    """Run one configuration with one BLAS/torch thread; with ``out``, write its
    record there as soon as it is finished (local workers), so a sweep killed at
    any moment loses no finished run."""
    import torch
    from threadpoolctl import threadpool_limits

    from identrep.experiments.runner import run

    torch.set_num_threads(1)
    artifacts = None if out is None else str(Path(out) / "latents")
    with threadpool_limits(limits=1):
        try:
            record = run(config, artifacts=artifacts)
        except (ValueError, RuntimeError, ArithmeticError) as exc:
            # a run that cannot be fitted (singular data, divergence) is a result
            # of the sweep, not the end of it; seeds are fixed, so it is final
            record = failed_record(config, exc)
    if out is not None:
        write_record(record_path(out, config), record)
    return record


def failed_record(config, exc: BaseException) -> dict:
    """The record of a run that raised: its configuration and the error, no
    metrics. The report lists it; delete the file to run it again."""
    from identrep.experiments.runner import environment

    return {
        "run_id": config.run_id,
        "config": config.to_dict(),
        "status": "failed",
        "error": f"{type(exc).__name__}: {exc}",
        "metrics": {},
        "environment": environment(),
    }


class _SweepLock:
    """``out/.sweep.lock``, held with an exclusive ``flock`` while a sweep writes to
    ``out``.

    Taking the lock is one atomic step of the kernel, so of two sweeps started
    together exactly one holds it; the kernel also releases it when its process
    dies, so a killed sweep never blocks the next one. The holder writes its pid and
    host into the file for the message a refused sweep prints. (Where ``fcntl`` is
    missing, an exclusive create of the file stands in, without the release on
    death.)
    """

    def __init__(self, out: Path):
        self.path = out / ".sweep.lock"
        self._fd: int | None = None

    def _owner(self) -> str:
        try:
            return self.path.read_text().strip() or "unknown"
        except OSError:
            return "unknown"

    def _refuse(self):
        return RuntimeError(
            f"Another sweep ({self._owner()}) is writing to {self.path.parent}; wait "
            "for it to finish, or use another --out."
        )

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            try:
                self._fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                raise self._refuse() from None
            fcntl = None
        while fcntl is not None:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._refuse() from None
            try:  # the file we locked may have been removed by a finishing holder
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                break
            os.close(fd)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"pid {os.getpid()} on {platform.node()}\n".encode())
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # before the release: a waiter re-checks the path
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _remove_stale_temporaries(rec_dir: Path) -> int:
    """Delete temporary files of record writes that a killed sweep left behind
    (``.<name>.json.<random>.tmp``; never read as records)."""
    n = 0
    for p in rec_dir.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            n += 1
    return n


class _Progress:
    """The sweep's progress on stderr: one line per finished run with the metrics
    its study declares (``Study.progress``), under a tqdm bar of the runs on a
    terminal, and a last line with the total time."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.t0 = time.perf_counter()
        self.bar = Progress(
            total, "runs", enabled=self.enabled, unit="run", interval=math.inf
        )

    def close(self) -> None:
        self.bar.close()

    def update(self, config, record: dict) -> None:
        self.done += 1
        if not self.enabled:
            return
        m = record["metrics"]
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        width = len(str(self.total))
        shown = [
            f"{label} {m[key]:.4f}"
            for key, label in get_study(config.table).progress
            if isinstance(m.get(key), (int, float))
        ]
        if record.get("status") == "failed":
            shown = [f"FAILED ({record['error'][:160]})"]
        self.bar.write(
            f"[{self.done:>{width}}/{self.total}] {config.table} {config.model} "
            f"{config.describe()} seed={config.seed}: {' '.join(shown)} "
            f"({m.get('fit_seconds', float('nan')):.1f} s fit; {elapsed:.0f} s "
            f"elapsed, ~{eta:.0f} s left)"
        )
        self.bar.update()


def _as_json(value):
    return json.loads(json.dumps(value))


def _check_comparable(configs, records: list[dict], out: Path) -> None:
    """Refuse runs whose study-declared shared settings (``Study.comparable``)
    differ from those of the same study's runs already in ``out``: their seeds
    are compared with each other."""
    for name in dict.fromkeys(c.table for c in configs):
        fields = get_study(name).comparable
        if not fields:
            continue
        old = [r["config"] for r in records if r["config"].get("table") == name]
        new = [_as_json(c.to_dict()) for c in configs if c.table == name]
        seen = {}
        for cfg in [*old, *new]:
            seen.setdefault(tuple(repr(cfg.get(f)) for f in fields), cfg)
        if len(seen) > 1:
            a, b = list(seen.values())[:2]
            diff = [f for f in fields if a.get(f) != b.get(f)]
            raise ValueError(
                f"{out} holds {name} runs made with other settings ({diff}: "
                f"{ {f: a.get(f) for f in diff} } there, "
                f"{ {f: b.get(f) for f in diff} } now); seeds can only be "
                "compared on the same data and budget. Use another output folder "
                "or pass the same settings."
            )


def _finished(record: dict, out: Path) -> bool:
    """A record counts as finished unless its study stores representations and
    they are missing (the run is then recomputed, exactly: seeds are fixed)."""
    if record.get("status") == "failed":
        return True
    if not get_study(record["config"]["table"]).stores_latents:
        return True
    return latents_path(out / "latents", record["run_id"]).is_file()


def run_sweep(
    configs: Sequence,
    out: str | Path,
    *,
    jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    progress: bool = True,
    resume: bool = True,
) -> list[dict]:
    """Run ``configs``, writing ``out/records/<run_id>.json`` for each.

    Every record is written atomically the moment its run finishes (by the worker
    when it shares this file system, and again by this process when the result
    arrives), so a sweep killed at any moment, SIGKILL included, keeps every
    finished record and never leaves a partial one; run it again and it finishes
    the remaining runs only.

    Parameters
    ----------
    configs : sequence of run configurations
        Of any registered studies (``config.table``), e.g. ``study.grid()``.
    out : path
        Output folder.
    jobs : int
        Worker processes; 1 with the default backend runs in this process.
    backend : {"loky", "dask"}
        Local processes through joblib, or a Dask cluster (see
        :mod:`identrep.experiments.executor`).
    scheduler : str, optional
        Address of a running Dask scheduler; without it ``backend="dask"`` starts
        a local cluster of ``jobs`` workers.
    progress : bool
        Print one line per finished run to stderr.
    resume : bool
        Skip configurations whose record already exists (and, for studies that
        store representations, whose representations exist).

    Raises
    ------
    ValueError
        Duplicate configurations, or settings that a study requires every run
        in one folder to share (``Study.comparable``) differ from those there.

    Returns
    -------
    list of dict
        The records of every configuration (loaded or freshly computed), in the
        order of ``configs``.
    """
    out = Path(out)
    rec_dir = out / "records"
    rec_dir.mkdir(parents=True, exist_ok=True)
    ids = {c.run_id for c in configs}
    if len(ids) != len(configs):
        raise ValueError("configs contains duplicates.")
    executor = make_executor(backend, jobs, scheduler)
    with _SweepLock(out):
        _remove_stale_temporaries(rec_dir)
        on_disk = load_records(out)
        _check_comparable(configs, on_disk, out)
        existing = {}
        if resume:
            existing = {
                r["run_id"]: r
                for r in on_disk
                if r["run_id"] in ids and _finished(r, out)
            }
        todo = [c for c in configs if c.run_id not in existing]
        if progress and existing:
            print(
                f"Resuming: {len(existing)} of {len(configs)} runs already recorded "
                f"in {rec_dir}.",
                file=sys.stderr,
            )
        bar = _Progress(len(todo), progress)
        by_id = {c.run_id: c for c in todo}
        fresh = {}
        with executor:
            worker_out = str(out) if executor.shared_filesystem else None
            fn = functools.partial(_run_single_threaded, out=worker_out)
            for rec in executor.map_unordered(fn, todo):
                if worker_out is None:
                    write_record(rec_dir / f"{rec['run_id']}.json", rec)
                fresh[rec["run_id"]] = rec
                bar.update(by_id[rec["run_id"]], rec)
        bar.close()
    allrec = {**existing, **fresh}
    return [allrec[c.run_id] for c in configs]
