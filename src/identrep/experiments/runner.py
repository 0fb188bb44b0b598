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


@lru_cache(maxsize=1)
def cpu_kernels() -> dict:
    """The CPU's kernels that set a record's floating-point arithmetic.

    numpy, OpenBLAS and torch pick their vector loops by the CPU they run on
    (AVX2, AVX-512, ...), and those give different last bits. Training and
    iterative fits such as LDA's can grow such differences into different
    results, so a record made on another kind of CPU need not be reproduced to
    the bit. ``machine``: the architecture; ``numpy_simd``: numpy's dispatched
    extensions in use (``NPY_DISABLE_CPU_FEATURES`` removes some);
    ``blas``: each BLAS loaded, as ``"name architecture"`` (OpenBLAS's core,
    ``OPENBLAS_CORETYPE``); ``torch``: torch's CPU capability
    (``ATEN_CPU_CAPABILITY``).
    """
    import torch

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        simd = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    except ImportError:  # numpy's private module moved
        simd = None
    try:
        from threadpoolctl import threadpool_info

        blas = sorted(
            {
                f"{i.get('internal_api')} {i.get('architecture') or ''}".strip()
                for i in threadpool_info()
                if i.get("user_api") == "blas"
            }
        )
    except Exception:  # noqa: BLE001 - introspection only, never fail a run
        blas = None
    return {
        "machine": platform.machine(),
        "numpy_simd": simd,
        "blas": blas,
        "torch": torch.backends.cpu.get_cpu_capability(),
    }


def environment() -> dict:
    """Versions that identify the software a record was produced with, and the
    CPU kernels that ran it (:func:`cpu_kernels`)."""
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
        "cpu": cpu_kernels(),
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
