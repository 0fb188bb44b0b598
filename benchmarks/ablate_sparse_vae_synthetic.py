"""Ablations of the Sparse VAE on the 7-feature process of Moran et al. (2022)
(docs/notes.md, "Sparse VAE at correlated factors").

The data, model seed and scores are those of the ``moran2022_synthetic`` study
(``make_data``, ``config.model_seed()``, DCI-D on 1,000 of the fresh points scored
on 1,000 more). One JSON line per fit: DCI-D, support F-score, exact support,
empty rows, held-out MSE (units of x) and CPU seconds. With ``--restarts R`` every
one of the R fits that ``SparseVAE(n_restarts=R)`` would make is scored, with its
training objective, so one sees which the restarts keep.

Usage::

    python benchmarks/ablate_sparse_vae_synthetic.py --rho 40 60 --seeds 0 1 \
        --set fix_head=true
    python benchmarks/ablate_sparse_vae_synthetic.py --rho 60 --seeds 0 \
        --set prior_corr=learned --restarts 4
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from identrep.experiments.studies.moran2022_synthetic import (
    SparseFactorConfig,
    make_data,
)
from identrep.metrics import (
    collapsed_rows,
    dci,
    feature_r2,
    match_latents,
    support_recovery,
)
from identrep.models.vae import SparseVAE
from identrep.utils.seeding import check_random_state


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def score(data, model) -> dict:
    Z_hat = model.transform(data.test.X)
    d = dci(data.test.Z, Z_hat, n_test=1000, random_state=0)["disentanglement"]
    sup = support_recovery(
        data.train.support, model.support_, matching=match_latents(data.test.Z, Z_hat)
    )
    recon = model.reconstruct(data.test.X)
    mse = float(np.mean((recon - data.test.X) ** 2))
    r2 = feature_r2(data.test.X, recon)
    return {
        "dci_d": round(float(d), 3),
        "support_f": round(float(sup["f_score"]), 2),
        "exact": int(sup["exact"]),
        "empty_rows": int(sup["empty_rows"]),
        "mse": round(mse, 3),
        "collapsed_rows": collapsed_rows(model.mask_),
        "min_feature_r2": round(float(r2.min()), 3),
        "feature_r2": np.round(r2, 3).tolist(),
        "mask": np.round(model.mask_, 4).tolist(),
        "inclusion": np.round(model.inclusion_, 3).tolist(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rho", type=int, nargs="+", default=[40, 60], help="rho x100")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument(
        "--from-restart",
        type=int,
        default=0,
        help="skip the restarts before this index (their seeds are still drawn)",
    )
    args = ap.parse_args()
    setting = dict(kv.split("=", 1) for kv in args.set)
    setting = {k: _value(v) for k, v in setting.items()}
    for rho in args.rho:
        for seed in args.seeds:
            config = SparseFactorConfig(model="Sparse VAE", rho_pct=rho, seed=seed)
            data, _ = make_data(config)
            seeds = [config.model_seed()]
            if args.restarts > 1:  # the seeds SparseVAE(n_restarts=R) draws
                rng = check_random_state(config.model_seed())
                seeds = rng.integers(0, 2**31 - 1, size=args.restarts).tolist()
            for r, model_seed in enumerate(seeds):
                if r < args.from_restart:
                    continue
                t0 = time.process_time()
                model = SparseVAE(2, random_state=int(model_seed), **setting)
                model.fit(data.train.X)
                row = {"rho_pct": rho, "seed": seed, "restart": r, **setting}
                row.update(score(data, model))
                row["objective"] = round(model.training_objective(data.train.X), 4)
                row["cpu_s"] = round(time.process_time() - t0, 1)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
