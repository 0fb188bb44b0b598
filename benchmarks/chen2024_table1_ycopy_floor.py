"""Per-task Spearman MCC that a latent equal to the target gives on Table 1's data
(Chen et al., 2024; issue 13, the iVAE cell at k = 4, d = 5).

The paper's iVAE sits 16-19 points above chance at exactly the two
configurations with one spurious latent (k = 2, d = 3 and k = 4, d = 5). A
spurious latent is, within its task, the target plus a little noise, so an
encoder that copies y into one coordinate matches it in every task. This prints,
for each configuration and the study's five data seeds, the per-task MCC (the
table's metric) of

- chance: d random Gaussian linear maps of x;
- y-copy: the same with the first coordinate replaced by y.

Run from the repository root (about a minute)::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/chen2024_table1_ycopy_floor.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from identrep.experiments.studies import chen2024_table1 as t1
from identrep.metrics import mcc_per_task

CONFIGS = ((2, 3), (4, 5), (2, 5), (4, 10), (2, 10))


def main() -> None:
    base = t1.grid(seeds=5, models=("iVAE",))[0]
    for k, d in CONFIGS:
        scores = []
        for seed in range(5):
            cfg = dataclasses.replace(
                base, n_causal=k, n_latents=d, n_observed=d, seed=seed
            )
            data, _ = t1.make_data(cfg)
            rng = np.random.default_rng(seed)
            R = data.X @ rng.standard_normal((d, d))
            Y = R.copy()
            Y[:, 0] = data.y
            scores.append(
                (
                    mcc_per_task(data.Z, R, data.task_ids),
                    mcc_per_task(data.Z, Y, data.task_ids),
                )
            )
        s = 100 * np.array(scores)
        print(
            f"k={k} d={d}: chance {s[:, 0].mean():.2f} ± {s[:, 0].std():.2f}, "
            f"y-copy {s[:, 1].mean():.2f} ± {s[:, 1].std():.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
