"""run(config): one record with config, seeds, metrics, reproducible."""

from __future__ import annotations

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
