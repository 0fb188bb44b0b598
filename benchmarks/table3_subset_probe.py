"""Does Table 3's baseline agreement depend on the training subset or on the seed?

Written for the study as it was until 2026-11-26, when it trained every baseline
on 3,000 materials drawn from the configuration including its seed index
(``derive_seed("table3-baseline-subset", *config.data_key())``), so two seeds
differed in their training materials as well as their initialisation. The study
now trains every seed on one subset (``chen2024_table3.baseline_materials``); this
probe keeps the old per-seed draw so that folders of that time can be checked. It
refits seeds 1.. of one model and latent size on seed 0's old materials (their own
model seeds, the study's settings) and scores every pair with the study's
cross-seed Pearson MCC, beside the stored pairs of a study folder of that time
(different subsets). Needs ``IDENTREP_DATA``; e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \\
        python benchmarks/table3_subset_probe.py --run results/table3 \\
        --model iVAE --d 5 --seeds 1 2
"""

from __future__ import annotations

import argparse
import glob
import itertools
import time

import numpy as np

from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies.chen2024_table3 import (
    BASELINE_SETTINGS,
    TABLE3_BASELINE_MATERIALS,
    grid,
    load_real_data,
)
from identrep.metrics import mcc
from identrep.utils.seeding import derive_seed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a table3 study folder (--out)")
    ap.add_argument("--model", default="iVAE")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    args = ap.parse_args(argv)
    configs = {
        c.seed: c
        for c in grid(seeds=max(args.seeds) + 1, models=(args.model,))
        if c.n_latents == args.d
    }
    data = load_real_data(configs[0])
    rng = np.random.default_rng(
        derive_seed("table3-baseline-subset", *configs[0].data_key())
    )
    sub = np.sort(
        rng.choice(len(data.X), size=TABLE3_BASELINE_MATERIALS, replace=False)
    )

    def stored(seed):
        (path,) = glob.glob(f"{args.run}/latents/{configs[seed].run_id}.npz")
        return np.load(path)["latents"].astype(float)

    same = {0: stored(0)}
    for s in args.seeds:
        t0 = time.process_time()
        model = chen.baseline_estimator(
            configs[s], configs[s].model_seed(), BASELINE_SETTINGS
        )
        model.fit(data.X[sub], data.Y[sub])
        same[s] = model.transform(data.X).astype(float)
        print(f"seed {s} on seed 0's materials: {time.process_time() - t0:.1f} CPU s")
    own = {s: stored(s) for s in same}
    for name, reps in (("own subsets (stored)", own), ("seed 0's subset", same)):
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


if __name__ == "__main__":
    main()
