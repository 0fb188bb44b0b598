"""Per-seed statistics behind the thresholds of the VSC and OI-VAE recovery tests.

Runs exactly the fits of ``tests/integration/test_vsc_recovery.py`` and
``tests/integration/test_oivae_support.py`` (their data generators are imported
from the test files) and prints, per seed, what the tests assert on:

    PYTHONPATH=src python benchmarks/calibrate_sparse_coding.py --seeds 0-9

``--vsc-prior pseudo_inputs`` fits the VSC test's second case (the authors' code's
pseudo-input prior) instead of the fixed prior.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import time
import warnings
from pathlib import Path

from scipy.stats import spearmanr

from identrep.metrics import mcc
from identrep.models.vae import OIVAE, VSC

TESTS = Path(__file__).resolve().parents[1] / "tests" / "integration"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def vsc(seed: int, prior: str = "spike_slab") -> str:
    X, active = _load("test_vsc_recovery")._sparse_codes(seed)
    m = VSC(
        4,
        alpha=0.25,
        c_start=10.0,
        c_end=10.0,
        warmup_end=0.0,
        hidden_sizes=(32,),
        decoder_var=0.01,
        lr=3e-3,
        max_epochs=60,
        prior=prior,
        random_state=seed,
    ).fit(X[:1000])
    used = m.spike_probabilities(X[1000:]).sum(1)
    n_active = active[1000:].sum(1)
    rho = spearmanr(n_active, used).statistic
    gap = used[n_active > 0].mean() - used[n_active == 0].mean()
    return f"VSC ({prior}) seed {seed}: rho {rho:.3f}  gap {gap:.3f}"


def oivae(seed: int) -> str:
    mod = _load("test_oivae_support")
    X, Z, groups = mod._grouped(seed)
    m = OIVAE(
        3,
        groups=groups,
        group_lasso=0.3,
        decoder_var=0.01,
        lr=1e-2,
        max_epochs=60,
        random_state=seed,
    ).fit(X)
    wrong = min(
        int((m.support_[:, list(p)] != mod.SUPPORT).sum())
        for p in itertools.permutations(range(3))
    )
    N = m.group_norms_ / m.group_norms_.max()
    dropped = N[~m.support_].max() if (~m.support_).any() else 0.0
    return (
        f"OIVAE seed {seed}: wrong links {wrong}  largest dropped {dropped:.3f}  "
        f"exact zeros {int((m.group_norms_ == 0).sum())}  "
        f"MCC {mcc(Z, m.transform(X)):.3f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-9", help="a range a-b or a single seed")
    p.add_argument("--only", choices=["vsc", "oivae"], default=None)
    p.add_argument(
        "--vsc-prior", choices=["spike_slab", "pseudo_inputs"], default="spike_slab"
    )
    args = p.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)

    def vsc_fit(seed):
        return vsc(seed, args.vsc_prior)

    for name, fn in (("vsc", vsc_fit), ("oivae", oivae)):
        if args.only not in (None, name):
            continue
        for s in seeds:
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                line = fn(s)
            print(f"{line}  ({time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
