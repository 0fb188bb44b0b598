"""MTLCM's causal indicators on the Table 1 process, against three references.

Data: ``make_linear_tasks`` (random Gaussian mixing, T tasks x n samples, MTLCM
seeded by the seed) or, with ``--study``, the Chen et al. Table 1 study's own data
sets (the authors' mixing matrices; the study's n_init and model seeds). Each data
set is fitted once per variant (``--variants GAMMA_BOUND:SIGMA_S``: free or
bounded slopes, any sigma_s), and each fit is reported with:

* ``fit``: MCC (pooled Pearson; per task Spearman) and indicator accuracy /
  precision / recall against the true masks, after the pooled matching;
* ``upper bound (A = truth)``: the free indicator solve (``ProfiledObjective``) at
  the true mixing A in the fit's unit-free coordinates and the fit's sigma_s; once
  more with only the d column scales of the true A fitted by L-BFGS on the same
  likelihood (the latents' scale is not identified by the data alone; the model
  fixes it through "causal = unit variance given y"); for bounded fits also the
  bounded solve at the true A. ``gap`` = fit accuracy - the (free) bound;
* ``CI``: the within-task correlation test of each recovered latent against y
  (:func:`identrep.metrics.conditional_independence_test`, Pearson, Bonferroni
  over all T d tests at 0.05), its agreement with the fitted indicators under the
  reading "causal = independent of y", and the same test on the TRUE latents
  against the TRUE masks;
* ``rules``: the fitted indicators thresholded at 0.99 instead of 0.5, and a
  scale-free effect-size rule, "causal iff y explains less than half of the
  latent's within-task variance" (R^2 < 0.5), on the recovered and true latents;
* ``slopes``: the fraction of latents called causal whose fitted slope is large,
  |m_tj| / sd_t(z_j) > 0.1, and the same for the OLS slopes of the true causal
  latents on y within their task.

``--select-sigma S1 S2 ...`` adds a probe that uses no ground truth: the free
model is fitted at each sigma_s on a seeded 1 - ``--val-frac`` of every task's
rows, the sigma_s with the highest held-out log-likelihood (``MTLCM.score`` on
the other rows) is chosen, and the full-data free fit at that sigma_s is reported.

A variant's SIGMA_S may be ``auto`` (e.g. ``--variants free:auto``): the library's
``MTLCM(sigma_s="auto")``, which chooses sigma_s from ``sigma_s_grid`` (default
0.1, 0.03, 0.01) by held-out likelihood on its own seeded 80/20 split of every
task's rows and refits on all rows; its row reports the chosen value
(``sigma_s``), the held-out scores (``heldout``) and the CPU time of the whole
selection and refit (``cpu_s``); its bound is computed at the chosen value.

A summary (one line per configuration and variant, ranges over the seeds, and
whether every seed is within 1 point of its A = truth bound) ends the output.
Run from the repository root, e.g.::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/indicators_table1.py \
        --configs 10:2 20:4 50:2 --seeds 0 1
    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/indicators_table1.py \
        --study --seeds 0 1 2 3 4 --variants free:0.1 free:0.03 1.5:0.1 1.5:0.03
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from scipy.optimize import minimize

import identrep as ir
from identrep.metrics import (
    causal_scores,
    conditional_independence_test,
    match_latents,
    mcc,
    mcc_per_task,
)
from identrep.models.multitask._mtlcm_bounded import BoundedObjective
from identrep.models.multitask._mtlcm_objective import ProfiledObjective
from identrep.models.multitask._mtlcm_solver import stats_to_torch
from identrep.models.multitask._stats import data_units, task_statistics
from identrep.utils.validation import check_multitask


def _task_sd(Z, t):
    """(T, d) within-task standard deviations of the columns of Z."""
    T = int(t.max()) + 1
    return np.stack([Z[t == k].std(axis=0) for k in range(T)])


def _task_slopes(Z, y, t):
    """(T, d) within-task OLS slopes of each column of Z on y."""
    T = int(t.max()) + 1
    out = np.empty((T, Z.shape[1]))
    for k in range(T):
        Zk, yk = Z[t == k], y[t == k]
        yc = yk - yk.mean()
        out[k] = (Zk - Zk.mean(0)).T @ yc / (yc @ yc)
    return out


def _task_r2(Z, y, t):
    """(T, d) within-task squared correlations of each column of Z with y."""
    T = int(t.max()) + 1
    out = np.empty((T, Z.shape[1]))
    for k in range(T):
        Zk, yk = Z[t == k], y[t == k]
        Zc, yc = Zk - Zk.mean(0), yk - yk.mean()
        out[k] = (Zc.T @ yc) ** 2 / ((Zc**2).sum(0) * (yc @ yc))
    return out


def upper_bound(
    data, sigma_s, sigma_obs, fit_scales, gamma_bound=None, return_scales=False
):
    """Indicators of the inner solve at the true mixing (optionally with its
    column scales fitted); returns (c, nll per sample). ``gamma_bound`` None: the
    free, profiled solve; a number: the bounded solve of ``MTLCM(gamma_bound=B)``.
    ``return_scales``: also return the fitted column scales (ones if not fitted)."""
    md = check_multitask(data.X, data.y, data.task_ids, min_samples=2)
    stats = data_units(task_statistics(md, x_unit=None, y_unit=None))
    n, Sxx, sxy, syy = stats_to_torch(stats, torch.device("cpu"))
    if gamma_bound is None:
        obj = ProfiledObjective(n, Sxx, sxy, syy, sigma_s, sigma_obs)
    else:
        obj = BoundedObjective(n, Sxx, sxy, syy, sigma_s, sigma_obs, gamma_bound)
    A0 = torch.as_tensor(data.mixing / stats.x_unit, dtype=torch.float64)
    scales = np.ones(A0.shape[1])
    if fit_scales:

        def fg(logs):
            s = torch.as_tensor(np.exp(logs), dtype=torch.float64)
            f, gA, _ = obj(A0 * s)
            return f, ((gA * A0 * s).sum(0)).numpy()

        res = minimize(fg, np.zeros(A0.shape[1]), jac=True, method="L-BFGS-B")
        scales = np.exp(res.x)
        A0 = A0 * torch.as_tensor(scales, dtype=torch.float64)
    f, _, v = obj(A0, grad=False)
    lo = sigma_s**2
    c = ((v - lo) / (1.0 - lo)).clamp(0.0, 1.0).numpy()
    return (c, f, scales) if return_scales else (c, f)


# ------------------------------------------------------------------ problems
class Problem:
    """One data set with the MTLCM settings it is fitted with, and a cache of
    the upper bounds (they depend on the data, sigma_s and the solve only)."""

    def __init__(self, data, d, k, seed, model_kw):
        self.data, self.d, self.k, self.seed = data, d, k, seed
        self.model_kw = model_kw
        self._ub = {}

    def bound(self, sigma_s, sigma_obs, fit_scales=False, gamma_bound=None):
        key = (sigma_s, sigma_obs, fit_scales, gamma_bound)
        if key not in self._ub:
            c, _ = upper_bound(self.data, sigma_s, sigma_obs, fit_scales, gamma_bound)
            self._ub[key] = causal_scores(self.data.causal, c, np.arange(self.d))
        return self._ub[key]


def random_problem(d, k, seed, n_tasks, n_samples):
    """``make_linear_tasks`` with random Gaussian mixing; MTLCM seeded by seed."""
    data = ir.datasets.make_linear_tasks(
        n_tasks=n_tasks,
        n_samples=n_samples,
        n_latents=d,
        n_causal=k,
        random_state=seed,
    )
    return Problem(data, d, k, seed, {"random_state": seed})


def study_problem(d, k, seed):
    """The Chen et al. Table 1 study's own data set (the authors' mixing matrix
    for that seed) and its MTLCM settings (n_init, model seed)."""
    from identrep.experiments.studies.chen2024_table1 import grid, make_data

    for config in grid(seeds=seed + 1, models=("MTLCM",)):
        if (config.n_latents, config.n_causal, config.seed) == (d, k, seed):
            data, _ = make_data(config)
            kw = {
                "n_latents": d,
                "n_init": config.n_init,
                "random_state": config.model_seed(),
            }
            return Problem(data, d, k, seed, kw)
    raise ValueError(f"no Table 1 configuration d={d}, k={k} in the study's grid")


def parse_variant(text):
    """'free:0.1' -> (None, 0.1); '1.5:0.03' -> (1.5, 0.03); 'free:auto' ->
    (None, 'auto') (gamma_bound, sigma_s)."""
    try:
        gb, s = text.split(":")
        return (None if gb == "free" else float(gb)), (s if s == "auto" else float(s))
    except ValueError as exc:
        raise SystemExit(
            f"--variants: expected GAMMA_BOUND:SIGMA_S with GAMMA_BOUND 'free' or a "
            f"number (e.g. free:0.1 1.5:0.03), got {text!r}"
        ) from exc


def variant_label(gamma_bound, sigma_s):
    kind = "free" if gamma_bound is None else f"B={gamma_bound:g}"
    return f"{kind}, sigma_s {sigma_s if isinstance(sigma_s, str) else f'{sigma_s:g}'}"


# ------------------------------------------------------------------ one fit
def truth_stats(prob, alpha):
    """Per data set, model-free: the CI test and the rules on the TRUE latents."""
    data, truth = prob.data, prob.data.causal.astype(bool)
    t = data.task_ids
    r2_true = _task_r2(data.Z, data.y, t)
    dep_true, _ = conditional_independence_test(data.Z, data.y, t, alpha=alpha)
    ratio_true = np.abs(_task_slopes(data.Z, data.y, t)) / _task_sd(data.Z, t)
    return {
        "r2_acc_true": float(np.mean((r2_true < 0.5) == truth)),
        "ci_true_agree_truth": float(np.mean(truth == ~dep_true)),
        "ci_true_causal_dependent": float(dep_true[truth].mean()),
        "ci_true_spurious_dependent": float(dep_true[~truth].mean()),
        "slope_true_frac": float(np.mean(ratio_true[truth] > 0.1)),
    }


def fit_model(prob, sigma_s, gamma_bound, X=None, y=None, t=None):
    data = prob.data
    X = data.X if X is None else X
    y = data.y if y is None else y
    t = data.task_ids if t is None else t
    c0 = time.process_time()
    model = ir.MTLCM(sigma_s=sigma_s, gamma_bound=gamma_bound, **prob.model_kw)
    model.fit(X, y, task_ids=t)
    return model, time.process_time() - c0


def evaluate(prob, model, cpu_s, alpha):
    """Scores of a full-data fit against the truth, its bounds and the CI test."""
    data, truth, d = prob.data, prob.data.causal, prob.d
    Zh = model.transform(data.X)
    match = match_latents(data.Z, Zh)
    sigma_s = model.sigma_s_  # the fit's value ("auto": the chosen one)
    row = {"d": d, "k": prob.k, "seed": prob.seed, "sigma_s": sigma_s}
    row["gamma_bound"] = model.gamma_bound
    row["variant"] = variant_label(model.gamma_bound, model.sigma_s)
    if model.sigma_s_scores_ is not None:  # sigma_s="auto": the held-out scores
        grid, sc = model.sigma_s_grid, model.sigma_s_scores_
        row["heldout"] = {f"{s:g}": float(v) for s, v in zip(grid, sc, strict=True)}
    row["cpu_s"] = round(cpu_s, 2)
    row["converged"], row["n_iter"] = bool(model.converged_), int(model.n_iter_)
    row["mcc"] = mcc(data.Z, Zh)
    row["mcc_task"] = mcc_per_task(data.Z, Zh, data.task_ids, "spearman")
    # scale the likelihood gives each latent, relative to the true (unit) one
    row["scale"] = float(np.median(Zh[:, match].std(0) / data.Z.std(0)))
    fit = causal_scores(truth, model.causal_indicators_, match)
    row.update({f"fit_{m}": fit[m] for m in ("accuracy", "precision", "recall")})
    row["fit_ll"] = model.log_likelihood_
    row["fit_acc_thr99"] = causal_scores(
        truth, model.causal_indicators_, match, threshold=0.99
    )["accuracy"]
    # scale-free effect-size rule: causal iff y explains < half the latent's
    # within-task variance (R^2 < 0.5), on the recovered latents
    r2 = _task_r2(Zh, data.y, data.task_ids)
    row["r2_acc_fit"] = causal_scores(truth, (r2 < 0.5).astype(float), match)[
        "accuracy"
    ]
    # the upper bound: the free solve at the true mixing, this sigma_s
    for name, scales in (("ub", False), ("ubs", True)):
        sc = prob.bound(sigma_s, model.sigma_obs, scales)
        row.update({f"{name}_{m}": sc[m] for m in ("accuracy", "precision", "recall")})
    if model.gamma_bound is not None:  # the same with the fit's own bounded solve
        sc = prob.bound(sigma_s, model.sigma_obs, False, model.gamma_bound)
        row["ubb_accuracy"] = sc["accuracy"]
    row["gap"] = row["fit_accuracy"] - row["ub_accuracy"]
    # the CI test on the recovered latents, in the fitted latents' order
    dep, _ = conditional_independence_test(Zh, data.y, data.task_ids, alpha=alpha)
    called = model.causal_mask_
    row["ci_agree_fit"] = float(np.mean(called == ~dep))
    row["ci_fit_causal_dependent"] = float(dep[called].mean())
    # the slope statistic on the fit
    ratio = np.abs(model.target_slopes_) / _task_sd(Zh, data.task_ids)
    row["slope_fit_frac"] = float(np.mean(ratio[called] > 0.1))
    return row


def heldout_split(prob, val_frac):
    """Boolean validation mask: in every task, a seeded val_frac of its rows."""
    t = prob.data.task_ids
    rng = np.random.default_rng([prob.seed, prob.d, prob.k, 20261126])
    val = np.zeros(len(t), dtype=bool)
    for task in np.unique(t):
        rows = np.flatnonzero(t == task)
        n_val = int(round(val_frac * len(rows)))
        val[rng.permutation(rows)[:n_val]] = True
    return val


def select_sigma(prob, sigmas, val_frac):
    """The probe: free MTLCM at each sigma_s on the training rows of every task,
    scored by the mean held-out log-likelihood on the rest; returns (the chosen
    sigma_s, {sigma_s: held-out score}, CPU s). No ground truth is used."""
    data, val = prob.data, heldout_split(prob, val_frac)
    tr = ~val
    scores, cpu = {}, 0.0
    for s in sigmas:
        model, c = fit_model(prob, s, None, data.X[tr], data.y[tr], data.task_ids[tr])
        scores[s] = float(
            model.score(data.X[val], data.y[val], task_ids=data.task_ids[val])
        )
        cpu += c
    return max(sigmas, key=lambda s: scores[s]), scores, cpu


def run_problem(prob, variants, alpha, sigmas=(), val_frac=0.2):
    """All variants on one data set (and the held-out sigma_s choice if asked)."""
    base = truth_stats(prob, alpha)
    rows = {}
    for gb, s in variants:
        model, cpu = fit_model(prob, s, gb)
        rows[gb, s] = dict(evaluate(prob, model, cpu, alpha), **base)
    out = list(rows.values())
    if sigmas:
        chosen, scores, cpu = select_sigma(prob, sigmas, val_frac)
        if (None, chosen) not in rows:
            model, c = fit_model(prob, chosen, None)
            rows[None, chosen] = dict(evaluate(prob, model, c, alpha), **base)
        row = dict(rows[None, chosen], variant="held-out sigma_s (probe)")
        row["heldout"] = {str(s): v for s, v in scores.items()}
        row["select_cpu_s"] = round(cpu, 2)
        out.append(row)
    return out


# ------------------------------------------------------------------ output
_COLS = [
    ("d", "d"),
    ("k", "k"),
    ("seed", "seed"),
    ("variant", "variant"),
    ("mcc", "MCC"),
    ("mcc_task", "MCC per task"),
    ("scale", "sd(z_hat)/sd(z)"),
    ("fit_accuracy", "fit acc"),
    ("fit_precision", "fit prec"),
    ("fit_recall", "fit rec"),
    ("ub_accuracy", "A=true acc"),
    ("ub_precision", "A=true prec"),
    ("ub_recall", "A=true rec"),
    ("gap", "acc - (A=true)"),
    ("ubs_accuracy", "A=true+scales acc"),
    ("ubb_accuracy", "A=true bounded acc"),
    ("fit_acc_thr99", "fit acc c>=0.99"),
    ("r2_acc_fit", "R2<0.5 acc (fit z)"),
    ("r2_acc_true", "R2<0.5 acc (true z)"),
    ("ci_agree_fit", "CI~fit agree"),
    ("ci_fit_causal_dependent", "fit-causal dep. on y"),
    ("ci_true_agree_truth", "CI(true z)~truth"),
    ("ci_true_causal_dependent", "true causal dep."),
    ("ci_true_spurious_dependent", "true spur. dep."),
    ("slope_fit_frac", "fit causal |m|/sd>0.1"),
    ("slope_true_frac", "true causal |m|/sd>0.1"),
    ("fit_ll", "fit log-lik"),
    ("cpu_s", "CPU s"),
    ("converged", "converged"),
]


def _fmt(v):
    if v is None:
        return ""
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _rng(vals, pts=False):
    """'lo-hi' (or one value) of a list; pts: in points (x100), signed."""
    f = (lambda v: f"{100 * v:+.1f}") if pts else (lambda v: f"{v:.3f}")
    lo, hi = min(vals), max(vals)
    return f(lo) if f(lo) == f(hi) else f"{f(lo)} to {f(hi)}"


def summary(rows, tol=0.01):
    """Markdown, one line per (configuration, variant) over its seeds; 'target'
    is met when every seed's accuracy is within tol of its A = truth bound."""
    groups = {}
    for r in rows:
        groups.setdefault((r["k"], r["d"], r["variant"]), []).append(r)
    head = [
        "k",
        "d",
        "variant",
        "seeds",
        "MCC per task",
        "sd(z_hat)/sd(z)",
        "mean log-lik",
        "acc",
        "prec",
        "rec",
        "A=true acc",
        "gap (points)",
        "within 1 point",
        "CI agreement",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (k, d, name), rs in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1])):
        if name.startswith("held-out") or name.endswith("auto"):
            name += " " + "/".join(f"{r['sigma_s']:g}" for r in rs)
        gaps = [r["gap"] for r in rs]
        cells = [str(k), str(d), name, str(len(rs))]
        cells += [_rng([r["mcc_task"] for r in rs]), _rng([r["scale"] for r in rs])]
        cells.append(f"{np.mean([r['fit_ll'] for r in rs]):.2f}")
        for m in ("fit_accuracy", "fit_precision", "fit_recall", "ub_accuracy"):
            cells.append(_rng([r[m] for r in rs]))
        cells.append(_rng(gaps, pts=True))
        met = sum(g >= -tol for g in gaps)
        cells.append("yes" if met == len(rs) else f"no ({len(rs) - met} of {len(rs)})")
        cells.append(_rng([r["ci_agree_fit"] for r in rs]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gap_table(rows, variants, tol=0.01):
    """Markdown, one line per configuration: for each variant (labels as in
    ``variant_label``) the mean gap to the A = truth bound in points, the worst
    seed and the seeds more than ``tol`` below it; the sigma_s of each seed and
    the mean CPU s per fit of each variant."""
    head = ["k", "d"] + [f"{v}: gap (worst) [misses]" for v in variants]
    head += ["sigma_s per seed, " + v for v in variants if v.endswith("auto")]
    head += ["CPU s per fit, " + " / ".join(variants)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    configs = sorted({(r["k"], r["d"]) for r in rows})
    for k, d in configs:
        cells, chosen, cpu = [str(k), str(d)], [], []
        for v in variants:
            rs = sorted(
                (r for r in rows if (r["k"], r["d"], r["variant"]) == (k, d, v)),
                key=lambda r: r["seed"],
            )
            if not rs:
                cells.append("")
                cpu.append("")
                chosen += [""] if v.endswith("auto") else []
                continue
            g = [100 * r["gap"] for r in rs]
            miss = sum(x < -100 * tol for x in g)
            cells.append(
                f"{np.mean(g):+.2f} ({min(g):+.2f}) [{miss}/{len(g)}]"
                + (" **miss**" if miss else "")
            )
            cpu.append(f"{np.mean([r['cpu_s'] for r in rs]):.1f}")
            if v.endswith("auto"):
                chosen.append(" ".join(f"{r['sigma_s']:g}" for r in rs))
        lines.append("| " + " | ".join(cells + chosen + [" / ".join(cpu)]) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--study",
        action="store_true",
        help="the Chen et al. Table 1 study's own data and MTLCM settings "
        "(--configs then defaults to its 9 configurations)",
    )
    ap.add_argument("--configs", nargs="+", default=None, help="d:k pairs")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--sigma-s", type=float, default=0.1, help="MTLCM sigma_s")
    ap.add_argument(
        "--gamma-bound", type=float, default=None, help="MTLCM gamma_bound (None: free)"
    )
    ap.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="GAMMA_BOUND:SIGMA_S fits per data set, e.g. free:0.1 1.5:0.03 free:auto "
        "(overrides --sigma-s and --gamma-bound)",
    )
    ap.add_argument(
        "--select-sigma",
        nargs="*",
        type=float,
        default=[],
        help="probe: choose the free model's sigma_s among these by the held-out "
        "log-likelihood of a per-task validation split",
    )
    ap.add_argument("--val-frac", type=float, default=0.2)
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--summary", default=None, help="write the summary table here")
    ap.add_argument(
        "--rows-from",
        nargs="+",
        default=None,
        help="fit nothing: summarise the rows of these --json files",
    )
    ap.add_argument(
        "--gap-table",
        nargs="+",
        default=None,
        help="with --rows-from: also print the gap to the bound per configuration "
        "for these variants (GAMMA_BOUND:SIGMA_S, e.g. free:0.1 free:0.03 free:auto)",
    )
    args = ap.parse_args(argv)
    if args.rows_from:
        rows = []
        for path in args.rows_from:
            with open(path) as fh:
                rows += json.load(fh)
        _write_summary(rows, args.summary)
        if args.gap_table:
            labels = [variant_label(*parse_variant(v)) for v in args.gap_table]
            print("\n" + gap_table(rows, labels))
        return
    variants = (
        [parse_variant(v) for v in args.variants]
        if args.variants
        else [(args.gamma_bound, args.sigma_s)]
    )
    if args.configs is not None:
        configs = [tuple(int(v) for v in c.split(":")) for c in args.configs]
    elif args.study:
        from identrep.experiments.studies.chen2024_table1 import TABLE1_DIMS

        configs = [(d, k) for k, d in TABLE1_DIMS]
    else:
        configs = [(10, 2), (20, 4), (50, 2)]
    rows = []
    print("| " + " | ".join(h for _, h in _COLS) + " |")
    print("|" + "---|" * len(_COLS), flush=True)
    for d, k in configs:
        for seed in args.seeds:
            if args.study:
                prob = study_problem(d, k, seed)
            else:
                prob = random_problem(d, k, seed, args.tasks, args.samples)
            for row in run_problem(
                prob, variants, args.alpha, args.select_sigma, args.val_frac
            ):
                rows.append(row)
                print(
                    "| " + " | ".join(_fmt(row.get(c)) for c, _ in _COLS) + " |",
                    flush=True,
                )
            if args.json:  # rewritten after every data set: a stopped run keeps rows
                with open(args.json, "w") as fh:
                    json.dump(rows, fh, indent=1)
    _write_summary(rows, args.summary)


def _write_summary(rows, path):
    text = summary(rows)
    print("\n" + text)
    if path:
        with open(path, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
