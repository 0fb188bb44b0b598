"""run(config) -> record: one fit of one model on one data set, with its metrics.

What a run computes comes from its study's registry entry (data, fit-and-score of
the model); this module only times it and wraps it in the standard record.
"""

from __future__ import annotations

import platform
import subprocess
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from identrep.experiments.io import latents_path
from identrep.experiments.registry import get_study

__all__ = ["environment", "latents_path", "make_data", "run"]


@lru_cache(maxsize=1)
def _git_hash() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment() -> dict:
    """Versions that identify the software a record was produced with."""
    import scipy
    import sklearn
    import torch

    from identrep._version import __version__

    return {
        "identrep": __version__,
        "git": _git_hash(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit_learn": sklearn.__version__,
        "torch": torch.__version__,
    }


def make_data(config):
    """The data set of a configuration and its seed (from the configuration only)."""
    return get_study(config.table).make_data(config)


def run(config, *, artifacts: str | Path | None = None) -> dict:
    """Run one configuration and return its record.

    The record holds ``run_id``, ``config``, ``data_seed``, ``model_seed``,
    ``metrics`` (the study's fit-and-score of the model), ``timings`` (wall
    seconds, and ``cpu_seconds`` of this process) and
    ``environment``. Studies that store representations (real data, compared
    across seeds) write them to ``artifacts/<run_id>.npz`` (needed; the sweep
    passes ``out/latents``).
    """
    study = get_study(config.table)
    t0, cpu0 = time.perf_counter(), time.process_time()
    data, data_seed = study.make_data(config)
    t_data = time.perf_counter() - t0
    model_seed = config.model_seed()
    metrics = study.fit(config, data, model_seed, artifacts)
    return {
        "run_id": config.run_id,
        "config": config.to_dict(),
        "data_seed": data_seed,
        "model_seed": model_seed,
        "metrics": metrics,
        "timings": {
            "data_seconds": t_data,
            "fit_seconds": metrics["fit_seconds"],
            "total_seconds": time.perf_counter() - t0,
            # this process's CPU (all its threads), data to score: comparable on
            # a shared machine where wall time is not
            "cpu_seconds": time.process_time() - cpu0,
        },
        "environment": environment(),
    }
