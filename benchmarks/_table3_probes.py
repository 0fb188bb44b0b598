"""What the Table 3 baseline probes share: their arguments, the study's
configurations, a study folder's stored latents, one refit (optionally on a
budget of gradient steps instead of epochs) and the cross-seed agreement
(``table3_subset_probe.py``, ``table3_all_materials_probe.py``)."""

from __future__ import annotations

import argparse
import glob
import itertools
import math
import time

import numpy as np

from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies.chen2024_table3 import BASELINE_SETTINGS, grid
from identrep.metrics import mcc
from identrep.training import StepBatches, split_within_tasks


def probe_parser(description: str, d: int, seeds: list[int]) -> argparse.ArgumentParser:
    """``--run`` (a table3 study folder), ``--model``, ``--d`` and ``--seeds``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--run", required=True, help="a table3 study folder (--out)")
    ap.add_argument("--model", default="iVAE")
    ap.add_argument("--d", type=int, default=d)
    ap.add_argument("--seeds", nargs="+", type=int, default=seeds)
    return ap


def study_configs(model: str, d: int, seeds: list[int]) -> dict:
    """The study's configuration of ``model`` at ``d`` latents, by seed index,
    for seeds 0 .. max(seeds)."""
    return {
        c.seed: c
        for c in grid(seeds=max(seeds) + 1, models=(model,))
        if c.n_latents == d
    }


def stored_latents(run: str, config) -> np.ndarray:
    """The latents the study stored in ``run`` for ``config``, as float64."""
    paths = glob.glob(f"{run}/latents/{config.run_id}.npz")
    if len(paths) != 1:
        raise FileNotFoundError(
            f"--run {run}: expected the latents of {config.run_id}, "
            f"found {len(paths)} file(s)."
        )
    return np.load(paths[0])["latents"].astype(float)


def steps_per_epoch(model, Y: np.ndarray) -> int:
    """Optimiser steps in one epoch of ``model`` (unfitted) on the wide targets
    ``Y``: its training rows (every observed (material, task) pair less the
    per-task validation share, :func:`split_within_tasks`) in batches of
    ``batch_size``, the last one partial (as ``IndexBatches`` cuts them)."""
    task_ids = np.nonzero(~np.isnan(Y))[1]
    train, _ = split_within_tasks(task_ids, model.val_fraction, 0)
    return math.ceil(len(train) / model.batch_size)


def refit(config, X, Y, steps: int | None = None):
    """The study's baseline of ``config`` (its settings and model seed) fitted on
    ``(X, Y)``; returns the model and its CPU seconds.

    ``steps``: train for ``max_epochs`` (the study's 10) chunks of ``steps``
    optimiser steps each (:class:`identrep.training.StepBatches`, validated and
    checkpointed after each chunk as after an epoch) instead of 10 passes over
    the data, so that fits on data of different sizes can take the same number
    of steps. The model then has ``probe_steps_`` (steps per chunk),
    ``natural_steps_`` (steps per pass of its data) and ``passes_`` (passes
    started)."""
    t0 = time.process_time()
    model = chen.baseline_estimator(config, config.model_seed(), BASELINE_SETTINGS)
    if steps is not None:
        fit_module = model._fit_module
        chunks = {}

        def chunked(module, loss_fn, train_batches, val_batches=None, **kw):
            chunks["c"] = StepBatches(train_batches, steps)
            model.natural_steps_ = len(train_batches)
            return fit_module(module, loss_fn, chunks["c"], val_batches, **kw)

        model._fit_module = chunked  # this instance only; the class is untouched
    model.fit(X, Y)
    if steps is not None:
        del model._fit_module
        model.probe_steps_, model.passes_ = steps, chunks["c"].passes
    return model, time.process_time() - t0


def print_agreement(model: str, d: int, name: str, reps: dict) -> None:
    """Cross-seed Pearson MCC x 100 of every pair in ``reps`` (seed -> latents):
    mean ± std (ddof 0) and each pair."""
    pairs = {
        (a, b): 100 * mcc(reps[a], reps[b], "pearson")
        for a, b in itertools.combinations(sorted(reps), 2)
    }
    vals = np.array(list(pairs.values()))
    shown = ", ".join(f"{a}-{b} {v:.2f}" for (a, b), v in pairs.items())
    print(f"{model} d={d}, {name}: {vals.mean():.2f} ± {vals.std():.2f} ({shown})")
