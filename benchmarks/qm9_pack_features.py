"""Pack the MTRN features of a QM9 run folder into a few files for the trip home.

A GPU session returns at most 8 files of 16 MiB; the full-QM9 latents files hold
features and latents (130,831 x d float32 each). This keeps the features only (the
MTLCM latents are refitted from them, e.g. by ``qm9_mtlcm_restarts.py``) and writes
``features_d<d>_<k>.npz`` (compressed, one key per run id) with at most ``--per-file``
runs each, so that each file stays under the limit. ``--unpack`` reverses it into a
``latents/<run_id>.npz`` folder (features only) beside the records.

Usage::

    python benchmarks/qm9_pack_features.py RUN_FOLDER OUT_FOLDER [--per-file 2]
    python benchmarks/qm9_pack_features.py --unpack OUT_FOLDER RUN_FOLDER
"""

from __future__ import annotations

import argparse
import glob
import os
from collections import defaultdict

import numpy as np

from identrep.experiments import load_records
from identrep.experiments.io import latents_path


def pack(run: str, out: str, per_file: int) -> None:
    by_dim = defaultdict(list)
    for record in load_records(run):
        lat = latents_path(os.path.join(run, "latents"), record["run_id"])
        if lat.exists():
            by_dim[record["config"]["n_latents"]].append((record["run_id"], lat))
    for d, runs in sorted(by_dim.items()):
        for k in range(0, len(runs), per_file):
            chunk = runs[k : k + per_file]
            arrays = {rid: np.load(lat)["features"] for rid, lat in chunk}
            path = os.path.join(out, f"features_d{d}_{k // per_file}.npz")
            np.savez_compressed(path, **arrays)
            size = os.path.getsize(path) / 2**20
            print(f"{path}: {len(chunk)} run(s), {size:.1f} MiB")


def unpack(out: str, run: str) -> None:
    folder = os.path.join(run, "latents")
    os.makedirs(folder, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(out, "features_d*.npz"))):
        with np.load(path) as z:
            for rid in z.files:
                np.savez(latents_path(folder, rid), features=z[rid])
                print(latents_path(folder, rid))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--per-file", type=int, default=2)
    ap.add_argument("--unpack", action="store_true")
    args = ap.parse_args()
    if args.unpack:
        unpack(args.src, args.dst)
    else:
        pack(args.src, args.dst, args.per_file)


if __name__ == "__main__":
    main()
