"""run(config): one record with config, seeds, metrics, reproducible."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import torch

from identrep.experiments import RunConfig, run

SMALL = RunConfig(
    table="table1", n_latents=3, n_causal=2, n_observed=3, n_tasks=30, n_samples=40
)


def test_run_record_has_config_seeds_metrics_and_is_reproducible():
    a, b = run(SMALL), run(SMALL)
    assert a["config"] == SMALL.to_dict()
    for key in (
        "mcc_task_spearman",
        "mcc_pooled",
        "causal_accuracy",
        "fit_seconds",
        "ceiling_mcc_task",
        "random_mcc_task",
        "log_likelihood",
    ):
        assert key in a["metrics"]
    assert a["environment"]["torch"] == torch.__version__
    for key, value in a["metrics"].items():
        if key != "fit_seconds":
            assert b["metrics"][key] == value, key
    # the fit is good even on this small problem, and better than a random unmixing
    assert a["metrics"]["mcc_pooled"] > 0.95
    assert a["metrics"]["mcc_task_spearman"] > a["metrics"]["random_mcc_task"]


def test_record_names_the_cpu_kernels_that_ran_it():
    """A record says which kernels ran it: the BLAS core forced by
    OPENBLAS_CORETYPE and torch's capability forced by ATEN_CPU_CAPABILITY show up
    in a fresh process (both pick their kernels at load time)."""
    code = (
        "import json; from identrep.experiments.runner import environment; "
        "print(json.dumps(environment()['cpu']))"
    )
    env = dict(
        os.environ, OPENBLAS_CORETYPE="Sandybridge", ATEN_CPU_CAPABILITY="default"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    cpu = json.loads(out.stdout.strip().splitlines()[-1])
    assert cpu["machine"] == platform.machine()
    assert cpu["torch"] == "DEFAULT"
    if platform.machine() in ("x86_64", "AMD64") and any(
        b.startswith("openblas") for b in cpu["blas"]
    ):
        assert "openblas Sandybridge" in cpu["blas"], cpu["blas"]
    assert isinstance(cpu["numpy_simd"], list)
