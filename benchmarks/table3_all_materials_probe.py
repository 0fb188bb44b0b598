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

from pathlib import Path

import numpy as np

from _table3_probes import (
    print_agreement,
    probe_parser,
    refit,
    stored_latents,
    study_configs,
)
from identrep.experiments.studies.chen2024_table3 import load_real_data
from identrep.metrics import mcc


def main(argv=None):
    ap = probe_parser(__doc__.split("\n")[0], d=10, seeds=[0, 1])
    ap.add_argument(
        "--save", default=None, help="folder for the all-materials latents (npz)"
    )
    args = ap.parse_args(argv)
    if len(args.seeds) < 2:
        ap.error(f"--seeds needs two or more seeds to compare; got {args.seeds}.")
    configs = study_configs(args.model, args.d, args.seeds)
    data = load_real_data(configs[args.seeds[0]])

    subset = {s: stored_latents(args.run, configs[s]) for s in args.seeds}
    full = {}
    for s in args.seeds:
        model, cpu = refit(configs[s], data.X, data.Y)
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
            f"{cpu:.1f} CPU s, {len(hist['train_loss'])} "
            f"epochs, best epoch {hist['best_epoch']}",
            flush=True,
        )
    for name, reps in (("subset (stored)", subset), ("all materials", full)):
        print_agreement(args.model, args.d, name, reps)
    for s in args.seeds:
        print(
            f"seed {s}, subset against all materials: "
            f"{100 * mcc(subset[s], full[s], 'pearson'):.2f}"
        )


if __name__ == "__main__":
    main()
