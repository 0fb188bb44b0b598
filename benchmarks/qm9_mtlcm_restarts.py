"""Is MTLCM's rotation of converged QM9 features the same across seeds?

Reads a ``reproduce qm9`` folder with two or more seeds' records and latents at
``--latents`` latents (others in the folder are ignored; the stored standardised
MTRN features), refits MTLCM on each seed's features from the joint-
diagonalisation start (the study's fit, same seed) and from ``--starts`` random
starts, then ``n_init=10`` restarts of the joint-diagonalisation start, and prints
every fit's log-likelihood per sample, its Pearson MCC to the study's fit, and the
cross-seed MCC of (a) the study's fits, (b) the ``n_init=10`` fits (what
``reproduce qm9 --mtlcm-n-init 10`` gives), (c) the best-likelihood fit of each
seed among all those, (d) one seed's study fit against the other's best fit, for
every pair of seeds (with more than two: also mean ± std over pairs, ddof=0).
Also the canonical correlations of each pair's features (how much subspace they
share). ``--molecules 0``: all of QM9 (the GPU runs; their features from
``qm9_pack_features.py --unpack``).
Used for docs/notes.md, "Coordinator, stop 27" (d = 8), "Coordinator, stop 28"
(d = 7) and "Coordinator, stop 31" (full QM9, d = 7 and 8, four seeds).

Usage::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/qm9_mtlcm_restarts.py \\
        /work/runs/qm9_30k_fig3 --molecules 30000 --latents 8
"""

from __future__ import annotations

import argparse
import itertools
import os
from typing import NamedTuple

import numpy as np

from identrep.experiments import load_records
from identrep.experiments.io import latents_path
from identrep.experiments.studies.chen2024_qm9 import _load
from identrep.metrics import mcc
from identrep.models.multitask.mtlcm import MTLCM
from identrep.models.multitask.pipeline import stage_seeds


class SeedRun(NamedTuple):
    """One seed's run: its run id and seed, the pipeline's MTLCM seed and the
    standardised MTRN features it stored."""

    run_id: str
    seed: int
    mtlcm_seed: int
    features: np.ndarray


def seed_runs(run: str, latents: int) -> list[SeedRun]:
    """The runs of a ``reproduce qm9`` folder with ``n_latents == latents`` (two
    or more, each with its latents file), in record order."""
    runs = []
    for record in load_records(run):
        if record["config"]["n_latents"] != latents:
            continue
        path = latents_path(os.path.join(run, "latents"), record["run_id"])
        if not path.exists():
            raise SystemExit(f"{run}: no latents file {path} for {record['run_id']}")
        mtlcm_seed = stage_seeds(record["model_seed"])[1]  # the pipeline's
        features = np.load(path)["features"].astype(np.float64)
        seed = record["config"]["seed"]
        runs.append(SeedRun(record["run_id"], seed, mtlcm_seed, features))
    if len(runs) < 2:
        raise SystemExit(
            f"{run}: expected 2 or more records with n_latents={latents}; "
            f"found {len(runs)}"
        )
    return runs


def canonical_correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    qa, _ = np.linalg.qr(a - a.mean(0))
    qb, _ = np.linalg.qr(b - b.mean(0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a reproduce qm9 --out folder with 2+ seeds")
    ap.add_argument("--molecules", type=int, default=30000, help="0: all")
    ap.add_argument("--latents", type=int, default=8)
    ap.add_argument("--starts", type=int, default=8)
    args = ap.parse_args()
    Y = _load(args.molecules or None, 0, "qm9pack").Y
    runs = seed_runs(args.run, args.latents)
    study_fits, best_fits, ninit_fits = [], [], []
    for r in runs:
        F, mtlcm_seed = r.features, r.mtlcm_seed
        kw = {"n_latents": args.latents, "sigma_obs": 1e-4}
        ref = MTLCM(random_state=mtlcm_seed, **kw).fit(F, Y)
        Z_ref = ref.transform(F)
        fits = [(ref.log_likelihood_, Z_ref, "study (jd)")]
        for k in range(args.starts):
            m = MTLCM(init="random", random_state=k, **kw).fit(F, Y)
            fits.append((m.log_likelihood_, m.transform(F), f"random start {k}"))
        m = MTLCM(n_init=10, random_state=mtlcm_seed, **kw).fit(F, Y)
        fits.append((m.log_likelihood_, m.transform(F), "jd, n_init=10"))
        print(f"{r.run_id}.npz")
        for ll, Z, name in fits:
            agree = mcc(Z, Z_ref)
            print(f"  {name:16s} log-lik/sample {ll:.5f}  MCC to study {agree:.4f}")
        study_fits.append(Z_ref)
        best_fits.append(max(fits, key=lambda t: t[0])[1])
        ninit_fits.append(fits[-1][1])
    pairs = list(itertools.combinations(range(len(runs)), 2))
    rows = {
        "study fits": [],
        "n_init=10 fits": [],
        "best-likelihood fits": [],
        "study/best": [],
    }
    for i, j in pairs:
        cc = canonical_correlations(runs[i].features, runs[j].features)
        study = 100 * mcc(study_fits[i], study_fits[j])
        best = 100 * mcc(best_fits[i], best_fits[j])
        ninit = 100 * mcc(ninit_fits[i], ninit_fits[j])
        mixed = [
            100 * mcc(study_fits[i], best_fits[j]),
            100 * mcc(best_fits[i], study_fits[j]),
        ]
        rows["study fits"].append(study)
        rows["best-likelihood fits"].append(best)
        rows["n_init=10 fits"].append(ninit)
        rows["study/best"].extend(mixed)
        print(f"seeds {runs[i].seed}, {runs[j].seed}:")
        print("  canonical correlations of the features:", np.round(cc, 4))
        print(f"  cross-seed MCC x100, study fits: {study:.2f}")
        print(f"  cross-seed MCC x100, n_init=10 fits: {ninit:.2f}")
        print(f"  cross-seed MCC x100, best-likelihood fits: {best:.2f}")
        print(
            "  cross-seed MCC x100, study fit of one seed and best fit of the "
            "other: " + ", ".join(f"{v:.2f}" for v in mixed)
        )
    if len(pairs) > 1:
        for name, vals in rows.items():
            print(
                f"over {len(pairs)} pairs, {name}: "
                f"{np.mean(vals):.2f} ± {np.std(vals):.2f} (min {np.min(vals):.2f})"
            )


if __name__ == "__main__":
    main()
