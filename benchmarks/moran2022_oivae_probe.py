"""OI-VAE on Table 4 of Moran et al. (2022): how the group-lasso weight changes
the factors the cell-type classifier sees.

For one split of the Table 4 study (its data, settings and model seed), fits the
study's OI-VAE at each ``--lasso`` value of ``group_lasso`` (the study uses the
class default, 1) and prints, per value: the cell-type accuracy (the study's
classifier), the fraction of group-latent links that the prox left at exactly
0, how many latents still feed at least one group, how many latents are active
(mean KL(q(z_k | x) || N(0, 1)) over the training cells above 0.01 nats), and
the CPU seconds of the fit. At ``--lasso 1`` the accuracy is the study's record
for that split and epoch budget (same seed, same number). ``--model VAE`` prints
the same statistics for the study's VAE (no links) for reference.

Usage (data home with zeisel2015)::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \
        python benchmarks/moran2022_oivae_probe.py --epochs 20 --lasso 1,10,100
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from identrep.experiments.studies import _moran2022 as mo
from identrep.experiments.studies import moran2022_table4 as t4

ACTIVE_KL = 0.01  # nats: a latent with less mean KL carries (almost) nothing


def latent_kl(est, X) -> np.ndarray:
    """Mean over rows of KL(q(z_k | x) || N(0, 1)) for every latent k."""
    mean, var = est.encode(X)
    return 0.5 * (mean**2 + var - 1.0 - np.log(var)).mean(axis=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--lasso", default="1,10,100")
    ap.add_argument("--model", default="OIVAE", choices=("OIVAE", "VAE"))
    args = ap.parse_args()
    cfg = t4.grid(seeds=args.split + 1, models=(args.model,), max_epochs=args.epochs)
    cfg = next(c for c in cfg if c.seed == args.split)
    split, _ = t4.make_data(cfg)
    lassos = [float(v) for v in args.lasso.split(",")]
    if args.model == "VAE":
        lassos = [None]
    print(f"table4 {cfg.describe()} model={args.model} epochs={args.epochs}")
    print("group_lasso  accuracy  zero_links  latents_linked  active_latents  cpu_s")
    for lam in lassos:
        est = mo.make_estimator(cfg, cfg.model_seed(), "gaussian")
        if lam is not None:
            est.set_params(group_lasso=lam)
        t0 = time.process_time()
        est.fit(split.X_train)
        cpu = time.process_time() - t0
        acc = t4.cell_type_accuracy(
            est.transform(split.X_train),
            split.y_train,
            est.transform(split.X_test),
            split.y_test,
        )
        kl = latent_kl(est, split.X_train)
        active = int((kl > ACTIVE_KL).sum())
        if lam is None:
            zero, linked = "-", "-"
        else:
            norms = est.group_norms_
            zero = f"{float((norms == 0).mean()):.3f}"
            linked = str(int((norms > 0).any(axis=0).sum()))
        label = "-" if lam is None else f"{lam:g}"
        print(
            f"{label:>11}  {100 * acc:8.2f}  {zero:>10}  {linked:>14}  "
            f"{active:>14}  {cpu:5.1f}"
        )
        ranked = np.array2string(np.sort(kl)[::-1], precision=2)
        print(f"    per-latent KL (nats), largest first: {ranked}")


if __name__ == "__main__":
    main()
