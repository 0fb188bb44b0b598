"""MTLCM's sigma_s on the Chen et al. study rows: one fit per sigma_s, same data,
same stage-1 features, same MTLCM seed.

* ``table1``: the study's linear data (authors' mixing), MTLCM with each sigma_s
  (the study's model seed): MCC per task / pooled, causal accuracy, precision,
  recall, exact causal sets, mean log-likelihood.
* ``table2``: the study's pipeline (MTRN, standardised features, MTLCM) fitted
  once with the first sigma_s; MTLCM refitted with the others on the same
  standardised features and the same MTLCM seed. ``--quick`` uses the study's
  quick size (100 tasks x 100 samples, MTRN capped at 60 epochs).
* ``table3``: the same on the superconductivity data (the study's MTRN), then the
  cross-seed strong MCC (Pearson MCC between the latents of two seeds) per
  sigma_s; needs ``IDENTREP_DATA`` pointing at the data folder.

Rows are printed as they finish and appended to ``--json`` (a JSON-lines file).
Run from the repository root, e.g.::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/sigma_s_switch.py table1 \
        --seeds 0 1 2 --sigma-s 0.1 0.01 --json /tmp/t1.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time

import numpy as np

import identrep as ir
from identrep.experiments.studies import _chen2024 as chen

COLS = ["table", "k", "d", "p", "seed", "sigma_s", "mcc_task", "mcc_pooled"]
COLS += ["acc", "prec", "rec", "exact", "ll", "n_causal_found", "cpu_s"]


def _scores(data, Z_hat, causal):
    sc = chen.score_latents(data, Z_hat, causal)
    return {
        "mcc_task": sc["mcc_task_spearman"],
        "mcc_pooled": sc["mcc_pooled"],
        "acc": sc["causal_accuracy"],
        "prec": sc["causal_precision"],
        "rec": sc["causal_recall"],
        "exact": sc["causal_exact_set_rate"],
    }


def _emit(row, out):
    cells = []
    for c in COLS:
        v = row.get(c, "")
        cells.append(f"{v:.4f}" if isinstance(v, float) else str(v))
    print("| " + " | ".join(cells) + " |", flush=True)
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(row) + "\n")


def run_table1(seeds, sigmas, dims, out):
    from identrep.experiments.studies.chen2024_table1 import grid, make_data

    for config in grid(seeds=max(seeds) + 1, models=("MTLCM",)):
        if config.seed not in seeds or (dims and config.n_latents not in dims):
            continue
        data, _ = make_data(config)
        for s in sigmas:
            t0 = time.process_time()
            m = ir.MTLCM(
                n_latents=config.n_latents,
                n_init=config.n_init,
                sigma_s=s,
                random_state=config.model_seed(),
            ).fit(data.X, data.y, task_ids=data.task_ids)
            row = {"table": 1, "k": config.n_causal, "d": config.n_latents}
            row.update(p=config.n_observed, seed=config.seed, sigma_s=s)
            row.update(_scores(data, m.transform(data.X), m.causal_indicators_))
            row.update(
                ll=m.log_likelihood_,
                n_causal_found=float((m.causal_indicators_ >= 0.5).sum(1).mean()),
                cpu_s=round(time.process_time() - t0, 2),
            )
            _emit(row, out)


def _pipeline_and_refits(config, X, y, task_ids, sigmas, mtrn=None):
    """The study's pipeline with sigma_s = sigmas[0], then MTLCM refits on its
    standardised features with the other values (same MTLCM seed)."""
    pipe = chen.pipeline(config, config.model_seed(), mtrn)
    pipe.set_params(mtlcm_params={"n_init": config.n_init, "sigma_s": sigmas[0]})
    t0 = time.process_time()
    pipe.fit(X, y, task_ids=task_ids)
    cpu = time.process_time() - t0
    F = pipe.features(X)
    fits = [(sigmas[0], pipe.mtlcm_, cpu)]
    for s in sigmas[1:]:
        params = dict(pipe.mtlcm_.get_params(), sigma_s=s)
        t0 = time.process_time()
        m = ir.MTLCM(**params).fit(F, y, task_ids=task_ids)
        fits.append((s, m, time.process_time() - t0))
    return pipe, F, fits


def run_table2(seeds, sigmas, dims, quick, out):
    from identrep.experiments.studies.chen2024_table2 import grid, make_data

    base = grid(seeds=1, quick=quick, models=("MTLCM",))
    for config0, seed in itertools.product(base, seeds):
        if dims and (config0.n_causal, config0.n_observed) not in dims:
            continue
        config = dataclasses.replace(config0, seed=seed)
        data, _ = make_data(config)
        pipe, F, fits = _pipeline_and_refits(
            config, data.X, data.y, data.task_ids, sigmas
        )
        for s, m, cpu in fits:
            row = {"table": 2, "k": config.n_causal, "d": config.n_latents}
            row.update(p=config.n_observed, seed=seed, sigma_s=s)
            row.update(_scores(data, m.transform(F), m.causal_indicators_))
            row.update(
                ll=m.log_likelihood_,
                n_causal_found=float((m.causal_indicators_ >= 0.5).sum(1).mean()),
                cpu_s=round(cpu, 2),
                mtrn_epochs=len(pipe.mtrn_.history_["train_loss"]),
            )
            _emit(row, out)


def run_table3(seeds, sigmas, dims, out):
    from identrep.experiments.studies.chen2024_table3 import (
        TABLE3_MTRN,
        grid,
        load_real_data,
        table3_hidden_sizes,
    )
    from identrep.metrics import mcc

    latents = {}
    for config in grid(seeds=max(seeds) + 1, models=("MTLCM",)):
        if config.seed not in seeds or (dims and config.n_latents not in dims):
            continue
        data = load_real_data(config)
        mtrn = dict(TABLE3_MTRN, hidden_sizes=table3_hidden_sizes(config.n_latents))
        _, F, fits = _pipeline_and_refits(config, data.X, data.Y, None, sigmas, mtrn)
        for s, m, cpu in fits:
            latents[config.n_latents, s, config.seed] = m.transform(F)
            row = {"table": 3, "k": 0, "d": config.n_latents, "p": 86}
            row.update(seed=config.seed, sigma_s=s, ll=m.log_likelihood_)
            row.update(
                n_causal_found=float((m.causal_indicators_ >= 0.5).sum(1).mean()),
                cpu_s=round(cpu, 2),
            )
            _emit(row, out)
    for d, s in sorted({(d, s) for d, s, _ in latents}):
        done = sorted(sd for dd, ss, sd in latents if (dd, ss) == (d, s))
        pairs = [
            mcc(latents[d, s, a], latents[d, s, b], "pearson")
            for a, b in itertools.combinations(done, 2)
        ]
        if pairs:
            row = {"table": 3, "d": d, "sigma_s": s, "seeds": done}
            row.update(cross_seed_mcc=float(np.mean(pairs)))
            row.update(cross_seed_std=float(np.std(pairs)), pairs=pairs)
            print(json.dumps(row), flush=True)
            if out:
                with open(out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", choices=["table1", "table2", "table3"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--sigma-s", nargs="+", type=float, default=[0.1, 0.01])
    ap.add_argument(
        "--dims",
        nargs="*",
        default=[],
        help="table1/3: latent sizes d; table2: k:p pairs (default: all)",
    )
    ap.add_argument("--quick", action="store_true", help="table2: the quick size")
    ap.add_argument("--json", default=None, help="JSON-lines file to append to")
    args = ap.parse_args(argv)
    print("| " + " | ".join(COLS) + " |")
    print("|" + "---|" * len(COLS), flush=True)
    if args.table == "table1":
        run_table1(args.seeds, args.sigma_s, {int(d) for d in args.dims}, args.json)
    elif args.table == "table2":
        dims = {tuple(int(v) for v in kp.split(":")) for kp in args.dims}
        run_table2(args.seeds, args.sigma_s, dims, args.quick, args.json)
    else:
        run_table3(args.seeds, args.sigma_s, {int(d) for d in args.dims}, args.json)


if __name__ == "__main__":
    main()
