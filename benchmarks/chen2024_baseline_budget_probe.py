"""Does the epoch cap hold a baseline row of Tables 1 or 2 back (Chen et al., 2024)?

Refits the study's runs of one baseline (``identrep reproduce table1 --models
iVAE``, or ``table2``: the same data and model seeds, the study's encoder, early
stopping on a 10 % validation split) with each epoch cap given, and prints the
per-task Spearman MCC (the tables' column), the pooled MCC, the best epoch and
the CPU seconds of every fit (``best_epoch`` is 0-based, as in the records: 99 is
the 100th epoch). At the study's cap (Table 1: 100 epochs, Table 2's
baselines: 30) it reproduces the stored records. A configuration is ``K,D``
(causal latents, latents) for Table 1 and ``K,P`` (causal latents, observed
dimension) for Table 2. ``--patience none`` refits without early stopping (the
refits' lines then end with ``patience=none``); ``--set PARAM=VALUE ...``
sets further estimator parameters on the refits (e.g. the multi-task rows'
``whiten=zca decoder_var=learned lr=0.01`` on the single-task iVAE). Used
for docs/notes.md, "Coordinator, stop 29" (Table 1, iVAE at k = 4, d = 5),
"Coordinator, stop 30" (Table 2, iVAE at k = 4, p = 50), "Coordinator, stop
31" (Table 2, cap 300 and no early stopping) and "Coordinator, stop 32" (Table
1, iVAE with the multi-task rows' settings). ``--icarl-hessian row-sums``
refits iCaRL / MT-iCaRL with the score-matching defect of a public NF-iVAE
re-implementation (the Hessian's row sums for its diagonal, see
``_icarl_defects.py``; the lines then end with ``hessian=row-sums``), used
for "Coordinator, stop 44" (Table 1, the iCaRL rows above the paper), where
``--caps 1 --set lr=1e-9`` also scored the untrained encoders of Tables 1 and 2.
``--icarl-elbo-prior undetached`` lets the ELBO's unnormalised prior term train
the prior too (a joint update without the stop-gradient, ``_icarl_defects.py``;
lines end with ``elbo_prior=undetached``), used for "Coordinator, stop 45".
``--icarl-phases N`` trains iCaRL's two parts in turn, N epochs of the ELBO
term then N of score matching (``_icarl_defects.use_alternating_phases``; lines
end with ``phases=N``), used for "Coordinator, stop 47".
``--latent-stats`` adds a line per fit on how many latents are in use (after
Burda et al., 2016: a latent is active when the variance over the samples of
its encoder mean exceeds 0.01; the posterior variance is the encoder's, averaged
over the samples), to tell variational overpruning apart.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/chen2024_baseline_budget_probe.py \\
        --configs 4,5 2,5 --caps 100 400
    OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/chen2024_baseline_budget_probe.py --study table2 \\
        --configs 4,50 --caps 30 100 --where seed=0
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from _icarl_defects import (
    ELBO_PRIOR_CHOICES,
    HESSIAN_CHOICES,
    use_alternating_phases,
    use_hessian_row_sums,
    use_undetached_elbo_prior,
)
from _probe_params import parse_params
from identrep.experiments import get_study
from identrep.experiments.studies import _chen2024 as chen

#: The second number of a configuration, per study.
SECOND = {"table1": ("n_latents", "d"), "table2": ("n_observed", "p")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", choices=sorted(SECOND), default="table1")
    ap.add_argument("--model", default="iVAE")
    ap.add_argument("--configs", nargs="+", default=["4,5"], metavar="K,D")
    ap.add_argument("--caps", nargs="+", type=int, default=[100, 400])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--where", default=None, metavar="seed=S", help="only this seed (seed=S)"
    )
    ap.add_argument(
        "--patience",
        default=None,
        metavar="N|none",
        help="early-stopping patience of the refits (default: the study's; 'none': "
        "train every epoch of the cap, keeping the best validation epoch)",
    )
    ap.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="PARAM=VALUE",
        help="estimator parameters of the refits on top of the study's, e.g. "
        "whiten=zca decoder_var=learned lr=0.01 (true/false as booleans, none as "
        "None, integers as ints, other numbers as floats, a,b,c as a tuple; a "
        "name that is not a hyperparameter of the estimator, such as whiten on "
        "IVAE, is set as an attribute, which BaseVAE._whitening reads)",
    )
    ap.add_argument(
        "--icarl-hessian",
        choices=HESSIAN_CHOICES,
        default="diagonal",
        help="second-order term of iCaRL's score matching: 'diagonal' (identrep's, "
        "exact) or 'row-sums' (the defect of a public re-implementation)",
    )
    ap.add_argument(
        "--icarl-elbo-prior",
        choices=ELBO_PRIOR_CHOICES,
        default="detached",
        help="the ELBO's unnormalised prior term: 'detached' (identrep's: it trains "
        "the encoder and decoder only) or 'undetached' (it trains the prior too, "
        "a joint update without the stop-gradient)",
    )
    ap.add_argument(
        "--icarl-phases",
        type=int,
        default=None,
        metavar="N",
        help="train iCaRL's ELBO and score-matching terms in turn, N epochs each, "
        "ELBO first (default: jointly, as identrep does)",
    )
    ap.add_argument(
        "--latent-stats",
        action="store_true",
        help="after each fit, print the active latents (variance of the encoder "
        "mean over the samples above 0.01) and the mean posterior variance",
    )
    args = ap.parse_args()
    if args.icarl_hessian == "row-sums":
        use_hessian_row_sums()
    if args.icarl_elbo_prior == "undetached":
        use_undetached_elbo_prior()
    if args.icarl_phases is not None:
        use_alternating_phases(args.icarl_phases)
    overrides = parse_params(args.set, "--set")
    if args.patience is not None:
        overrides["patience"] = None if args.patience == "none" else int(args.patience)
    build = chen.baseline_estimator
    last = []  # the estimator of the latest fit, for --latent-stats

    def probe_estimator(*a, **kw):
        est = build(*a, **kw)
        if overrides:
            known = est.get_params()
            est.set_params(**{k: v for k, v in overrides.items() if k in known})
            for k, v in overrides.items():  # e.g. whiten on the single-task IVAE,
                if k not in known:  # read by BaseVAE._whitening where present
                    setattr(est, k, v)
        last[:] = [est]
        return est

    chen.baseline_estimator = probe_estimator  # looked up by baseline_fit's fit
    tag = "".join(f" {k}={v}" for k, v in overrides.items() if k != "patience")
    field, letter = SECOND[args.study]
    want = [tuple(int(v) for v in c.split(",")) for c in args.configs]
    only = None if args.where is None else int(args.where.split("=", 1)[1])
    study = get_study(args.study)
    for config in study.grid(seeds=args.seeds, models=(args.model,)):
        if (config.n_causal, getattr(config, field)) not in want:
            continue
        if only is not None and config.seed != only:
            continue
        data, _ = study.make_data(config)
        for cap in args.caps:
            capped = dataclasses.replace(config, max_epochs=cap)
            t0 = time.process_time()
            m = study.fits[args.model](capped, data, config.model_seed())
            print(
                f"{args.model} k={config.n_causal} {letter}={getattr(config, field)} "
                f"seed={config.seed} cap={cap} "
                f"mcc_task={m['mcc_task_spearman']:.4f} "
                f"pooled={m['mcc_pooled']:.4f} best_epoch={m['best_epoch']} "
                f"epochs={m['epochs']} cpu_s={time.process_time() - t0:.1f}"
                + ("" if args.patience is None else f" patience={args.patience}")
                + tag
                + ("" if args.icarl_hessian == "diagonal" else " hessian=row-sums")
                + (
                    ""
                    if args.icarl_elbo_prior == "detached"
                    else " elbo_prior=undetached"
                )
                + ("" if args.icarl_phases is None else f" phases={args.icarl_phases}"),
                flush=True,
            )
            if args.latent_stats:
                print(latent_stats(last[0], data), flush=True)


def latent_stats(model, data) -> str:
    """One line: active latents, the variances of their encoder means, and the
    mean posterior variance per latent (sorted by activity)."""
    mean, var = model.encode(data.X, data.y, task_ids=data.task_ids)
    spread = mean.var(axis=0)
    order = np.argsort(spread)[::-1]
    activity, post = spread[order], var.mean(axis=0)[order]
    return (
        f"  latents active={int((activity > 0.01).sum())}/{activity.size} "
        f"var_of_means=[{' '.join(f'{v:.3g}' for v in activity)}] "
        f"posterior_var=[{' '.join(f'{v:.3g}' for v in post)}]"
    )


if __name__ == "__main__":
    main()
