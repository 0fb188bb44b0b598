"""The cost of checkpointing every epoch: MTRN-EGNN on a QM9 subset, with and without.

Fits the QM9 study's MTRN (EGNN hidden 32 x 3 layers, batches of 128, Adam 3e-3
with a cosine schedule, 10% validation, wide layout of the 12 standardised
targets: ``chen2024_qm9._pipeline``'s settings) on ``--n-molecules`` molecules for
``--epochs`` epochs, in pairs (without, then with a checkpoint written after every
epoch to a fresh file in ``--dir``), and prints each pair's CPU seconds
(``time.process_time``), wall seconds, their ratios, the time spent inside the
checkpoint writes, and the checkpoint size. Both fits of a pair must give the same
parameters to the bit (checked: a checkpoint never changes the run).

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_checkpoint.py \\
        --n-molecules 300 --epochs 10 --pairs 3 --dir /tmp/ckpt_bench
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import identrep.training.checkpoint as ckpt_mod
from identrep import MTRN
from identrep.experiments.studies.chen2024_qm9 import QM9_DEFAULTS, _load
from identrep.models.nn.egnn import EGNNExtractor


def _model(epochs: int, checkpoint: str | None) -> MTRN:
    extractor = functools.partial(
        EGNNExtractor.for_flat_input,
        hidden=QM9_DEFAULTS["hidden"],
        n_layers=QM9_DEFAULTS["n_layers"],
        n_rbf=QM9_DEFAULTS["n_rbf"],
    )
    return MTRN(
        n_latents=8,
        extractor=extractor,
        max_epochs=epochs,
        batch_size=QM9_DEFAULTS["batch_size"],
        lr=QM9_DEFAULTS["lr"],
        val_fraction=QM9_DEFAULTS["val_fraction"],
        patience=None,
        checkpoint=checkpoint,
        random_state=0,
    )


def _fit(data, epochs, checkpoint=None):
    c0, t0 = time.process_time(), time.perf_counter()
    m = _model(epochs, checkpoint).fit(data.X, data.Y)
    return m, time.process_time() - c0, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-molecules", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # ConvergenceWarning: a fixed budget here
    folder = args.dir or Path(tempfile.mkdtemp(prefix="ckpt_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    data = _load(args.n_molecules, 0, "qm9pack")

    writes: list[float] = []
    real_save = ckpt_mod.Checkpointer.save

    def timed_save(self, **kw):
        c0 = time.process_time()
        real_save(self, **kw)
        writes.append(time.process_time() - c0)

    ckpt_mod.Checkpointer.save = timed_save
    _fit(data, 1)  # warm-up (first optimiser import, thread pools)
    print(
        f"{args.n_molecules} molecules, {args.epochs} epochs per fit, "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
    )
    print("pair  cpu_off  cpu_on  cpu_ratio  wall_off  wall_on  wall_ratio  writes_cpu")
    ratios, wall_ratios = [], []
    for k in range(args.pairs):
        path = folder / f"pair{k}.ckpt"
        path.unlink(missing_ok=True)
        writes.clear()
        off, c_off, w_off = _fit(data, args.epochs)
        on, c_on, w_on = _fit(data, args.epochs, str(path))
        same = all(
            torch.equal(a, b)
            for a, b in zip(
                off.module_.state_dict().values(),
                on.module_.state_dict().values(),
                strict=True,
            )
        )
        if not same or off.history_["val_loss"] != on.history_["val_loss"]:
            raise SystemExit("the checkpointed fit differs from the plain one")
        ratios.append(c_on / c_off)
        wall_ratios.append(w_on / w_off)
        print(
            f"{k:4d}  {c_off:7.2f}  {c_on:6.2f}  {c_on / c_off:9.3f}  {w_off:8.2f}  "
            f"{w_on:7.2f}  {w_on / w_off:10.3f}  {sum(writes):6.3f} "
            f"({len(writes)} x {np.mean(writes) * 1e3:.1f} ms)"
        )
    size = (folder / "pair0.ckpt").stat().st_size
    print(
        f"median CPU ratio {statistics.median(ratios):.3f}, median wall ratio "
        f"{statistics.median(wall_ratios):.3f}; checkpoint {size / 1024:.0f} KiB; "
        "parameters and validation losses identical with and without"
    )


if __name__ == "__main__":
    main()
