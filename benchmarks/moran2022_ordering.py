"""The ordering claims of Moran et al. (2022) Tables 1-4 checked on a results
folder: per configuration (shift), each model's mean and rank, and in how many
splits the Sparse VAE beats each other model (paired by split).

Usage::

    python benchmarks/moran2022_ordering.py docs/results/moran2022_table2 nll
    python benchmarks/moran2022_ordering.py docs/results/moran2022_table4 accuracy \
        --scale 100

``--with-adam`` adds the records of ``FOLDER/oivae_adam_records/`` (the OI-VAE
row trained with W in the networks' Adam, before the proximal SGD; kept outside
``records/`` so the report does not show them) as the model ``OIVAE_adam``;
``--with-cosine`` those of ``FOLDER/svae_cosine_records/`` (the Sparse VAE rows
with the cosine learning-rate decay, as stored before stop 33) as
``SparseVAE_cosine`` and ``SVAE_KL1overK_cosine``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

LOWER_IS_BETTER = {"nll"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("metric")
    ap.add_argument("--model", default="SparseVAE")
    ap.add_argument(
        "--scale", type=float, default=1.0, help="multiply the metric (100: %%)"
    )
    ap.add_argument("--with-adam", action="store_true")
    ap.add_argument("--with-cosine", action="store_true")
    args = ap.parse_args()
    df = pd.read_csv(Path(args.folder) / "results.csv")
    for wanted, (sub, suffix) in (
        (args.with_adam, ("oivae_adam_records", "_adam")),
        (args.with_cosine, ("svae_cosine_records", "_cosine")),
    ):
        if wanted:
            kept = _kept_rows(Path(args.folder) / sub, suffix)
            df = pd.concat([df, kept], ignore_index=True)
    lower = args.metric in LOWER_IS_BETTER
    keys = [k for k in ("sigma_pct",) if k in df and df[k].nunique() > 1]
    for key, part in df.groupby(keys) if keys else [((), df)]:
        wide = part.pivot_table(index="seed", columns="model", values=args.metric)
        means = (wide.mean() * args.scale).sort_values(ascending=lower)
        ranks = ", ".join(f"{m} {v:.2f}" for m, v in means.items())
        label = key if isinstance(key, tuple) else (key,)
        print(f"{dict(zip(keys, label, strict=True))}: {ranks}")
        ref = wide[args.model]
        wins, diffs = [], []
        for m in wide.columns.drop(args.model):
            # paired by split: only the splits that both models ran count
            both = ref.notna() & wide[m].notna()
            better = (ref < wide[m]) if lower else (ref > wide[m])
            wins.append(f"{m} {int((better & both).sum())}/{int(both.sum())}")
            d = (ref - wide[m])[both] * args.scale
            sd = f" ± {d.std(ddof=1):.2f}" if len(d) > 1 else ""
            diffs.append(f"{m} {d.mean():+.2f}{sd} (n={len(d)})")
        print(f"  {args.model} better than: " + ", ".join(wins))
        # mean ± std over the common splits of (this model - the other)
        print(f"  {args.model} minus, per split: " + ", ".join(diffs))


def _kept_rows(sub: Path, suffix: str) -> pd.DataFrame:
    """The records kept in ``sub`` (outside ``records/``, so not in the report)
    as rows of their model name + ``suffix`` (split, shift and metrics)."""
    rows = []
    for f in sorted(sub.glob("*.json")):
        rec = json.loads(f.read_text())
        cfg = rec["config"]
        rows.append(
            {"model": cfg["model"] + suffix, "seed": cfg["seed"],
             "sigma_pct": cfg.get("sigma_pct", 0), **rec["metrics"]}
        )  # fmt: skip
    if not rows:
        raise SystemExit(f"no records in {sub}")
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
