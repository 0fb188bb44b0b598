"""How much cross-seed agreement Table 3's strong MCC gives for free, against the
baselines' stored latents.

References on the standardised inputs of the superconductivity data (86 element
counts): random Gaussian linear maps to d dimensions, and random rotations of the
top-d principal components (the same subspace, an arbitrary basis). For each
baseline row of a Table 3 study folder (``OUT/latents/table3-<model>-d<d>-*.npz``)
it prints the cross-seed Pearson MCC, the R^2 of a linear regression of the
latents on X (how linear the encoder is), the mean canonical correlation with the
top-d principal components and between seeds (subspace agreement), the same
MCC with Spearman correlations (``--spearman``: the paper's baseline metric is
not published, its MTLCM agreement is Pearson), and how far each latent is a
single input (``--alignment``: per latent the largest |Spearman| with one of the
86 element counts, and in how many matched cross-seed pairs both latents follow
the same element) and the share of the latents' variance on their first
principal direction per seed (``--shares``: near 1 when the latents collapse
onto one direction). Needs ``IDENTREP_DATA``; run from the repository root, e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \
        python benchmarks/table3_baseline_agreement.py --run results/table3
"""

from __future__ import annotations

import argparse
import glob
import itertools

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import ortho_group

from identrep.datasets import load_superconductivity
from identrep.metrics import correlation_matrix, mcc


def _canonical(A, B):
    qa, _ = np.linalg.qr(A - A.mean(0))
    qb, _ = np.linalg.qr(B - B.mean(0))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def _pairs(Zs, fn):
    return [fn(Zs[a], Zs[b]) for a, b in itertools.combinations(range(len(Zs)), 2)]


def _alignment(Xs, Zs):
    """Per latent, the element count it follows most (|Spearman|); then, over
    the matched pairs of each seed pair, how often both follow the same one."""
    best = []
    for Z in Zs:
        R = correlation_matrix(Z, Xs, "spearman")
        best.append((R.argmax(1), R.max(1)))
        q = np.quantile(R.max(1), [0.1, 0.5, 0.9])
        print(
            f"  max |Spearman| of a latent with one input: quantiles 10/50/90 % "
            f"{np.round(q, 3)}; latents above 0.9: {(R.max(1) > 0.9).sum()} of "
            f"{Z.shape[1]}"
        )
    for a, b in itertools.combinations(range(len(Zs)), 2):
        R = correlation_matrix(Zs[a], Zs[b])
        rows, cols = linear_sum_assignment(-R)
        same = best[a][0][rows] == best[b][0][cols]
        print(
            f"  seeds {a}-{b}: matched pairs following the same input {same.sum()} "
            f"of {len(rows)}; their mean |r| {R[rows, cols][same].mean():.3f}, the "
            f"others' {R[rows, cols][~same].mean():.3f}"
        )


def _shares(Zs):
    """Per seed, the share of the latents' total variance on their first
    principal direction."""
    out = []
    for Z in Zs:
        ev = np.linalg.eigvalsh(np.cov(Z, rowvar=False))
        out.append(ev[-1] / ev.sum())
    return np.array(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=None, help="a table3 study folder (--out)")
    ap.add_argument("--dims", nargs="+", type=int, default=[5, 10, 20, 40, 80])
    ap.add_argument("--models", default="iVAE,MT-iVAE,iCaRL,MT-iCaRL")
    ap.add_argument("--spearman", action="store_true", help="also Spearman MCC")
    ap.add_argument(
        "--alignment", action="store_true", help="latents against single inputs"
    )
    ap.add_argument(
        "--no-floors", action="store_true", help="skip the random references"
    )
    ap.add_argument(
        "--shares",
        action="store_true",
        help="variance share of each seed's first principal direction",
    )
    args = ap.parse_args(argv)
    X, _ = load_superconductivity(as_frame=False, return_X_y=True)
    sd = X.std(0)
    Xs = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)
    U, S, _ = np.linalg.svd(Xs, full_matrices=False)
    share = np.cumsum(S**2) / np.sum(S**2)
    print(
        "variance share of the top 5/10/20/40 PCs:", np.round(share[[4, 9, 19, 39]], 3)
    )
    for d in [] if args.no_floors else args.dims:
        rand = [
            Xs @ np.random.default_rng(s).standard_normal((X.shape[1], d))
            for s in range(3)
        ]
        rot = [U[:, :d] * S[:d] @ ortho_group.rvs(d, random_state=s) for s in range(3)]
        r1 = np.array(_pairs(rand, lambda a, b: mcc(a, b, "pearson"))) * 100
        r2 = np.array(_pairs(rot, lambda a, b: mcc(a, b, "pearson"))) * 100
        print(
            f"d={d}: random linear maps {r1.mean():.2f} ± {r1.std():.2f}; "
            f"rotated top-{d} PCs {r2.mean():.2f} ± {r2.std():.2f}"
        )
    if not args.run:
        return
    design = np.c_[Xs, np.ones(len(Xs))]
    for model in args.models.split(","):
        for d in args.dims:
            files = sorted(glob.glob(f"{args.run}/latents/table3-{model}-d{d}-*.npz"))
            Zs = [np.load(f)["latents"].astype(float) for f in files]
            if len(Zs) < 2:
                continue
            r2 = []
            for Z in Zs:
                coef, *_ = np.linalg.lstsq(design, Z, rcond=None)
                r2.append(1 - (Z - design @ coef).var(0).sum() / Z.var(0).sum())
            cross = np.array(_pairs(Zs, lambda a, b: mcc(a, b, "pearson"))) * 100
            sub = _pairs(Zs, lambda a, b: _canonical(a, b).mean())
            pcs = [_canonical(Z, U[:, :d]).mean() for Z in Zs]
            print(
                f"{model} d={d} ({len(Zs)} seeds): cross-seed MCC {cross.mean():.2f} "
                f"(pairs {np.round(cross, 2)}); "
                f"linear R^2 in X {np.round(r2, 3)}; canonical corr with top-{d} "
                f"PCs {np.round(pcs, 3)}, between seeds {np.round(sub, 3)}"
            )
            if args.spearman:
                sp = np.array(_pairs(Zs, lambda a, b: mcc(a, b, "spearman"))) * 100
                print(
                    f"  Spearman cross-seed MCC {sp.mean():.2f} "
                    f"(pairs {np.round(sp, 2)})"
                )
            if args.alignment:
                _alignment(Xs, Zs)
            if args.shares:
                print(f"  first-direction variance share {np.round(_shares(Zs), 2)}")


if __name__ == "__main__":
    main()
