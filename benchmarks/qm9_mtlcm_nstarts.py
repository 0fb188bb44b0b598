"""How many MTLCM starts does QM9 need for the seeds to agree?

Reads the same folder as ``qm9_mtlcm_restarts.py`` (two or more seeds' records and
their stored standardised MTRN features at ``--latents`` latents) and fits MTLCM on
each seed's features once per ``--configs`` entry ``INIT:N`` (``MTLCM(init=INIT,
n_init=N)``, the pipeline's MTLCM seed), keeping the highest likelihood of the N
starts as MTLCM does. Prints each fit's log-likelihood per sample (and how many of
its starts reached it) and, per entry,
the cross-seed MCC x100 of the latents over every pair of seeds (mean ± std, ddof=0,
and the minimum). Used for docs/notes.md, "Coordinator, stop 31".

Usage::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/qm9_mtlcm_nstarts.py \\
        RUN --molecules 0 --latents 8 --configs jd:10 random:10 random:20
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from identrep.experiments.studies.chen2024_qm9 import _load  # noqa: E402
from identrep.metrics import mcc  # noqa: E402
from identrep.models.multitask.mtlcm import MTLCM  # noqa: E402
from qm9_mtlcm_restarts import seed_runs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a reproduce qm9 --out folder with 2+ seeds")
    ap.add_argument("--molecules", type=int, default=30000, help="0: all")
    ap.add_argument("--latents", type=int, default=8)
    ap.add_argument("--configs", nargs="+", default=["jd:10", "random:10"])
    args = ap.parse_args()
    Y = _load(args.molecules or None, 0, "qm9pack").Y
    runs = seed_runs(args.run, args.latents)
    for entry in args.configs:
        init, n = entry.split(":")
        Z = []
        for r in runs:
            F = r.features
            kw = {"n_latents": args.latents, "sigma_obs": 1e-4}
            kw.update(init=init, n_init=int(n))
            t = time.process_time()
            m = MTLCM(random_state=r.mtlcm_seed, **kw).fit(F, Y)
            cpu = time.process_time() - t
            Z.append(m.transform(F))
            lls = np.asarray(m.restart_log_likelihoods_)
            at_best = int((lls >= lls.max() - 1e-4).sum())
            print(
                f"{entry:10s} seed {r.seed}: log-lik/sample {m.log_likelihood_:.5f}, "
                f"{at_best} of {len(lls)} starts within 1e-4 of it "
                f"({cpu:.0f} CPU-s)",
                flush=True,
            )
        vals = [
            100 * mcc(Z[i], Z[j]) for i, j in itertools.combinations(range(len(Z)), 2)
        ]
        print(
            f"{entry:10s} cross-seed MCC x100 over {len(vals)} pairs: "
            f"{np.mean(vals):.2f} ± {np.std(vals):.2f} (min {np.min(vals):.2f}); "
            + ", ".join(f"{v:.2f}" for v in vals),
            flush=True,
        )


if __name__ == "__main__":
    main()
