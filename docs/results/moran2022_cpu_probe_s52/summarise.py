"""Summaries of the stop-52 Table 2 probe outputs in this folder (README.md quotes
them).

Run from the repository root: ``python docs/results/moran2022_cpu_probe_s52/
summarise.py > docs/results/moran2022_cpu_probe_s52/summary.txt``. Reads the probe
outputs here, the stop-51 outputs of the same rows
(``moran2022_scripts_probe_s51/``, made on another CPU) and the stored
``moran2022_table2_same/results.csv``; computes only means, standard deviations
(ddof 0 over fits, ddof 1 for paired differences) and counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
S51 = HERE.parent / "moran2022_scripts_probe_s51"
STORED = HERE.parent / "moran2022_table2_same" / "results.csv"
SHIFTS = (("high", "0.5"), ("medium", "1"), ("low", "3"))
#: the paper's Table 2: VAE and NMF means per shift
PAPER = {"0.5": (54.6, 60.1), "1": (52.3, 58.0), "3": (50.8, 57.3)}
#: the paper's Table 2 Sparse VAE per shift
PAPER_SVAE = {"0.5": 52.4, "1": 49.2, "3": 48.6}
PAT = re.compile(
    r"^table2 K=\d+ sigma=([\d.]+) split (\d) (\S+) variant=\[(.*?)\] nll=([\d.]+)"
)


def read(path: Path, model: str) -> dict:
    """{(variant without the train_floor / input tags, sigma, split): nll}."""
    out = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        m = PAT.search(line)
        if m and m[3] == model:
            tags = [
                t for t in m[4].split() if not t.startswith(("train_floor=", "input="))
            ]
            out[(" ".join(tags), m[1], int(m[2]))] = float(m[5])
    return out


def seeds_of(cells: dict, extra: str = "") -> dict:
    """{seed: {(sigma, split): nll}} for the variants '', 'random_state=1', ... with
    ``extra`` settings in front."""
    out = {}
    for seed in (0, 1, 2):
        tag = " ".join(t for t in (extra, f"random_state={seed}" * (seed > 0)) if t)
        got = {(s, k): v for (var, s, k), v in cells.items() if var == tag}
        if got:
            out[seed] = got
    return out


def nmf() -> dict:
    stored = pd.read_csv(STORED)
    stored = stored[stored.model == "NMF"]
    return {
        (str(r.sigma_pct / 100).rstrip("0").rstrip("."), int(r.seed)): r.nll
        for r in stored.itertuples()
    }


def row(label: str, fits: dict, nmf_nll: dict, paper_row: dict | None = None) -> None:
    """Per seed, over all fits, and beyond NMF's gap from the paper's row
    (``paper_row``: {sigma: mean}; default the paper's VAE)."""
    print(label)
    for name, sig in SHIFTS:
        per_seed = [
            np.array([fits[s][(sig, k)] for k in range(5) if (sig, k) in fits[s]])
            for s in sorted(fits)
        ]
        allx = np.concatenate(per_seed)
        if not allx.size:
            continue
        gap = allx.mean() - np.mean([nmf_nll[(sig, k)] for k in range(5)])
        paper_gap = (paper_row or {k: v[0] for k, v in PAPER.items()})[sig] - PAPER[
            sig
        ][1]
        seeds = " / ".join(f"{x.mean():.2f} ± {x.std():.2f}" for x in per_seed)
        print(
            f"  {name:6s} per seed {seeds}; {allx.size} fits {allx.mean():.2f}, "
            f"std {allx.std():.2f}, worst {allx.max():.2f}; minus NMF {gap:+.2f} "
            f"(paper's row minus NMF {paper_gap:+.1f}); beyond NMF's gap from the "
            f"paper's row {gap - paper_gap:+.2f}"
        )


def paired(label: str, a: dict, b: dict) -> None:
    """a - b over fits present in both (same seed, shift, data set)."""
    print(label)
    for name, sig in SHIFTS:
        d = np.array(
            [
                a[s][key] - b[s][key]
                for s in a
                if s in b
                for key in a[s]
                if key[0] == sig and key in b[s]
            ]
        )
        if d.size:
            print(
                f"  {name:6s} {d.mean():+.2f} ± {d.std(ddof=1):.2f} over {d.size} "
                f"fits (lower in {(d < 0).sum()}), |diff| up to {np.abs(d).max():.2f}"
            )


T1 = re.compile(r"^(table1[ab]) K=\d+ split (\d) (\S+) variant=\[(.*?)\] nll=([\d.]+)")
#: the paper's Tables 1a and 1b: NMF and each row's NLL
PAPER_T1 = {
    "table1a": {"NMF": 198.6, "VAE": 175.9, "Sparse VAE": 170.9, "VSC": 192.2},
    "table1b": {"NMF": 267.2, "VAE": 252.6, "Sparse VAE": 245.0, "VSC": 252.9},
}


def tables1() -> None:
    """Tables 1a and 1b: the encoder reading word proportions against standardised
    counts, same CPU, same splits and model seeds (the stored rows' settings)."""
    for table in ("table1a", "table1b"):
        fits = {}
        for kind in ("exact_counts", "proportions"):
            path = HERE / f"{table}_{kind}.txt"
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                m = T1.search(line)
                if m:
                    fits[(kind, m[3], int(m[2]))] = float(m[5])
        stored = pd.read_csv(HERE.parent / f"moran2022_{table}" / "results.csv")
        nmf_mean = stored[stored.model == "NMF"].nll.mean()
        paper = PAPER_T1[table]
        print(f"\n{table}: encoder input, this CPU (stored NMF {nmf_mean:.2f})")
        for model in dict.fromkeys(k[1] for k in fits):
            splits = [
                k
                for k in range(5)
                if ("exact_counts", model, k) in fits
                and ("proportions", model, k) in fits
            ]
            if not splits:
                continue
            a = np.array([fits[("exact_counts", model, k)] for k in splits])
            b = np.array([fits[("proportions", model, k)] for k in splits])
            d = b - a
            name = {"SVAE": "Sparse VAE", "VSC_": "VSC"}.get(model[:4], "VAE")
            ref = paper[name]
            print(
                f"  {model:14s} splits {splits}: standardised counts {a.mean():.2f} ± "
                f"{a.std():.2f}, proportions {b.mean():.2f} ± {b.std():.2f}; "
                f"proportions - counts {d.mean():+.2f} ± "
                f"{d.std(ddof=1) if d.size > 1 else float('nan'):.2f} (lower on "
                f"{(d < 0).sum()}/{d.size}); beyond NMF's gap from the paper's "
                f"{name}: counts "
                f"{a.mean() - nmf_mean - (ref - paper['NMF']):+.2f}, proportions "
                f"{b.mean() - nmf_mean - (ref - paper['NMF']):+.2f}"
            )


def main() -> None:
    nmf_nll = nmf()
    here = read(HERE / "nmf.txt", "NMF")
    diff = max(abs(v - nmf_nll[(s, k)]) for (_, s, k), v in here.items())
    print(
        f"NMF on this CPU, pinned kernels, {len(here)} data sets x shifts: max "
        f"|probe - stored| {diff:.2g}"
    )
    exact = seeds_of(read(HERE / "exact_counts.txt", "VAE_KL1overK"))
    s51_exact = seeds_of(read(S51 / "t2same_vae_kl1overk_seeds.txt", "VAE_KL1overK"))
    s51_floor = seeds_of(
        read(S51 / "t2same_vae_kl1overk_train_floor.txt", "VAE_KL1overK")
    )
    floor_prop = seeds_of(read(HERE / "floor_proportions.txt", "VAE_KL1overK"))
    script = seeds_of(
        read(HERE / "floor_proportions_script_budget.txt", "VAE_KL1overK"),
        "max_epochs=100 batch_size=100",
    )
    k5 = seeds_of(
        read(HERE / "floor_proportions_k5.txt", "VAE_KL1overK"), "n_latents=5 beta=0.2"
    )
    print("\nVAE_KL1overK, authors' test documents (nats per document)")
    row(
        " this CPU, exact log-softmax, counts input (the stored row's settings)",
        exact,
        nmf_nll,
    )
    row(
        " stop 51's CPU, the same fits (t2same_vae_kl1overk_seeds.txt)",
        s51_exact,
        nmf_nll,
    )
    paired(" this CPU minus stop 51's CPU, same seeds and data", exact, s51_exact)
    row(" stop 51's CPU, log(p + 1e-6) in training", s51_floor, nmf_nll)
    row(
        " this CPU, log(p + 1e-6) in training and proportions input",
        floor_prop,
        nmf_nll,
    )
    paired(" floor + proportions minus exact, this CPU", floor_prop, exact)
    if script:
        row(" the same at the scripts' 100 epochs, batch 100", script, nmf_nll)
        paired(
            " scripts' budget minus Table 6's (both floor + proportions)",
            script,
            floor_prop,
        )
    if k5:
        row(" the same at the scripts' 5 latents (KL / 5)", k5, nmf_nll)
    svae_exact = seeds_of(read(HERE / "svae_exact_counts.txt", "SVAE_KL1overK"))
    svae_fp = seeds_of(read(HERE / "svae_floor_proportions.txt", "SVAE_KL1overK"))
    if svae_exact:
        row(
            " SVAE_KL1overK, the row's settings (paper's row: the Sparse VAE)",
            svae_exact,
            nmf_nll,
            PAPER_SVAE,
        )
    if svae_fp:
        row(
            " SVAE_KL1overK, floor + proportions (paper's row: the Sparse VAE)",
            svae_fp,
            nmf_nll,
            PAPER_SVAE,
        )
    if svae_exact and svae_fp:
        paired(
            " SVAE_KL1overK: floor + proportions minus the row's settings",
            svae_fp,
            svae_exact,
        )
    kl1 = seeds_of(read(HERE / "vae_kl1_floor_proportions.txt", "VAE"))
    if kl1:
        row(" VAE (KL 1), floor + proportions", kl1, nmf_nll)
    tables1()


if __name__ == "__main__":
    main()
