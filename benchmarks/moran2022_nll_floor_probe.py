"""Does the authors' log(p + 1e-6) move the held-out NLL of Moran et al.'s tables?

The authors' code scores a categorical (multinomial) reconstruction as
``-(x * log(p + 1e-6)).sum(1).mean()`` (``reconstruction_loss`` of
gemoran/sparse-vae-code ``model/models.py``, which ``Evaluator.
evaluate_heldout_nll`` calls on the test rows). The 1e-6 caps each count's
cost at -log(1e-6) = 13.8 nats and shifts every probability up; identrep's
:func:`identrep.metrics.reconstruction_nll` takes ``-x log p`` as it is (p
floored at 1e-300 only). A model that puts almost no mass on some held-out
positives pays for them in ours and is capped in theirs.

This refits stored rows of Tables 1a, 1b or 2 (the study's fits, splits, data
and model seeds, budget; ``--splits``, ``--shifts``, ``--test-docs`` for Table
2) and scores each fit's held-out rows both ways at the same sampled z: the
decoder output that the study's own ``heldout_nll`` call computes is recorded
on its way through ``reconstruction_nll`` (NMF and LDA: their normalised
reconstructions, NMF's already smoothed by 1e-10 per entry). Prints per fit:
``nll`` (the study's number, which the record reproduces: ``check``, their
difference), ``nll_floor`` (the authors' formula, with ``--floor``), their
difference, the share of held-out counts with p < floor and the nats those
counts cost in ours.

Usage (data home with ml_abstracts and MovieLens 100K)::

    IDENTREP_DATA=/work/shared/data OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/moran2022_nll_floor_probe.py table1a --splits 0 1 \\
        --models VAE NMF
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import identrep.models.decomposition.lda as lda_module
import identrep.models.decomposition.nmf as nmf_module
import identrep.models.vae._heldout as heldout_module
from identrep.experiments import get_study
from identrep.metrics import reconstruction_nll

TABLES = ("table1a", "table1b", "table2")
PATCHED = (heldout_module, nmf_module, lda_module)


class Recorder:
    """Wraps ``reconstruction_nll``: passes every call through unchanged and
    keeps the (counts, probabilities) of the multinomial ones."""

    def __init__(self):
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, X, params, **kw):
        if kw.get("likelihood") == "multinomial":
            self.blocks.append(
                (np.asarray(X, dtype=np.float64), np.asarray(params, np.float64))
            )
        return reconstruction_nll(X, params, **kw)


def floor_scores(blocks, floor: float) -> dict:
    """Both NLLs of the recorded rows, and what the floor changes."""
    X = np.concatenate([b[0] for b in blocks])
    P = np.concatenate([b[1] for b in blocks])
    cost = -X * np.log(np.maximum(P, 1e-300))
    ours = cost.sum(axis=1)
    theirs = -(X * np.log(P + floor)).sum(axis=1)
    pos = X > 0
    low = pos & (floor > P)
    cost_low = (cost * low).sum(axis=1)
    return {
        "check": float(ours.mean()),
        "nll_floor": float(theirs.mean()),
        "share_below": float(low.sum() / max(pos.sum(), 1)),
        "nats_below": float(cost_low.mean()),
        "rows": int(X.shape[0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=TABLES)
    ap.add_argument("--models", nargs="+", default=["VAE", "NMF"])
    ap.add_argument("--splits", type=int, nargs="+", default=[0])
    ap.add_argument("--shifts", nargs="+", default=["high"])
    ap.add_argument("--test-docs", default="heldout")
    ap.add_argument("--floor", type=float, default=1e-6)
    args = ap.parse_args()
    study = get_study(f"moran2022_{args.table}")
    extra = {"test_docs": args.test_docs} if args.table == "table2" else {}
    configs = [
        c
        for c in study.grid(seeds=max(args.splits) + 1, models=args.models, **extra)
        if c.seed in args.splits
    ]
    if args.table == "table2":
        from identrep.experiments.studies import moran2022_table2 as t2

        names = list(t2.SHIFTS) if args.shifts == ["all"] else args.shifts
        configs = [c for c in configs if c.sigma_pct in {t2.SHIFTS[n] for n in names}]
    configs.sort(key=lambda c: (c.sigma_pct or 0, c.seed, args.models.index(c.model)))
    key = split = None
    for config in configs:  # sorted, so each data set is built once
        if config.data_key() != key:
            key, split = config.data_key(), study.make_data(config)[0]
        rec = Recorder()
        for mod in PATCHED:
            mod.reconstruction_nll = rec
        t0 = time.process_time()
        try:
            out = study.fits[config.model](config, split, config.model_seed())
        finally:
            for mod in PATCHED:
                mod.reconstruction_nll = reconstruction_nll
        s = floor_scores(rec.blocks, args.floor)
        print(
            f"{args.table} {config.describe()} {config.model} "
            f"nll={out['nll']:.4f} check={s['check'] - out['nll']:+.1e} "
            f"nll_floor={s['nll_floor']:.4f} "
            f"diff={s['nll_floor'] - out['nll']:+.4f} "
            f"share_below={s['share_below']:.4f} nats_below={s['nats_below']:.3f} "
            f"rows={s['rows']} cpu_s={time.process_time() - t0:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
