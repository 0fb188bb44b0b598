"""Run a grid of configurations through joblib, one atomic record per run.

Every run executes with one BLAS/torch thread, so records do not depend on the number
of jobs, and its seeds come from its configuration (``derive_seed``), never from the
order of execution. Finished records are skipped, so an interrupted sweep resumes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from identrep.experiments.configs import RunConfig
from identrep.experiments.io import load_records, write_record

__all__ = ["record_path", "run_sweep"]


def record_path(out: str | Path, config: RunConfig) -> Path:
    return Path(out) / "records" / f"{config.run_id}.json"


def _run_single_threaded(config: RunConfig, out: str) -> dict:
    import torch
    from threadpoolctl import threadpool_limits

    from identrep.experiments.runner import run

    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        record = run(config)
    write_record(record_path(out, config), record)
    return record


class _Progress:
    """A small progress line on stderr (no dependency)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.t0 = time.perf_counter()

    def update(self, record: dict) -> None:
        self.done += 1
        if not self.enabled:
            return
        c, m = record["config"], record["metrics"]
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        width = len(str(self.total))
        print(
            f"[{self.done:>{width}}/{self.total}] {c['model']} d={c['n_latents']} "
            f"k={c['n_causal']} {c['mixing']} seed={c['seed']}: "
            f"MCC task {m['mcc_task_spearman']:.4f} pooled {m['mcc_pooled']:.4f} "
            f"({m['fit_seconds']:.1f} s fit; {elapsed:.0f} s elapsed, "
            f"~{eta:.0f} s left)",
            file=sys.stderr,
            flush=True,
        )


def run_sweep(
    configs: Sequence[RunConfig],
    out: str | Path,
    *,
    jobs: int = 1,
    progress: bool = True,
    resume: bool = True,
) -> list[dict]:
    """Run ``configs``, writing ``out/records/<run_id>.json`` for each.

    Parameters
    ----------
    configs : sequence of RunConfig
    out : path
        Output folder.
    jobs : int
        Worker processes (joblib "loky"); 1 runs in this process.
    progress : bool
        Print one line per finished run to stderr.
    resume : bool
        Skip configurations whose record already exists.

    Returns
    -------
    list of dict
        The records of every configuration (loaded or freshly computed), in the
        order of ``configs``.
    """
    out = Path(out)
    (out / "records").mkdir(parents=True, exist_ok=True)
    ids = {c.run_id for c in configs}
    if len(ids) != len(configs):
        raise ValueError("configs contains duplicates.")
    existing = {}
    if resume:
        existing = {r["run_id"]: r for r in load_records(out) if r["run_id"] in ids}
    todo = [c for c in configs if c.run_id not in existing]
    if progress and existing:
        print(
            f"Resuming: {len(existing)} of {len(configs)} runs already recorded in "
            f"{out / 'records'}.",
            file=sys.stderr,
        )
    bar = _Progress(len(todo), progress)
    fresh = {}
    if jobs == 1 or len(todo) <= 1:
        for c in todo:
            rec = _run_single_threaded(c, str(out))
            fresh[rec["run_id"]] = rec
            bar.update(rec)
    else:
        from joblib import Parallel, delayed

        par = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
        for rec in par(delayed(_run_single_threaded)(c, str(out)) for c in todo):
            fresh[rec["run_id"]] = rec
            bar.update(rec)
    allrec = {**existing, **fresh}
    return [allrec[c.run_id] for c in configs]
