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

import numpy as np

from _table3_probes import (
    print_agreement,
    probe_parser,
    refit,
    stored_latents,
    study_configs,
)
from identrep.experiments.studies.chen2024_table3 import (
    TABLE3_BASELINE_MATERIALS,
    load_real_data,
)
from identrep.utils.seeding import derive_seed


def main(argv=None):
    args = probe_parser(__doc__.split("\n")[0], d=5, seeds=[1, 2]).parse_args(argv)
    configs = study_configs(args.model, args.d, args.seeds)
    data = load_real_data(configs[0])
    rng = np.random.default_rng(
        derive_seed("table3-baseline-subset", *configs[0].data_key())
    )
    sub = np.sort(
        rng.choice(len(data.X), size=TABLE3_BASELINE_MATERIALS, replace=False)
    )

    same = {0: stored_latents(args.run, configs[0])}
    for s in args.seeds:
        model, cpu = refit(configs[s], data.X[sub], data.Y[sub])
        same[s] = model.transform(data.X).astype(float)
        print(f"seed {s} on seed 0's materials: {cpu:.1f} CPU s")
    own = {s: stored_latents(args.run, configs[s]) for s in same}
    for name, reps in (("own subsets (stored)", own), ("seed 0's subset", same)):
        print_agreement(args.model, args.d, name, reps)


if __name__ == "__main__":
    main()
