"""Cost of standardising the inputs in float64 inside the network (issue 12).

MTRN and the VAE family feed ``X`` to their module as float64 and standardise it
there (``models/nn/mlp.py``, ``Standardize``) before the float32 layers, so that an
offset or unit of X cannot erase the signal. This times an MTRN fit on the Table 2
process with that path (``standardize_inputs=True``, the default) against the same
fit on X standardised beforehand and fed as float32 (``standardize_inputs=False``),
which is the network work without the float64 step, alternating the two in one run.

Run: ``python benchmarks/bench_units.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import identrep as ir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    d = ir.datasets.make_nonlinear_tasks(
        n_tasks=100, n_samples=100, n_latents=10, n_causal=4, n_observed=50,
        random_state=0,
    )  # fmt: skip
    Xs = (d.X - d.X.mean(0)) / d.X.std(0)
    times = {"float64 standardisation in the module": [], "pre-standardised": []}
    with warnings.catch_warnings():  # warm-up: the first fit of a process pays
        warnings.simplefilter("ignore")  # for imports and thread pools
        ir.MTRN(n_latents=10, max_epochs=1, random_state=0).fit(
            d.X, d.y, task_ids=d.task_ids
        )
    for _ in range(args.repeats):
        for name, X, flag in (
            ("float64 standardisation in the module", d.X, True),
            ("pre-standardised", Xs, False),
        ):
            m = ir.MTRN(n_latents=10, max_epochs=args.epochs, patience=None,
                        standardize_inputs=flag, random_state=0)  # fmt: skip
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.fit(X, d.y, task_ids=d.task_ids)
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k}: median {v:.2f} s over {args.repeats} fits")
    a, b = med.values()
    print(f"ratio float64 path / pre-standardised: {a / b:.3f}")


if __name__ == "__main__":
    main()
