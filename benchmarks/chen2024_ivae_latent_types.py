"""Does the iVAE of Table 1 (Chen et al., 2024) recover the causal or the spurious
latents of a task better?

Refits the study's iVAE runs (``identrep reproduce table1 --models iVAE``: the same
data, model seeds and settings) of the configurations given and prints, per seed,
the per-task Spearman MCC (the table's column; it reproduces the records) and the
mean matched |Spearman| of the latents that are causal in their task and of those
that are spurious, each task matched on its own (Hungarian) as the column is. Used
for docs/notes.md, "Coordinator, stop 32".

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/chen2024_ivae_latent_types.py --configs 4,5 2,3
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import linear_sum_assignment

from identrep.experiments import get_study
from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies.chen2024_table1 import BASELINE_SETTINGS
from identrep.metrics import correlation_matrix


def latent_types(Z, Z_hat, task_ids, causal):
    """(per-task MCC, mean |rho| of causal latents, of spurious ones)."""
    per_task, hits = [], {True: [], False: []}
    for t in np.unique(task_ids):
        rows = task_ids == t
        C = correlation_matrix(Z[rows], Z_hat[rows], "spearman")
        r, c = linear_sum_assignment(-C)
        per_task.append(C[r, c].mean())
        for j, v in zip(r, C[r, c], strict=True):
            hits[bool(causal[t, j])].append(v)
    mean = {k: float(np.mean(v)) if v else float("nan") for k, v in hits.items()}
    return float(np.mean(per_task)), mean[True], mean[False]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["4,5"], metavar="K,D")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    want = [tuple(int(v) for v in c.split(",")) for c in args.configs]
    study = get_study("table1")
    for config in study.grid(seeds=args.seeds, models=("iVAE",)):
        if (config.n_causal, config.n_latents) not in want:
            continue
        data, _ = study.make_data(config)
        est = chen.baseline_estimator(config, config.model_seed(), BASELINE_SETTINGS)
        est.fit(data.X, data.y, task_ids=data.task_ids)
        Z_hat = est.transform(data.X, data.y, task_ids=data.task_ids)
        mcc, causal, spurious = latent_types(data.Z, Z_hat, data.task_ids, data.causal)
        print(
            f"k={config.n_causal} d={config.n_latents} seed={config.seed} "
            f"mcc_task={mcc:.4f} causal={causal:.4f} spurious={spurious:.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
