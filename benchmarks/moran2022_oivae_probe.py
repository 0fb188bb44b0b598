"""OI-VAE on Tables 4 and 2 of Moran et al. (2022): how the group-lasso weight
changes the factors and the score, and which weight a validation split prefers.

For one split of the Table 4 study (Zeisel, cell-type accuracy) or the Table 2
study (``--shift``, held-out NLL), fits the study's OI-VAE (its data, settings and
model seed) at each ``--lasso`` value of ``group_lasso`` and prints, per value:
the score (Table 4: cell-type accuracy x100 with the study's classifier; Table 2:
the held-out NLL), the fraction of group-latent links at exactly 0, how many
latents still feed at least one group, how many latents are active (mean
KL(q(z_k | x) || N(0, 1)) over the training rows above 0.01 nats), and the CPU
seconds of the fit.

``--w-optimizer adam`` is the earlier training (W in the networks' Adam); at
``--lasso 1`` it gives the Adam-variant study records (same seed, same number).
``--lr-w`` (one value or a comma list, swept) and ``--generator-l2`` set the
proximal-SGD training's other settings (default: the class defaults).
``--w-init-scales 1,2`` fits every setting from each initial scale of W (the
same draws scaled) and prints, against the first scale, the share of links
whose zero/non-zero status agrees and the Jaccard index of the two zero sets:
a support set by the data, not the initial magnitudes, agrees across scales.
Latents may swap between fits, so it also prints the Jaccard index after
matching each latent to the first scale's (the assignment maximising the summed
|correlation| of the encoder means on the fit rows) and that mean |correlation|.
``--validation`` fits on 80% of the training rows instead and prints the
scores on the other 20% (seeded, same distribution; the settings are chosen
on these) beside the test rows' (printed, never used to choose); Table 4
then also prints the validation NLL.

Usage (data home with zeisel2015 / ml_abstracts)::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \\
        python benchmarks/moran2022_oivae_probe.py --epochs 100 --lasso 0.1,1,10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import linear_sum_assignment

from _moran2022_probes import validation_rows
from identrep.experiments.studies import _moran2022 as mo

ACTIVE_KL = 0.01  # nats: a latent with less mean KL carries (almost) nothing


def latent_kl(est, X) -> np.ndarray:
    """Mean over rows of KL(q(z_k | x) || N(0, 1)) for every latent k."""
    mean, var = est.encode(mo.as_input(est, X))
    return 0.5 * (mean**2 + var - 1.0 - np.log(var)).mean(axis=0)


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


def _study(table: str, shift: str, epochs: int, split: int):
    if table == "table4":
        from identrep.experiments.studies import moran2022_table4 as t

        cfgs = t.grid(seeds=split + 1, models=("OIVAE",), max_epochs=epochs)
        return t, next(c for c in cfgs if c.seed == split), "gaussian"
    from identrep.experiments.studies import moran2022_table2 as t

    cfgs = t.grid(seeds=split + 1, models=("OIVAE",), max_epochs=epochs)
    sig = t.SHIFTS[shift]
    cfg = next(c for c in cfgs if c.seed == split and c.sigma_pct == sig)
    return t, cfg, "categorical"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", default="table4", choices=("table4", "table2"))
    ap.add_argument("--shift", default="high", choices=("high", "medium", "low"))
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--lasso", default="1,10,100")
    ap.add_argument("--w-optimizer", default="sgd", choices=("sgd", "adam"))
    ap.add_argument("--lr-w", default=None, help="one value or a comma list")
    ap.add_argument("--w-init-scales", default="1")
    ap.add_argument("--generator-l2", type=float, default=None)
    ap.add_argument("--validation", action="store_true")
    args = ap.parse_args()
    t, cfg, likelihood = _study(args.table, args.shift, args.epochs, args.split)
    split, _ = t.make_data(cfg)
    X_fit, X_val, y_fit, y_val = split.X_train, None, split.y_train, None
    if args.validation:
        rows, val = validation_rows(split.X_train.shape[0], cfg)
        X_fit, X_val = split.X_train[rows], split.X_train[val]
        if split.y_train is not None:
            y_fit, y_val = split.y_train[rows], split.y_train[val]
    print(
        f"{args.table} {cfg.describe()} OIVAE epochs={args.epochs} "
        f"w_optimizer={args.w_optimizer} lr_w={args.lr_w} "
        f"generator_l2={args.generator_l2} fit rows={X_fit.shape[0]}"
        + (f" validation={X_val.shape[0]}" if X_val is not None else "")
    )
    score = "accuracy" if args.table == "table4" else "NLL"
    head = f"group_lasso  {score}_test"
    if X_val is not None:
        head += f"  {score}_val" + ("  NLL_val" if args.table == "table4" else "")
    print(
        "lr_w  w_init_scale  " + head + "  zero_links  latents_linked  "
        "active_latents  cpu_s  agree_vs_first_scale  jaccard_zero_sets  "
        "jaccard_matched  matched_abs_corr"
    )
    lrs = [None] if args.lr_w is None else [float(v) for v in args.lr_w.split(",")]
    scales = [float(v) for v in args.w_init_scales.split(",")]
    settings = [
        (float(lam), lr, sc)
        for lam in args.lasso.split(",")
        for lr in lrs
        for sc in scales
    ]
    first_zero = None
    for lam, lr_w, scale in settings:
        est = mo.make_estimator(cfg, cfg.model_seed(), likelihood)
        est.set_params(
            group_lasso=lam, w_optimizer=args.w_optimizer, w_init_scale=scale
        )
        if lr_w is not None:
            est.set_params(lr_w=lr_w)
        if args.generator_l2 is not None:
            est.set_params(generator_l2=args.generator_l2)
        t0 = time.process_time()
        est.fit(mo.as_input(est, X_fit))
        cpu = time.process_time() - t0
        cols = []
        if args.table == "table4":
            Z_fit = est.transform(X_fit)
            acc = t.cell_type_accuracy(
                Z_fit, y_fit, est.transform(split.X_test), split.y_test
            )
            cols.append(f"{100 * acc:8.2f}")
            if X_val is not None:
                acc_v = t.cell_type_accuracy(Z_fit, y_fit, est.transform(X_val), y_val)
                cols.append(f"{100 * acc_v:8.2f}")
                cols.append(f"{mo.heldout_nll(est, X_val):9.2f}")
        else:
            cols.append(f"{mo.heldout_nll(est, split.X_test):8.2f}")
            if X_val is not None:
                cols.append(f"{mo.heldout_nll(est, X_val):8.2f}")
        norms = est.group_norms_
        is_zero = norms == 0
        zero = float(is_zero.mean())
        z_mean, _ = est.encode(mo.as_input(est, X_fit))
        if scale == scales[0]:
            first_zero, first_z = is_zero, z_mean
        agree = float((is_zero == first_zero).mean())
        jac = _jaccard(is_zero, first_zero)
        k = z_mean.shape[1]
        corr = np.nan_to_num(np.corrcoef(first_z.T, z_mean.T)[:k, k:])
        row, col = linear_sum_assignment(-np.abs(corr))
        jac_m = _jaccard(is_zero[:, col], first_zero[:, row])
        abs_corr = float(np.abs(corr[row, col]).mean())
        linked = int((norms > 0).any(axis=0).sum())
        kl = latent_kl(est, X_fit)
        active = int((kl > ACTIVE_KL).sum())
        print(
            f"{est.lr_w:g}  {scale:g}  {lam:>11g}  "
            + "  ".join(cols)
            + f"  {zero:10.3f}  {linked:>14}  {active:>14}  {cpu:5.1f}"
            f"  {agree:.3f}  {jac:.3f}  {jac_m:.3f}  {abs_corr:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
