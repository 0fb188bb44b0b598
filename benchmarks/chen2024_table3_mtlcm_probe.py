"""Table 3 MTLCM fitted the reference code's way, on the stored stage-1 features.

The authors' code (``../shared/reference/mtlcm_reference.md`` sections 3 and
5.1) fits stage 2 on the superconductivity data from a random start (mixing
entries U(-1/sqrt(d), 1/sqrt(d)), causal logits and spurious coefficients
N(0, 1)) with a fixed 20 epochs of constant-rate Adam (lr 0.1; its plateau
scheduler cannot fire in 20 epochs) on shuffled minibatches of 256 rows of the
long format (task, material), sigma_obs 1e-4 and sigma_s 0.1, and stops there.
identrep starts from joint diagonalisation and runs L-BFGS to convergence.

This probe takes the standardised MTRN features the study stored for every
seed (``features`` in ``<run>/latents/*.npz``, no MTRN retraining), fits MTLCM
the reference's way on them, and reports per latent size:

- the cross-seed strong MCC (Pearson MCC x 100, all materials, no CCA: the
  reference's ``cal_mcc`` and our report's) of the reference-procedure latents
  after every epoch, beside ours (the stored latents) and the paper's;
- each fit's marginal log-likelihood per observation (exact, with
  sigma_obs^2 I in the covariance) at its last iterate, at the same mixing
  with the per-task (c, gamma) re-profiled in closed form, and ours.

The loss is the reference's mean per-observation negative log-density with
``Sigma_t = A V_t A^T`` written in latent space,

    -log p(x | y, t) = log|det A| + 1/2 sum_j [log v_tj + (z_j - m_tj y)^2 / v_tj]
                       + d/2 log(2 pi),   z = A^{-1} x,

with v_t = c_t + sigma_s^2 (1 - c_t), m_t = gamma_t (1 - c_t), c_t =
sigmoid(logits). The dropped sigma_obs^2 = 1e-8 on Sigma_t's diagonal is at
the float32 rounding of the reference's own covariance (diagonal entries 0.1-1,
which the reference builds in float32); ``--check`` compares this gradient with
autograd of the reference's per-sample ``MultivariateNormal`` loss
(``benchmarks/_reference_style.py``, with sigma_obs) on one minibatch. Gradients
are written out in numpy and Adam (torch's defaults: betas 0.9 / 0.999, eps
1e-8, bias correction) is applied by hand, because one torch autograd step
costs about 2 ms of Python overhead at these sizes, 133,000 steps per fit.

Differences from the reference kept on purpose: 80 tasks and 86 inputs (the
study drops critical_temp from both; the reference has 81 / 87), float64
arithmetic, numpy's shuffling instead of torch's DataLoader; the initial
parameters are the reference's draws (``torch.manual_seed(seed)``, then its
module's parameters in its order).

``--features-dir DIR --data known-tc|tc-leak|study`` takes the seeds' features,
latents and log-likelihoods from ``table3_mtrn_recipe_probe.py --mtlcm --save DIR``
instead (files ``d<d>-<data>-<recipe>-seed<s>.npz``, ``--recipe`` study or
authors) and the targets of that
``--data``: with ``tc-leak`` the reference's own 81 tasks and 87 inputs on the
19,137 materials with a critical temperature.

Run from the repository root, e.g.::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src python \\
        benchmarks/chen2024_table3_mtlcm_probe.py --d 10 20 40 --check \\
        --out /tmp/probe.json
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import math
import time
from pathlib import Path

import numpy as np

from identrep.experiments.studies.chen2024_table3 import load_real_data
from identrep.metrics import mcc

RUNS = {
    5: "/work/runs/t3_mtlcm_d5_20",
    10: "/work/runs/t3_mtlcm_d5_20",
    20: "/work/runs/t3_mtlcm_d5_20",
    40: "/work/runs/t3_mtlcm_d40",
}
#: The paper's MTLCM strong MCC x 100 (mean, std), Table 3.
PAPER = {5: (98.90, 0.03), 10: (96.93, 0.12), 20: (84.56, 1.11), 40: (46.31, 0.34)}
SIGMA_S, SIGMA_OBS = 0.1, 1e-4
LOG2PI = math.log(2 * math.pi)


def load_seeds(run: str, d: int) -> dict[int, dict]:
    """Seed index -> {features, latents, log_likelihood} of the MTLCM runs at
    ``d`` (the log-likelihood from each run's record)."""
    out = {}
    for path in sorted(glob.glob(f"{run}/records/table3-MTLCM-d{d}-*.json")):
        rec = json.loads(Path(path).read_text(encoding="utf-8"))
        with np.load(f"{run}/latents/{rec['run_id']}.npz") as z:
            out[rec["config"]["seed"]] = {
                "features": z["features"].astype(np.float64),
                "latents": z["latents"].astype(np.float64),
                "log_likelihood": rec["metrics"]["log_likelihood"],
            }
    if len(out) < 2:
        raise FileNotFoundError(
            f"{run}: expected the records and latents of at least 2 MTLCM seeds "
            f"at d = {d}, found {len(out)}."
        )
    return out


def load_saved_seeds(
    folder: str, d: int, data: str, recipe: str, seeds
) -> dict[int, dict]:
    """Seed index -> {features, latents, log_likelihood} written by
    ``table3_mtrn_recipe_probe.py --mtlcm --save``."""
    out = {}
    for s in seeds:
        path = Path(folder) / f"d{d}-{data}-{recipe}-seed{s}.npz"
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: expected the saved features of seed {s} at d = {d} "
                f"(table3_mtrn_recipe_probe.py --mtlcm --data {data} "
                f"--recipes {recipe} --save {folder})"
            )
        with np.load(path) as z:
            out[s] = {
                "features": z["features"].astype(np.float64),
                "latents": z["latents"].astype(np.float64),
                "log_likelihood": float(z["log_likelihood"]),
            }
    return out


def standardised_targets(data: str | None = None) -> np.ndarray:
    """The study's targets (21,263 x 80), or those of the recipe probe's
    ``--data``, standardised per task as the reference does (StandardScaler:
    population std)."""
    if data is None:
        Y = load_real_data(None).Y
    else:
        from table3_mtrn_recipe_probe import load_data

        Y = load_data(data)[1]
    if np.isnan(Y).any():
        raise ValueError("the Table 3 targets have missing entries; expected none")
    return (Y - Y.mean(0)) / Y.std(0)


def reference_init(d: int, n_tasks: int, seed: int):
    """The reference's initial (A, logits, gamma): its module's draws after
    ``torch.manual_seed(seed)``."""
    import torch

    from _reference_style import ReferenceStyleMTLCM

    torch.manual_seed(seed)
    m = ReferenceStyleMTLCM(d, n_tasks, SIGMA_S, SIGMA_OBS)
    return tuple(
        p.detach().double().numpy().copy()
        for p in (m.A.weight, m.c_params, m.gamma_params)
    )


def loss_grad(A, logits, gamma, x, y, t, n_tasks):
    """Mean per-row loss (without d/2 log 2 pi) and its gradients (A, logits,
    gamma), through the minibatch's per-task sums of z^2, z y, y^2 and counts;
    the rows must be sorted by task ``t``."""
    B, d = x.shape
    Bm = np.linalg.inv(A)
    Z = x @ Bm.T
    s = 1.0 / (1.0 + np.exp(-logits))
    v = SIGMA_S**2 + (1.0 - SIGMA_S**2) * s
    m = gamma * (1.0 - s)
    yc = y[:, None]
    # per-task sums as differences of a cumulative sum at the task boundaries
    ends = np.flatnonzero(np.r_[t[1:] != t[:-1], True])
    C = np.cumsum(np.hstack([Z * Z, Z * yc, yc * yc, np.ones_like(yc)]), axis=0)[ends]
    C[1:] -= C[:-1].copy()
    H = np.zeros((n_tasks, 2 * d + 2))
    H[t[ends]] = C
    Szz, Szy, Syy, n = H[:, :d], H[:, d : 2 * d], H[:, 2 * d : 2 * d + 1], H[:, -1:]
    Q = Szz - 2 * m * Szy + m * m * Syy
    loss = np.linalg.slogdet(A)[1] + 0.5 * (n * np.log(v) + Q / v).sum() / B
    W = (Z - m[t] * yc) / v[t]
    gA = Bm.T @ (np.eye(d) - (W.T @ Z) / B)
    dv = 0.5 * (n / v - Q / (v * v)) / B
    dm = (m * Syy - Szy) / (v * B)
    glog = (dv * (1.0 - SIGMA_S**2) - dm * gamma) * s * (1.0 - s)
    return loss, gA, glog, dm * (1.0 - s)


def check_gradient(F, Ys, latents, seed: int) -> dict:
    """Largest relative difference between :func:`loss_grad` and autograd of the
    reference's per-sample MultivariateNormal loss (float64) on one minibatch of
    256 rows, at the reference's start and at our fit (the unmixing behind the
    stored ``latents``, (c, gamma) profiled), with the reference's sigma_obs and
    with sigma_obs = 0 (where the two losses are the same function)."""
    import torch

    from _reference_style import ReferenceStyleMTLCM, _log_prob_with_retry

    n, T = Ys.shape
    d = F.shape[1]
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n * T, 256, replace=False))
    mat, t = rows % n, rows // n
    x, y = F[mat], Ys[mat, t]
    Bm = np.linalg.lstsq(F, latents, rcond=None)[0].T
    v, m = profiled(Bm, F, Ys)
    c = np.clip((v - SIGMA_S**2) / (1 - SIGMA_S**2), 1e-6, 1 - 1e-6)
    points = {
        "start": reference_init(d, T, seed),
        "ours": (np.linalg.inv(Bm), np.log(c / (1 - c)), m / (1 - c)),
    }
    out = {}
    for (name, params), sigma_obs in itertools.product(
        points.items(), (SIGMA_OBS, 0.0)
    ):
        ref = ReferenceStyleMTLCM(d, T, SIGMA_S, sigma_obs).double()
        with torch.no_grad():
            for p, val in zip(
                (ref.A.weight, ref.c_params, ref.gamma_params), params, strict=True
            ):
                p.copy_(torch.from_numpy(val))
        loc, cov = ref(torch.from_numpy(y)[:, None], torch.from_numpy(t))
        lp, _ = _log_prob_with_retry(loc, cov, torch.from_numpy(x))
        loss_ref = -lp.mean()
        loss_ref.backward()
        loss, *grads = loss_grad(*params, x, y, t, T)
        loss += 0.5 * d * LOG2PI
        rel = [
            float(np.abs(a - b.grad.numpy()).max() / np.abs(b.grad.numpy()).max())
            for a, b in zip(
                grads, (ref.A.weight, ref.c_params, ref.gamma_params), strict=True
            )
        ]
        out[f"{name}, sigma_obs {sigma_obs:g}"] = {
            "loss_reference": float(loss_ref.detach()),
            "loss_probe": float(loss),
            "grad_rel_diff_A_logits_gamma": rel,
        }
    return out


class Adam:
    """torch.optim.Adam's update with its defaults, on one flat array."""

    def __init__(self, theta: np.ndarray, lr: float):
        self.p, self.lr, self.k = theta, lr, 0
        self.m, self.v = np.zeros_like(theta), np.zeros_like(theta)

    def step(self, g: np.ndarray) -> None:
        self.k += 1
        b1, b2 = 0.9, 0.999
        c1, c2 = 1 - b1**self.k, 1 - b2**self.k
        self.m *= b1
        self.m += (1 - b1) * g
        self.v *= b2
        self.v += (1 - b2) * g * g
        self.p -= (self.lr / c1) * self.m / (np.sqrt(self.v) / math.sqrt(c2) + 1e-8)


def reference_fit(
    F, Ys, seed: int, epochs: int, batch: int, lr: float, fraction: float
) -> dict:
    """Adam on shuffled long-format minibatches from the reference's start;
    the parameters after every epoch (``fraction`` < 1: that share of the
    long format's rows per epoch, fewer steps)."""
    n, T = Ys.shape
    d = F.shape[1]
    theta = np.concatenate([p.ravel() for p in reference_init(d, T, seed)])
    A = theta[: d * d].reshape(d, d)  # views into theta
    logits = theta[d * d : d * d + T * d].reshape(T, d)
    gamma = theta[d * d + T * d :].reshape(T, d)
    grad = np.empty_like(theta)
    gviews = (grad[: d * d], grad[d * d : d * d + T * d], grad[d * d + T * d :])
    opt = Adam(theta, lr)
    rng = np.random.default_rng(seed)
    N = n * T
    per_epoch = int(round(fraction * N))
    snaps, losses = [], []
    t0 = time.process_time()
    for _ in range(epochs):
        perm = rng.permutation(N)[:per_epoch]
        tot = 0.0
        for a in range(0, per_epoch, batch):
            rows = np.sort(perm[a : a + batch])  # by task: rows are task-major
            mat, t = rows % n, rows // n
            loss, *gs = loss_grad(A, logits, gamma, F[mat], Ys[mat, t], t, T)
            for gv, gp in zip(gviews, gs, strict=True):
                gv[:] = gp.ravel()
            opt.step(grad)
            tot += loss * len(rows)
        losses.append(tot / per_epoch + 0.5 * d * LOG2PI)
        snaps.append((A.copy(), logits.copy(), gamma.copy()))
    return {
        "snapshots": snaps,
        "epoch_loss": losses,
        "steps": epochs * math.ceil(per_epoch / batch),
        "cpu_s": time.process_time() - t0,
    }


def reference_fit_torch(
    F, Ys, seed: int, epochs: int, batch: int, lr: float, fraction: float
) -> dict:
    """``reference_fit`` as the reference runs it (``--engine torch32``): the
    reference-style module in float32 (``_reference_style.ReferenceStyleMTLCM``,
    per-sample ``MultivariateNormal`` with sigma_obs, and its 1e-6 I retry),
    torch's Adam, and each epoch's order drawn by torch (``torch.randperm`` on the
    global generator after the module's draws; a shuffled ``DataLoader`` draws from
    a generator it seeds from that one, so the permutation is torch's, not the
    reference's exact one); the long format is task-major, as the reference
    stacks it."""
    import torch
    from torch.distributions import MultivariateNormal

    from _reference_style import ReferenceStyleMTLCM

    n, T = Ys.shape
    d = F.shape[1]
    torch.manual_seed(seed)
    m = ReferenceStyleMTLCM(d, T, SIGMA_S, SIGMA_OBS)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    x_all = torch.tensor(F, dtype=torch.float32)
    y_all = torch.tensor(Ys, dtype=torch.float32)
    eye = 1e-6 * torch.eye(d)
    N = n * T
    per_epoch = int(round(fraction * N))
    snaps, losses = [], []
    t0 = time.process_time()
    for _ in range(epochs):
        perm = torch.randperm(N)[:per_epoch]
        tot = 0.0
        for a in range(0, per_epoch, batch):
            rows = perm[a : a + batch]
            mat, t = rows % n, rows // n
            x, y = x_all[mat], y_all[mat, t][:, None]
            loc, cov = m(y, t)
            try:
                loss = -MultivariateNormal(loc, covariance_matrix=cov).log_prob(x)
            except ValueError:
                loss = -MultivariateNormal(loc, covariance_matrix=cov + eye).log_prob(x)
            loss = loss.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(rows)
        losses.append(tot / per_epoch)
        snaps.append(
            tuple(
                p.detach().double().numpy().copy()
                for p in (m.A.weight, m.c_params, m.gamma_params)
            )
        )
    return {
        "snapshots": snaps,
        "epoch_loss": losses,
        "steps": epochs * math.ceil(per_epoch / batch),
        "cpu_s": time.process_time() - t0,
    }


def exact_loglik(A, v, m, F, Ys, sigma_obs: float = SIGMA_OBS) -> float:
    """Mean log-likelihood per observation of x | y, t ~ N(A m_t y,
    A V_t A^T + sigma_obs^2 I) over all (material, task) pairs (no intercepts:
    the features and the targets have mean zero in every task)."""
    n, T = Ys.shape
    d = F.shape[1]
    Sxx = F.T @ F
    sxy = F.T @ Ys  # (d, T)
    syy = (Ys * Ys).sum(0)
    S = np.einsum("ij,tj,kj->tik", A, v, A) + sigma_obs**2 * np.eye(d)
    L = np.linalg.cholesky(S)
    logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
    P = np.linalg.inv(S)
    mu = m @ A.T  # (T, d): A m_t
    Pmu = np.einsum("tij,tj->ti", P, mu)
    quad = (
        np.einsum("tij,ji->t", P, Sxx)
        - 2 * (Pmu * sxy.T).sum(1)
        + syy * (mu * Pmu).sum(1)
    )
    return float(
        -0.5 * (n * T * (d * LOG2PI) + n * logdet.sum() + quad.sum()) / (n * T)
    )


def profiled(Bm, F, Ys):
    """Per task and latent of z = Bm x: the slope on y and the variance clipped
    to [sigma_s^2, 1] that maximise the likelihood at this unmixing (sigma_obs
    dropped; exact when it is 0)."""
    Z = F @ Bm.T
    syy = (Ys * Ys).sum(0)  # (T,)
    szy = Z.T @ Ys  # (d, T)
    m = (szy / syy).T  # (T, d)
    rss = (Z * Z).sum(0)[None, :] - m * m * syy[:, None]
    v = np.clip(rss / len(F), SIGMA_S**2, 1.0)
    return v, m


def evaluate(A, logits, gamma, F, Ys) -> dict:
    s = 1.0 / (1.0 + np.exp(-logits))
    v = s + SIGMA_S**2 * (1 - s)
    ll = exact_loglik(A, v, gamma * (1 - s), F, Ys)
    vp, mp = profiled(np.linalg.inv(A), F, Ys)
    return {
        "ll": ll,
        "ll_profiled": exact_loglik(A, vp, mp, F, Ys),
        "cond_A": float(np.linalg.cond(A)),
    }


def agreement(latents: dict) -> tuple[float, float, list]:
    pairs = [
        100 * mcc(latents[a], latents[b])
        for a, b in itertools.combinations(sorted(latents), 2)
    ]
    return float(np.mean(pairs)), float(np.std(pairs)), pairs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", nargs="+", type=int, default=[10, 20, 40])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument(
        "--engine",
        choices=("numpy", "torch32"),
        default="numpy",
        help="numpy: float64, hand-written gradients (fast); torch32: the "
        "reference-style torch module in float32 with torch's data order",
    )
    ap.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="share of the long format's rows per epoch",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare the gradient with the reference loss's autograd first",
    )
    ap.add_argument("--out", help="write the numbers as JSON here")
    ap.add_argument(
        "--features-dir",
        help="the recipe probe's --save folder instead of the study's runs",
    )
    ap.add_argument("--data", choices=("study", "known-tc", "tc-leak"), default="study")
    ap.add_argument(
        "--recipe",
        default="study",
        help="with --features-dir: the recipe probe's MTRN recipe of the files",
    )
    args = ap.parse_args(argv)
    if not args.features_dir and (args.data != "study" or args.recipe != "study"):
        ap.error("--data and --recipe choose saved features: they need --features-dir")
    t_start = time.process_time()
    Ys = standardised_targets(args.data if args.features_dir else None)
    result = {"args": vars(args), "d": {}}
    for d in args.d:
        if args.features_dir:
            seeds = load_saved_seeds(
                args.features_dir, d, args.data, args.recipe, args.seeds
            )
        else:
            seeds = load_seeds(RUNS[d], d)
            seeds = {s: seeds[s] for s in args.seeds}
        if args.check:
            first = seeds[min(seeds)]
            result.setdefault("check", {})[d] = check_gradient(
                first["features"], Ys, first["latents"], 0
            )
            print(f"d = {d} gradient check: {result['check'][d]}", flush=True)
        fits, ours = {}, {}
        for s, run in seeds.items():
            F = run["features"]
            fitter = reference_fit_torch if args.engine == "torch32" else reference_fit
            fit = fitter(F, Ys, s, args.epochs, args.batch, args.lr, args.fraction)
            ev = evaluate(*fit["snapshots"][-1], F, Ys)
            # ours: the unmixing that produced the stored latents, (c, m) profiled
            Bm = np.linalg.lstsq(F, run["latents"], rcond=None)[0].T
            vo, mo = profiled(Bm, F, Ys)
            ll_ours = exact_loglik(np.linalg.inv(Bm), vo, mo, F, Ys)
            fits[s] = fit
            ours[s] = {  # keys apart from the reference fit's "ll", "ll_profiled"
                "ll_ours_profiled": ll_ours,
                "ll_ours_record": run["log_likelihood"],
                "final_A": fit["snapshots"][-1][0].tolist(),
            }
            first, last = fit["epoch_loss"][0], fit["epoch_loss"][-1]
            print(
                f"d = {d} seed {s}: {fit['steps']} steps, {fit['cpu_s']:.1f} CPU-s, "
                f"epoch losses {first:.3f} .. {last:.3f}; "
                f"ll reference fit {ev['ll']:.4f}, "
                f"its A profiled {ev['ll_profiled']:.4f}, "
                f"ours {ll_ours:.4f} (record {ours[s]['ll_ours_record']:.4f}); "
                f"cond(A) {ev['cond_A']:.1f}",
                flush=True,
            )
            fits[s]["eval"] = ev
        per_epoch = []
        for e in range(args.epochs):
            lat = {
                s: seeds[s]["features"] @ np.linalg.inv(f["snapshots"][e][0]).T
                for s, f in fits.items()
            }
            per_epoch.append(agreement(lat)[:2])
        ref_m, ref_s, ref_pairs = agreement(
            {
                s: seeds[s]["features"] @ np.linalg.inv(f["snapshots"][-1][0]).T
                for s, f in fits.items()
            }
        )
        our_m, our_s, _ = agreement({s: r["latents"] for s, r in seeds.items()})
        feat_m, feat_s, _ = agreement({s: r["features"] for s, r in seeds.items()})
        result["d"][d] = {
            "reference_procedure": [ref_m, ref_s],
            "reference_pairs": ref_pairs,
            "per_epoch": per_epoch,
            "ours": [our_m, our_s],
            "features": [feat_m, feat_s],
            "paper": PAPER.get(d),
            "fits": {
                s: {
                    "cpu_s": f["cpu_s"],
                    "steps": f["steps"],
                    "epoch_loss": f["epoch_loss"],
                    **f["eval"],
                    **ours[s],
                }
                for s, f in fits.items()
            },
        }
        print(
            f"d = {d}: cross-seed strong MCC x100: reference procedure "
            f"{ref_m:.2f} ± {ref_s:.2f}, ours {our_m:.2f} ± {our_s:.2f}, "
            f"features {feat_m:.2f} ± {feat_s:.2f}, paper {PAPER.get(d)}",
            flush=True,
        )
        print("  per epoch: " + ", ".join(f"{m:.1f}" for m, _ in per_epoch), flush=True)
    result["cpu_s"] = time.process_time() - t_start
    print(f"CPU {result['cpu_s']:.1f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
