"""Is MTLCM's rotation of converged QM9 features the same across seeds?

Reads a ``reproduce qm9`` folder with two seeds' records and latents at
``--latents`` latents (others in the folder are ignored; the stored
standardised MTRN features), refits MTLCM on each seed's features from the joint-
diagonalisation start (the study's fit, same seed) and from ``--starts`` random
starts, then ``n_init=10`` restarts of the joint-diagonalisation start, and prints
every fit's log-likelihood per sample, its Pearson MCC to the study's fit, and the
cross-seed MCC of (a) the study's fits, (b) the best-likelihood fit of each seed
among all those, (c) one seed's study fit against the other's best fit. Also the
canonical correlations of the two seeds' features (how much subspace they share).
Used for docs/notes.md, "Coordinator, stop 27" (d = 8) and "Coordinator, stop 28"
(d = 7).

Usage::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/qm9_mtlcm_restarts.py \\
        /work/runs/qm9_30k_fig3 --molecules 30000 --latents 8
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

from identrep.experiments.studies.chen2024_qm9 import _load
from identrep.metrics import mcc
from identrep.models.multitask.mtlcm import MTLCM
from identrep.utils.seeding import check_random_state


def canonical_correlations(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    qa, _ = np.linalg.qr(a - a.mean(0))
    qb, _ = np.linalg.qr(b - b.mean(0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a reproduce qm9 --out folder with two seeds")
    ap.add_argument("--molecules", type=int, default=30000)
    ap.add_argument("--latents", type=int, default=8)
    ap.add_argument("--starts", type=int, default=8)
    args = ap.parse_args()
    Y = _load(args.molecules, 0, "qm9pack").Y
    runs = []  # (model seed, latents file) of the records with --latents latents
    for rec_path in sorted(glob.glob(os.path.join(args.run, "records", "*.json"))):
        with open(rec_path) as f:
            record = json.load(f)
        if record["config"]["n_latents"] == args.latents:
            lat = os.path.join(args.run, "latents", record["run_id"] + ".npz")
            runs.append((record["model_seed"], lat))
    if len(runs) != 2 or not all(os.path.exists(lat) for _, lat in runs):
        raise SystemExit(
            f"{args.run}: expected 2 records with n_latents={args.latents} and "
            f"their latents files; found {len(runs)} record(s)"
        )
    study_fits, best_fits, feats = [], [], []
    for seed, lat_path in runs:
        # the pipeline's MTLCM seed: the second draw of its generator
        rng = check_random_state(seed)
        mtlcm_seed = int(rng.integers(0, 2**32 - 1, size=2)[1])
        F = np.load(lat_path)["features"].astype(np.float64)
        feats.append(F)
        kw = {"n_latents": args.latents, "sigma_obs": 1e-4}
        ref = MTLCM(random_state=mtlcm_seed, **kw).fit(F, Y)
        Z_ref = ref.transform(F)
        fits = [(ref.log_likelihood_, Z_ref, "study (jd)")]
        for k in range(args.starts):
            m = MTLCM(init="random", random_state=k, **kw).fit(F, Y)
            fits.append((m.log_likelihood_, m.transform(F), f"random start {k}"))
        m = MTLCM(n_init=10, random_state=mtlcm_seed, **kw).fit(F, Y)
        fits.append((m.log_likelihood_, m.transform(F), "jd, n_init=10"))
        print(os.path.basename(lat_path))
        for ll, Z, name in fits:
            agree = mcc(Z, Z_ref)
            print(f"  {name:16s} log-lik/sample {ll:.5f}  MCC to study {agree:.4f}")
        study_fits.append(Z_ref)
        best_fits.append(max(fits, key=lambda t: t[0])[1])
    cc = canonical_correlations(*feats)
    print("canonical correlations of the features:", np.round(cc, 4))
    print(f"cross-seed MCC x100, study fits: {100 * mcc(*study_fits):.2f}")
    print(f"cross-seed MCC x100, best-likelihood fits: {100 * mcc(*best_fits):.2f}")
    mixed = [(study_fits[0], best_fits[1]), (best_fits[0], study_fits[1])]
    print(
        "cross-seed MCC x100, study fit of one seed and best fit of the other: "
        + ", ".join(f"{100 * mcc(a, b):.2f}" for a, b in mixed)
    )


if __name__ == "__main__":
    main()
