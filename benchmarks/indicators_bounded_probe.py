"""Why ``MTLCM(gamma_bound=B)`` shrinks its latents at a small sigma_s.

On the Chen et al. Table 1 study's data sets (``indicators_table1.study_problem``)
and for each sigma_s, this fits the bounded model and reports:

* ``scale``: the median sd of the recovered latents relative to the true ones;
* ``at bound``: the fraction of the latents the fit calls spurious (c < 0.5) whose
  gamma = m / (1 - c) sits at the bound (|gamma| >= 0.99 B; gamma in latent units
  per pooled within-task RMS of y, the units of B);
* ``true causal``: the fit's mean c of the TRUE causal latents and the fraction
  of them whose gamma sits at the bound;
* ``true |gamma| > B``: the fraction of the TRUE spurious latents whose within-task
  OLS slope on y, in the same units, exceeds B (so the bound binds at the true
  scale);
* the bounded solve at the true mixing with its d column scales fitted on the same
  bounded likelihood (``upper_bound(..., fit_scales=True, gamma_bound=B)``): the
  latents' scale it prefers, its indicator accuracy and its NLL per observation,
  beside the fit's NLL (unit-free coordinates, lower is better).

Run from the repository root::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/indicators_bounded_probe.py \
        --cases 3:2:0 10:2:0 20:4:0 --sigma-s 0.1 0.03
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from identrep.metrics import causal_scores, match_latents  # noqa: E402
from indicators_table1 import (  # noqa: E402
    _task_slopes,
    fit_model,
    study_problem,
    upper_bound,
)


def probe(d, k, seed, sigma_s, bound):
    prob = study_problem(d, k, seed)
    data = prob.data
    model, cpu = fit_model(prob, sigma_s, bound)
    Zh = model.transform(data.X)
    match = match_latents(data.Z, Zh)
    c = model.causal_indicators_
    fit_acc = causal_scores(data.causal, c, match)["accuracy"]
    gamma = np.abs(model.spurious_coefs_ * model.y_scale_)
    spur = c < 0.5
    true_gamma = np.abs(_task_slopes(data.Z, data.y, data.task_ids)) * model.y_scale_
    true_spur = data.causal < 0.5
    # the fit's c and gamma of the TRUE causal latents (matched, fit order)
    causal = data.causal.astype(bool)
    c_true_causal = c[:, match][causal]
    g_true_causal = gamma[:, match][causal]
    p = data.X.shape[1]
    fit_nll = -(model.log_likelihood_ + p * np.log(model.x_scale_))
    c_ub, f_ub, scales = upper_bound(
        data, sigma_s, model.sigma_obs, True, bound, return_scales=True
    )
    ub_acc = causal_scores(data.causal, c_ub, np.arange(d))["accuracy"]
    return {
        "case": f"{d}:{k}:{seed}",
        "sigma_s": sigma_s,
        "scale": float(np.median(Zh[:, match].std(0) / data.Z.std(0))),
        "acc": fit_acc,
        "recall": causal_scores(data.causal, c, match)["recall"],
        "at bound": float(np.mean(gamma[spur] >= 0.99 * bound)),
        "true |gamma| > B": float(np.mean(true_gamma[true_spur] > bound)),
        "true causal: mean c": float(c_true_causal.mean()),
        "true causal: at bound": float(np.mean(g_true_causal >= 0.99 * bound)),
        "truth+scales scale": float(np.median(1.0 / scales)),
        "truth+scales acc": ub_acc,
        "truth+scales NLL": float(f_ub),
        "fit NLL": float(fit_nll),
        "cpu_s": round(cpu, 2),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["3:2:0", "10:2:0", "20:4:0"])
    ap.add_argument("--sigma-s", nargs="+", type=float, default=[0.1, 0.03])
    ap.add_argument("--gamma-bound", type=float, default=1.5)
    args = ap.parse_args(argv)
    rows = []
    for case in args.cases:
        d, k, seed = (int(v) for v in case.split(":"))
        for s in args.sigma_s:
            rows.append(probe(d, k, seed, s, args.gamma_bound))
            if len(rows) == 1:
                print("| " + " | ".join(rows[0]) + " |")
                print("|" + "---|" * len(rows[0]))
            cells = [
                f"{v:.3f}" if isinstance(v, float) else str(v)
                for v in rows[-1].values()
            ]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
