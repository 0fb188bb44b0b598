"""Is the OI-VAE row of a Moran et al. (2022) count table more than item popularity?

Refits the study's OI-VAE row (same splits, data, model seed and budget as
``identrep reproduce``) and prints, per split: the links W keeps (nonzero of
features x latents), the row's held-out NLL, the NLL of the popularity baseline
(every test row scored with the training rows' word or item frequencies, the
same +1e-6 as the authors' NLL) and, on Table 1a, the same-rows Recall@5 and
NDCG@10 of both (the authors' protocol, the paper's columns). An OI-VAE whose
decoder ignores z scores what the popularity baseline scores.

Usage (data home with movielens / ml_abstracts)::

    IDENTREP_DATA=/work/shared/data OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/moran2022_oivae_popularity.py moran2022_table1a --splits 0 1 2
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import scipy.sparse as sp

from _moran2022_probes import dense, item_frequencies, popularity_nll
from identrep.experiments import get_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.metrics import ndcg_at_k, ranking_split, recall_at_k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--splits", nargs="+", type=int, default=[0])
    args = ap.parse_args()
    module = importlib.import_module(f"identrep.experiments.studies.{args.table}")
    grid = get_study(args.table).grid(seeds=max(args.splits) + 1, models=["OIVAE"])
    for cfg in (c for c in grid if c.seed in args.splits):
        split, _ = module.make_data(cfg)
        est, _ = mo.fit_estimator(
            cfg, split, cfg.model_seed(), "categorical", needs=("heldout_nll",)
        )
        Xte = dense(split.X_test)
        freq = item_frequencies(split.X_train)
        pop = popularity_nll(split.X_train, split.X_test)
        line = (
            f"{cfg.table} sigma_pct={cfg.sigma_pct} split={cfg.seed} "
            f"links={int((est.group_norms_ > 0).sum())}/{est.group_norms_.size} "
            f"nll={mo.heldout_nll(est, split.X_test):.2f} popularity_nll={pop:.2f}"
        )
        if cfg.table == "moran2022_table1a":
            inputs, targets, _ = ranking_split(Xte, protocol="same_rows")
            rows = np.flatnonzero(targets.sum(axis=1) > 0)
            t = targets[rows]
            scores = {
                "oivae": mo.predict_scores(
                    est, sp.csr_matrix(inputs[rows], dtype=np.float32)
                ),
                "popularity": np.tile(freq, (len(rows), 1)),
            }
            for name, s in scores.items():
                r = recall_at_k(s, t, k=5)
                n = ndcg_at_k(s, t, k=10)
                line += f" {name}_recall5={r:.4f} {name}_ndcg10={n:.4f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
