"""Table 2 baselines: the fit before and after standardising x once, in one run.

Times ``--epochs`` epochs of a Table 2 baseline fit (the study's settings: MLP
encoder and decoder, batch 512, the study's data of one (k, p) configuration at
the paper's 500 tasks x 200 samples) along two paths, alternately A B A B, in CPU
seconds of this process (``time.process_time``: other processes on a shared
machine do not count):

* ``reference``: the code before this change: every batch is a float64 lookup
  standardised by the module at every step, iCaRL's pass standardises x twice
  (for the reconstruction and again inside the encoder), and the optimiser is
  torch's per-parameter loop (its CPU default);
* ``library``: the library as it is: x standardised once per fit
  (``BaseVAE._standardized_collate``), once per iCaRL pass, and the optimiser in
  its foreach form (:func:`identrep.training._optim.make_optimizer`).

Every pair is also checked to the bit: the module's parameters, the loss
histories and the encoder means must be equal, else the script stops.

Usage::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/bench_vae_step.py \\
        [--models iVAE,iCaRL] [--n-causal 4] [--n-observed 200] [--epochs 2] \\
        [--repeats 2] [--n-tasks 500]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import time
from unittest import mock

import numpy as np
import torch

import identrep.models.vae._icarl_loss as icarl_loss_mod
import identrep.training.loop as loop
from identrep.experiments.studies import _chen2024 as chen
from identrep.experiments.studies import chen2024_table2 as t2
from identrep.models import vae
from identrep.models.vae._elbo import reparameterize
from identrep.training._optim import OPTIMIZERS


def _old_icarl_pass(module, batch):
    """iCaRL's pass before this change: x standardised for the reconstruction and
    again inside ``module.encode``."""
    xs = module.standardize(batch.x)
    z_mean, z_log_var = module.encode(batch.x, batch.y, batch.task)
    z = reparameterize(z_mean, z_log_var)
    x_mean, x_log_var = module.decoder(z)
    u = module.conditioner(batch.y, batch.task)
    return xs, z, z_mean, z_log_var, x_mean, x_log_var, u


@contextlib.contextmanager
def reference_path(cls):
    """The code path before this change, for estimator class ``cls``."""
    with (
        mock.patch.object(cls, "_standardize_once", lambda self: False),
        mock.patch.object(
            loop,
            "_make_optimizer",
            lambda name, params, lr, wd: OPTIMIZERS[name](
                params, lr=lr, weight_decay=wd, foreach=False
            ),
        ),
        mock.patch.object(icarl_loss_mod, "icarl_pass", _old_icarl_pass),
    ):
        yield


def _fit(config, data, path: str):
    cls = getattr(vae, chen.BASELINE_CLASSES[config.model])
    est = chen.baseline_estimator(config, 12345, t2.BASELINE_SETTINGS)
    ctx = reference_path(cls) if path == "reference" else contextlib.nullcontext()
    with ctx:
        t0 = time.process_time()
        est.fit(data.X, data.y, task_ids=data.task_ids)
        cpu = time.process_time() - t0
    Z = est.transform(data.X, data.y, task_ids=data.task_ids)
    return cpu, est.module_.state_dict(), est.history_, Z


def _same(a, b) -> bool:
    (_, sa, ha, za), (_, sb, hb, zb) = a, b
    return (
        sa.keys() == sb.keys()
        and all(torch.equal(sa[k], sb[k]) for k in sa)
        and ha["train_loss"] == hb["train_loss"]
        and ha["val_loss"] == hb["val_loss"]
        and np.array_equal(za, zb)
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="iVAE,iCaRL")
    ap.add_argument("--n-causal", type=int, default=4)
    ap.add_argument("--n-observed", type=int, default=200)
    ap.add_argument("--n-tasks", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, load average "
        f"{os.getloadavg()[0]:.2f}; k={args.n_causal}, p={args.n_observed}, "
        f"{args.n_tasks} tasks x 200, {args.epochs} epoch(s), CPU seconds per fit"
    )
    print("| model | reference s | library s | reference / library | bitwise |")
    print("|---|---|---|---|---|")
    for model in args.models.split(","):
        config = next(
            c
            for c in t2.grid(seeds=1, models=(model,))
            if (c.n_causal, c.n_observed) == (args.n_causal, args.n_observed)
        )
        config = dataclasses.replace(
            config, max_epochs=args.epochs, n_tasks=args.n_tasks
        )
        data, _ = t2.make_data(config)
        warm = dataclasses.replace(config, max_epochs=1, n_tasks=5)
        for path in ("reference", "library"):  # lazy imports, first allocations
            _fit(warm, t2.make_data(warm)[0], path)
        times = {"reference": [], "library": []}
        ratios = []
        for _ in range(args.repeats):
            ref = _fit(config, data, "reference")
            lib = _fit(config, data, "library")
            if not _same(ref, lib):
                raise SystemExit(f"{model}: the two paths differ; stop.")
            times["reference"].append(ref[0])
            times["library"].append(lib[0])
            ratios.append(ref[0] / lib[0])
        r, x = (statistics.median(times[k]) for k in ("reference", "library"))
        print(
            f"| {model} | {r:.2f} | {x:.2f} | {statistics.median(ratios):.3f} "
            f"(pairs {', '.join(f'{v:.3f}' for v in ratios)}) | equal |"
        )


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    main()
