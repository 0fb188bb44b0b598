"""Figure 3a of Moran et al. (2022), paired by seed: the Sparse VAE's held-out MSE
against every other row of a synthetic-study folder, at each factor correlation.

Reads ``results.csv`` of an ``identrep reproduce moran2022_synthetic`` folder and
prints, for each metric (``mse``: the decoder at the posterior mean; ``mse_sampled``:
at one draw of z, the authors' Figure 3a code) and each rho, the mean and median
(x100) of every row, then for each other row the seeds where the Sparse VAE's MSE is
lower and the mean ± std (ddof 1) of the per-seed difference (Sparse VAE − row).

Usage::

    python benchmarks/moran2022_synthetic_mse_pairs.py \\
        docs/results/moran2022_synthetic/draw
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

REF = "Sparse VAE"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--metrics", nargs="+", default=["mse", "mse_sampled"])
    args = ap.parse_args()
    df = pd.read_csv(Path(args.folder) / "results.csv")
    others = [m for m in dict.fromkeys(df["model"]) if m != REF]
    for metric in args.metrics:
        print(f"{metric} x100")
        wins = dict.fromkeys(others, 0)
        total = dict.fromkeys(others, 0)
        for rho, part in df.groupby("rho_pct"):
            v = part.pivot(index="seed", columns="model", values=metric) * 100
            stats = ", ".join(
                f"{m} {v[m].mean():.2f} (median {v[m].median():.2f})" for m in v
            )
            print(f"  rho_pct {rho}: {stats}")
            for m in others:
                d = (v[REF] - v[m]).dropna()
                lower = int((d < 0).sum())
                wins[m] += lower
                total[m] += len(d)
                print(
                    f"    {REF} lower than {m} in {lower}/{len(d)} seeds, "
                    f"{d.mean():+.2f} ± {d.std(ddof=1):.2f}"
                )
        print(
            "  all rho: "
            + ", ".join(f"lower than {m} in {wins[m]}/{total[m]}" for m in others)
        )


if __name__ == "__main__":
    main()
