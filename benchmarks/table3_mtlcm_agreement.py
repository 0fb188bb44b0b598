"""Where Table 3's MTLCM agreement across seeds sits between its references.

For the MTLCM runs of a table3 study folder at one latent size, every pair of
seeds is scored (Pearson MCC x 100, the report's strong MCC) on:

- ``latents``: the MTLCM latents (the report's number);
- ``features``: the standardised MTRN features themselves, no unmixing (what a
  stage 2 that left its start at the identity would score);
- ``rotated``: each seed's features under its own random rotation (a stage 2
  that found nothing beyond MTRN's subspace), mean over ``--draws`` draws;
- ``weak``: the report's weak MCC (in-sample CCA, then Spearman MCC).

Run from the repository root, e.g.::

    PYTHONPATH=src python benchmarks/table3_mtlcm_agreement.py \\
        --run /work/runs/t3_mtlcm_d40 --d 40
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import ortho_group

from identrep.metrics import mcc, weak_mcc


def load(run: str, d: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Seed index -> (features, latents) of the MTLCM runs at ``d`` in ``run``."""
    out = {}
    for path in sorted(glob.glob(f"{run}/records/table3-MTLCM-d{d}-*.json")):
        rec = json.loads(Path(path).read_text(encoding="utf-8"))
        with np.load(f"{run}/latents/{rec['run_id']}.npz") as z:
            out[rec["config"]["seed"]] = (
                z["features"].astype(float),
                z["latents"].astype(float),
            )
    if len(out) < 2:
        raise FileNotFoundError(
            f"--run {run}: expected the records and latents of at least 2 MTLCM "
            f"seeds at d = {d}, found {len(out)}."
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a table3 study folder (--out)")
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--draws", type=int, default=3, help="random rotations per pair")
    args = ap.parse_args(argv)
    t0 = time.process_time()
    runs = load(args.run, args.d)
    rng = np.random.default_rng(0)
    cols = ("latents", "features", "rotated", "weak")
    rows = []
    for a, b in itertools.combinations(sorted(runs), 2):
        (fa, za), (fb, zb) = runs[a], runs[b]
        rot = [
            mcc(
                fa @ ortho_group.rvs(args.d, random_state=rng),
                fb @ ortho_group.rvs(args.d, random_state=rng),
            )
            for _ in range(args.draws)
        ]
        rows.append(
            (
                f"{a}-{b}",
                mcc(za, zb),
                mcc(fa, fb),
                float(np.mean(rot)),
                weak_mcc(fa, fb, method="spearman"),
            )
        )
    print(f"MTLCM d = {args.d}, {args.run}: Pearson MCC x100 per pair of seeds")
    print("| pair | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, *vals in rows:
        print(f"| {name} | " + " | ".join(f"{100 * v:.2f}" for v in vals) + " |")
    arr = 100 * np.array([r[1:] for r in rows])
    print(
        "| mean ± std | "
        + " | ".join(
            f"{m:.2f} ± {s:.2f}" for m, s in zip(arr.mean(0), arr.std(0), strict=True)
        )
        + " |"
    )
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
