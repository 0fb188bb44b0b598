"""Does Table 3's baseline agreement across seeds depend on training on a subset?

The study trains every baseline on one subset of
``chen2024_table3.TABLE3_BASELINE_MATERIALS`` (3,000) materials; the paper
mentions no subsampling, so it may train on all 21,263. This probe refits the
given seeds of one model and latent size on ALL materials, with the study's own
estimator, settings (``BASELINE_SETTINGS``: 10 epochs, batch 1,024) and model
seeds, and scores every pair of seeds with the study's Pearson MCC, beside the
same pairs of a study folder trained on the subset (its stored latents). The
epoch budget is the study's, so the all-materials fits take about 7 times more
gradient steps as well. The study's default is not changed. Needs
``IDENTREP_DATA``; e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \\
        python benchmarks/table3_all_materials_probe.py --run results/table3 \\
        --model iVAE --d 10 --seeds 0 1
"""

from __future__ import annotations

import argparse
import glob
import itertools
import time
from pathlib import Path

import numpy as np

from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies.chen2024_table3 import (
    BASELINE_SETTINGS,
    grid,
    load_real_data,
)
from identrep.metrics import mcc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a table3 study folder (--out)")
    ap.add_argument("--model", default="iVAE")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument(
        "--save", default=None, help="folder for the all-materials latents (npz)"
    )
    args = ap.parse_args(argv)
    if len(args.seeds) < 2:
        ap.error(f"--seeds needs two or more seeds to compare; got {args.seeds}.")
    configs = {
        c.seed: c
        for c in grid(seeds=max(args.seeds) + 1, models=(args.model,))
        if c.n_latents == args.d
    }
    data = load_real_data(configs[args.seeds[0]])

    def stored(seed):
        paths = glob.glob(f"{args.run}/latents/{configs[seed].run_id}.npz")
        if len(paths) != 1:
            raise FileNotFoundError(
                f"--run {args.run}: expected the latents of {configs[seed].run_id}, "
                f"found {len(paths)} file(s)."
            )
        return np.load(paths[0])["latents"].astype(float)

    subset = {s: stored(s) for s in args.seeds}
    full = {}
    for s in args.seeds:
        t0 = time.process_time()
        model = chen.baseline_estimator(
            configs[s], configs[s].model_seed(), BASELINE_SETTINGS
        )
        model.fit(data.X, data.Y)
        # stored as the study stores its latents (float32), then scored in float
        z32 = model.transform(data.X).astype(np.float32)
        full[s] = z32.astype(float)
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(
                Path(args.save) / f"{configs[s].run_id}-all.npz", latents=z32
            )
        hist = model.history_
        print(
            f"seed {s} on all {len(data.X)} materials: "
            f"{time.process_time() - t0:.1f} CPU s, {len(hist['train_loss'])} "
            f"epochs, best epoch {hist['best_epoch']}",
            flush=True,
        )
    for name, reps in (("subset (stored)", subset), ("all materials", full)):
        pairs = {
            (a, b): 100 * mcc(reps[a], reps[b], "pearson")
            for a, b in itertools.combinations(sorted(reps), 2)
        }
        vals = np.array(list(pairs.values()))
        shown = ", ".join(f"{a}-{b} {v:.2f}" for (a, b), v in pairs.items())
        print(
            f"{args.model} d={args.d}, {name}: {vals.mean():.2f} ± {vals.std():.2f} "
            f"({shown})"
        )
    for s in args.seeds:
        print(
            f"seed {s}, subset against all materials: "
            f"{100 * mcc(subset[s], full[s], 'pearson'):.2f}"
        )


if __name__ == "__main__":
    main()
