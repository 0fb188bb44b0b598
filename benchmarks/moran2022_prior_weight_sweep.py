"""Sparse VAE prior weight on the real-data tables of Moran et al. (2022),
chosen on a validation split carved from the training split (never the test
rows, which are only reported beside it).

For one split of Table 2 (high shift) or Table 4, fits the table's Sparse VAE
(its study settings, ``--epochs`` epochs) on 80% of the training rows at each
``--weights`` value of ``prior_weight`` and prints, per weight, the
reconstruction NLL (one sampled z) on those rows, on the remaining 20%
(validation, same distribution as training) and on the table's test rows; for
Table 4 also the cell-type accuracy (logistic regression fitted on the 80%).
``--model`` fits another estimator of the table instead (``--beta`` for the
beta-VAE: one value or a comma-separated list, one fit each), for reference or
to choose the beta-VAE's KL weight on the validation rows. ``--kl-weight`` sets
the Sparse VAE's ``kl_weight`` (the weight of its KL term; the authors' loss
scaling is 1/K, the tables' ``SVAE_KL1overK`` row; the class default 1 is the
unweighted ELBO).

Usage (data home with ml_abstracts / zeisel2015)::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \
        python benchmarks/moran2022_prior_weight_sweep.py table2 --epochs 10 \
        --weights 1,10,50
"""

from __future__ import annotations

import argparse

import numpy as np

from _moran2022_probes import fit_and_score, validation_rows
from identrep.experiments.studies import _moran2022 as mo


def _config(table: str, model: str, epochs: int):
    if table == "table2":
        from identrep.experiments.studies import moran2022_table2 as t

        cfgs = t.grid(seeds=1, models=(model,), max_epochs=epochs)
        cfg = next(c for c in cfgs if c.sigma_pct == t.SHIFTS["high"])
    elif table == "table4":
        from identrep.experiments.studies import moran2022_table4 as t

        cfg = t.grid(seeds=1, models=(model,), max_epochs=epochs)[0]
    else:
        raise ValueError(f"table must be 'table2' or 'table4'; got {table!r}.")
    return t, cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table", choices=("table2", "table4"))
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--weights", default="1,10,50")
    ap.add_argument("--model", default="SparseVAE")
    ap.add_argument("--beta", default=None)
    ap.add_argument("--kl-weight", type=float, default=None)
    args = ap.parse_args()
    if args.kl_weight is not None and args.model != "SparseVAE":
        raise ValueError(
            f"--kl-weight sets the Sparse VAE's kl_weight; got --model {args.model} "
            "(use --beta for the beta-VAE)."
        )
    t, cfg = _config(args.table, args.model, args.epochs)
    split, _ = t.make_data(cfg)
    fit_rows, val = validation_rows(split.X_train.shape[0], cfg)
    X_fit, X_val = split.X_train[fit_rows], split.X_train[val]
    likelihood = "categorical" if args.table == "table2" else "gaussian"
    weights = (
        [float(w) for w in args.weights.split(",")]
        if args.model == "SparseVAE"
        else [None]
    )
    betas = [None] if args.beta is None else [float(b) for b in args.beta.split(",")]
    print(
        f"{args.table} {cfg.describe()} model={args.model} epochs={args.epochs} "
        f"fit rows={X_fit.shape[0]} validation={X_val.shape[0]} "
        f"test={split.X_test.shape[0]}"
    )
    for w, beta in ((w, b) for w in weights for b in betas):
        est = mo.make_estimator(cfg, cfg.model_seed(), likelihood)
        if w is not None:
            est.set_params(prior_weight=w)
        if args.kl_weight is not None:
            est.set_params(kl_weight=args.kl_weight)
        if beta is not None:
            est.set_params(beta=beta)
        line = (
            f"weight={w} beta={getattr(est, 'beta', None)} "
            f"kl_weight={getattr(est, 'kl_weight', None)} "
            + fit_and_score(est, X_fit, X_val, split.X_test)
        )
        if args.table == "table4":
            y_fit, y_val = split.y_train[fit_rows], split.y_train[val]
            Z_fit = est.transform(X_fit)
            acc_val = t.cell_type_accuracy(Z_fit, y_fit, est.transform(X_val), y_val)
            acc_te = t.cell_type_accuracy(
                Z_fit, y_fit, est.transform(split.X_test), split.y_test
            )
            line += f" accuracy val={100 * acc_val:.1f} test={100 * acc_te:.1f}"
        if hasattr(est, "inclusion_"):
            line += f" mean inclusion={float(np.mean(est.inclusion_)):.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
