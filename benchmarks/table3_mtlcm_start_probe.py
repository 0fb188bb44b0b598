"""Table 3's MTLCM stage refitted from other starts on the stored MTRN features.

For the MTLCM runs of a table3 study folder at one latent size, stage 2 is fitted
again on each seed's stored standardised features (float32 as stored) with the
pipeline's settings and stage-2 seed, but ``init="random"`` and, optionally, a
capped ``max_iter``; the agreement across seeds (Pearson MCC x 100, the report's
strong MCC) of the refitted latents is printed beside that of the stored ones,
with each refit's agreement to its own stored latents. Run from the repository
root, e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src python \\
        benchmarks/table3_mtlcm_start_probe.py --run /work/runs/t3_mtlcm_d40 --d 40 \\
        --max-iter 3000 30
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import time
import warnings

import numpy as np

from identrep.datasets import load_superconductivity
from identrep.metrics import mcc
from identrep.models import MTLCM
from identrep.utils.seeding import check_random_state
from table3_mtlcm_agreement import load


def stage2_seed(run: str, d: int, seed: int) -> int:
    """The seed TaskIdentifiable gave MTLCM in the stored run (its second draw)."""
    (path,) = glob.glob(f"{run}/records/table3-MTLCM-d{d}-*-s{seed}-*.json")
    with open(path, encoding="utf-8") as f:
        rng = check_random_state(json.load(f)["model_seed"])
    return int(rng.integers(0, 2**32 - 1, size=2)[1])


def agreement(latents: dict[int, np.ndarray]) -> tuple[float, float]:
    """Mean and std (ddof=0) x 100 of Pearson MCC over the pairs of seeds."""
    s = [mcc(latents[a], latents[b]) for a, b in itertools.combinations(latents, 2)]
    return 100 * float(np.mean(s)), 100 * float(np.std(s))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="a table3 study folder (--out)")
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--max-iter", nargs="+", type=int, default=[3000])
    args = ap.parse_args(argv)
    t0 = time.process_time()
    runs = load(args.run, args.d)
    _, Y = load_superconductivity(as_frame=False, return_X_y=True)
    m, s = agreement({k: z for k, (_, z) in runs.items()})
    print(f"MTLCM d = {args.d}, {args.run}, seeds {sorted(runs)}")
    print(f"stored (init 'jd', max_iter 3000): across seeds {m:.2f} ± {s:.2f}")
    for max_iter in args.max_iter:
        refit, own, ll = {}, [], []
        for seed, (F, Z) in runs.items():
            model = MTLCM(
                n_latents=args.d,
                sigma_obs=1e-4,
                init="random",
                max_iter=max_iter,
                random_state=stage2_seed(args.run, args.d, seed),
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(F, Y)
            refit[seed] = model.transform(F)
            own.append(100 * mcc(refit[seed], Z))
            ll.append(model.log_likelihood_)
        m, s = agreement(refit)
        print(
            f"init 'random', max_iter {max_iter}: across seeds {m:.2f} ± {s:.2f}; "
            f"against the stored latents of the same seed "
            + ", ".join(f"{v:.2f}" for v in own)
            + "; log-likelihood "
            + ", ".join(f"{v:.4f}" for v in ll)
        )
    print(f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
