"""Does Table 3's baseline agreement across seeds depend on the training set's
size or on the number of gradient steps?

The study trains every baseline on one subset of
``chen2024_table3.TABLE3_BASELINE_MATERIALS`` (3,000) materials; the paper
mentions no subsampling, so it may train on all 21,263. This probe refits the
given seeds of one model and latent size with the study's own estimator,
settings (``BASELINE_SETTINGS``: 10 epochs, batch 1,024) and model seeds, on
``--materials`` (``all``, the default, or the study's ``subset``), and scores
every pair of seeds with the study's Pearson MCC, beside the same pairs of a
study folder trained on the subset (its stored latents).

At the study's 10 epochs (``--steps epochs``, the default) a fit on all
materials takes 7.1 times more gradient steps (1,496 a pass against 211), so
size and steps are confounded. ``--steps subset`` / ``--steps all`` train for 10
chunks of the steps of one pass over the subset / over all materials instead
(validated, and the best chunk restored, as after an epoch;
``identrep.training.StepBatches``): ``--materials all --steps subset`` is all
materials on the subset fit's 2,110 steps, ``--materials subset --steps all``
the subset on the all-materials fit's 14,960 steps (about 71 passes).
``--materials subset --steps subset`` (or ``epochs``) is the study's own fit.
The study's default is not changed. ``--save`` keeps each fit's latents and
reuses them when the file is already there. Needs ``IDENTREP_DATA``; e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \\
        python benchmarks/table3_all_materials_probe.py --run results/table3 \\
        --model iVAE --d 10 --seeds 0 1 --materials subset --steps all
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from _table3_probes import (
    print_agreement,
    probe_parser,
    refit,
    steps_per_epoch,
    stored_latents,
    study_configs,
)
from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies.chen2024_table3 import (
    BASELINE_SETTINGS,
    baseline_materials,
    load_real_data,
)
from identrep.metrics import mcc

NAMES = {"all": "all materials", "subset": "the subset"}


def main(argv=None):
    ap = probe_parser(__doc__.split("\n")[0], d=10, seeds=[0, 1])
    ap.add_argument("--materials", choices=("all", "subset"), default="all")
    ap.add_argument(
        "--steps",
        choices=("epochs", "subset", "all"),
        default="epochs",
        help="the study's epochs over --materials, or 10 chunks of the steps "
        "of one pass over the subset / all materials",
    )
    ap.add_argument(
        "--save",
        default=None,
        help="folder for the fits' latents (npz); a file already there is reused",
    )
    args = ap.parse_args(argv)
    if len(args.seeds) < 2:
        ap.error(f"--seeds needs two or more seeds to compare; got {args.seeds}.")
    configs = study_configs(args.model, args.d, args.seeds)
    data = load_real_data(configs[args.seeds[0]])
    sub = baseline_materials(configs[args.seeds[0]], len(data.X))
    rows = sub if args.materials == "subset" else np.arange(len(data.X))
    X, Y = data.X[rows], data.Y[rows]

    steps = None
    if args.steps != "epochs":
        unfitted = chen.baseline_estimator(configs[args.seeds[0]], 0, BASELINE_SETTINGS)
        ref = data.Y[sub] if args.steps == "subset" else data.Y
        steps = steps_per_epoch(unfitted, ref)
    budget = (
        f"{BASELINE_SETTINGS['max_epochs']} epochs"
        if steps is None
        else f"{BASELINE_SETTINGS['max_epochs']} x {steps} steps ({args.steps})"
    )
    label = f"{NAMES[args.materials]}, {budget}"
    tag = (
        "all"  # the name this probe gave its only setting at first
        if (args.materials, args.steps) == ("all", "epochs")
        else f"{args.materials}-steps-{args.steps}"
    )

    subset = {s: stored_latents(args.run, configs[s]) for s in args.seeds}
    fits = {}
    for s in args.seeds:
        path = Path(args.save or ".") / f"{configs[s].run_id}-{tag}.npz"
        if args.save and path.exists():
            fits[s] = np.load(path)["latents"].astype(float)
            print(f"seed {s}: reused {path}", flush=True)
            continue
        model, cpu = refit(configs[s], X, Y, steps)
        # stored as the study stores its latents (float32), then scored in float
        z32 = model.transform(data.X).astype(np.float32)
        fits[s] = z32.astype(float)
        if args.save:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(path, latents=z32)
        hist = model.history_
        chunks = (
            ""
            if steps is None
            else f" of {steps} steps ({model.natural_steps_} a pass, "
            f"{model.passes_} passes started)"
        )
        print(
            f"seed {s} on {NAMES[args.materials]} ({len(X)}): {cpu:.1f} CPU s, "
            f"{len(hist['train_loss'])} epochs{chunks}, best epoch "
            f"{hist['best_epoch']}",
            flush=True,
        )
    for name, reps in (("subset, 10 epochs (stored)", subset), (label, fits)):
        print_agreement(args.model, args.d, name, reps)
    for s in args.seeds:
        print(
            f"seed {s}, stored subset fit against {label}: "
            f"{100 * mcc(subset[s], fits[s], 'pearson'):.2f}"
        )


if __name__ == "__main__":
    main()
