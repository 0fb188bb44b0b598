"""Which settings of a row set its score on a real-data table of Moran et al. (2022)?

Refits stored runs of Tables 1a, 1b, 2 or 4 (``identrep reproduce
moran2022_table1b`` etc.: the same splits, data and model seeds, the study's
budget and scoring; ``--splits``, and ``--shifts`` and ``--test-docs`` for
Table 2) once per ``--variant``, each a space-separated list of
``PARAM=VALUE`` estimator parameters set on top of the study's (``true`` /
``false`` as booleans, ``none`` as None, integers as ints, other numbers as
floats, comma-separated lists as tuples); the empty variant ``""`` is the
stored row itself and reproduces its record (the study's ``lr_schedule``
default, constant since stop 33; ``lr_schedule=cosine`` refits the Sparse VAE
rows stored before). Prints,
per split and variant, the table's column(s) (NLL; Table 1a also the same-rows
Recall@5 and NDCG@10; Table 4 the accuracy), the CPU seconds and, for the
Sparse VAE, the fraction of masks with inclusion probability above 1/2 and the
number of latents with any. ``--slab-mean`` (VSC rows) scores features from
the slab mean mu, as the authors' evaluator takes VSC's codes, instead of
``transform``'s gamma mu. ``--proportions``: the encoder reads word
proportions (the authors' input; ``moran2022_table2_protocol_probe.py input``).
Used for docs/notes.md, "Coordinator, stop 32" (the
Sparse VAE row's settings that differ from the authors' code on Table 1b, and
every table's Sparse VAE and VAE rows at matched optimisers; output in
docs/results/moran2022_optimiser_probe/).

Usage (data home with ml_abstracts)::

    IDENTREP_DATA=/work/shared/data OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/moran2022_svae_probe.py table1b --splits 0 \\
        --model SVAE_KL1overK --variant "" "fix_scale=false" "lr_schedule=none"
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from _probe_params import parse_params
from identrep.experiments import get_study
from identrep.experiments.studies import _moran2022 as mo

#: The column(s) each table reports, in the order printed.
METRICS = {
    "table1a": ("nll", "recall_at_5_same_rows", "ndcg_at_10_same_rows"),
    "table1b": ("nll",),
    "table2": ("nll",),
    "table4": ("accuracy",),
}


def _use_slab_mean(est) -> None:
    """Make a VSC estimator's ``transform`` return the slab mean mu (what the
    authors' evaluator takes as VSC's codes) instead of gamma mu."""
    if not hasattr(est, "spike_probabilities"):
        raise SystemExit(f"--slab-mean is for VSC rows; got {type(est).__name__}.")

    def transform(X):
        X, _, _ = est._check_transform_data(X, None, None)
        out = est._predict_chunks(
            lambda x: est.module_.encode_parts(x)[0], [X], dtypes=[est._x_dtype()]
        )
        return out[0] if isinstance(out, tuple) else out

    est.transform = transform  # instance attribute: this estimator only


def _floor_training(eps: float) -> None:
    """Train categorical likelihoods on ``sum_j x_j log(softmax_j + eps)``, as the
    authors' ``reconstruction_loss`` (``log(x_pred + 1e-6)``). Only the training
    objective changes: the held-out NLL is computed from the decoder's
    probabilities by :func:`identrep.metrics.reconstruction_nll`."""
    import torch

    from identrep.models.vae import _elbo

    def floored(x, logits):
        return (x * torch.log(torch.softmax(logits, dim=-1) + eps)).sum(-1)

    _elbo.multinomial_log_prob = floored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=sorted(METRICS))
    ap.add_argument("--splits", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--shifts", nargs="+", default=["high"], help="Table 2's shifts (or 'all')"
    )
    ap.add_argument("--model", default="SVAE_KL1overK")
    ap.add_argument(
        "--test-docs",
        default="heldout",
        help="Table 2's test documents: heldout (the stored tables), same or "
        "resampled (the study's --test-docs)",
    )
    ap.add_argument("--variant", nargs="+", default=[""])
    ap.add_argument(
        "--train-floor",
        type=float,
        default=None,
        help="categorical rows: train on sum x log(softmax + EPS), the authors' "
        "reconstruction_loss (its 1e-6), instead of the exact log-softmax; the "
        "scores stay identrep's",
    )
    ap.add_argument(
        "--proportions",
        action="store_true",
        help="the encoder reads each row's word proportions x / sum(x), as the "
        "authors' networks (normalize_columns), instead of identrep's "
        "standardised counts; the likelihood still scores the counts",
    )
    ap.add_argument(
        "--slab-mean",
        action="store_true",
        help="VSC only: features are the slab mean mu (the authors' evaluator's "
        "codes) instead of transform's posterior mean gamma mu",
    )
    args = ap.parse_args()
    study = get_study(f"moran2022_{args.table}")
    extra = {"test_docs": args.test_docs} if args.table == "table2" else {}
    configs = [
        c
        for c in study.grid(seeds=max(args.splits) + 1, models=(args.model,), **extra)
        if c.seed in args.splits
    ]
    if args.table == "table2":
        from identrep.experiments.studies import moran2022_table2 as t2

        names = list(t2.SHIFTS) if args.shifts == ["all"] else args.shifts
        configs = [c for c in configs if c.sigma_pct in {t2.SHIFTS[n] for n in names}]
    build = mo.make_estimator
    built = [None]  # the estimator of the latest fit, for its masks

    def keep(*a, _o, **kw):
        built[0] = build(*a, **kw).set_params(**_o)
        if args.slab_mean:
            _use_slab_mean(built[0])
        return built[0]

    if args.train_floor is not None:
        _floor_training(args.train_floor)
    if args.proportions:
        from moran2022_table2_protocol_probe import proportions_input

        proportions_input()
    fit = study.fits[args.model]
    for config in configs:
        split, _ = study.make_data(config)
        for text in args.variant:
            overrides = parse_params(text.split(), "--variant")
            mo.make_estimator = functools.partial(keep, _o=overrides)
            t0 = time.process_time()
            try:
                out = fit(config, split, config.model_seed())
            finally:
                mo.make_estimator = build
            cells = " ".join(
                f"{m}={out[m]:.4f}" for m in METRICS[args.table] if m in out
            )
            est = built[0]
            if hasattr(est, "inclusion_"):
                p = np.asarray(est.inclusion_)
                cells += (
                    f" p>0.5={np.mean(p > 0.5):.3f}"
                    f" latents_used={int(np.sum((p > 0.5).any(axis=0)))}"
                )
            label = " ".join(
                t
                for t in (
                    text,
                    "features=slab_mean" * args.slab_mean,
                    "input=proportions" * args.proportions,
                    ""
                    if args.train_floor is None
                    else f"train_floor={args.train_floor:g}",
                )
                if t
            )
            print(
                f"{args.table} {config.describe()} {args.model} "
                f"variant=[{label}] {cells} cpu_s={time.process_time() - t0:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
