"""Ablations of the bilevel sparse learner at rho = 0.9 (docs/notes.md, "Bilevel").

One run per line of JSON: the data process's and the learner's settings, then the
Pearson MCC on the training inputs and on fresh inputs with independent latents.

Usage::

    python benchmarks/ablate_bilevel.py --seeds 0 1 --set support_prob=0.25 l1_reg=0.5
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from identrep import MTRN, BilevelSparseMTL, RidgeICA
from identrep.datasets import make_sparse_tasks
from identrep.datasets.sparse_tasks import _apply_mlp
from identrep.experiments.studies.lachapelle2023 import linear_r
from identrep.metrics import mcc

DATA = dict(n_tasks=1000, n_samples=50, n_latents=6, correlation=0.9, support_prob=0.5)
MODEL = dict(hidden_sizes=(64, 64), max_epochs=10, l1_reg=0.3, lr=1e-3, batch_size=400)
DATA_KEYS = set(DATA) | {"noise_ratio", "mixing", "n_mixing_layers"}
EXTRA_KEYS = {"weights"}


def _relabel(data, kind: str, noise_ratio: float, seed: int):
    """Targets from the same latents with dense task weights: ``laplace`` (what the
    authors' training tasks get: their task sampler is only passed to the
    validation set) or ``gauss``; noise rescaled as in ``make_sparse_tasks``."""
    rng = np.random.default_rng(20_000 + seed)
    T, d = data.causal.shape
    n = len(data.y) // T
    if kind == "laplace":
        W = rng.laplace(size=(T, d))
    elif kind == "gauss":
        W = rng.standard_normal((T, d))
    else:
        raise ValueError(f"weights must be 'laplace' or 'gauss'; got {kind!r}.")
    signal = np.einsum("tnd,td->tn", data.Z.reshape(T, n, d), W)
    eps = rng.standard_normal((T, n))
    scale = noise_ratio * np.linalg.norm(signal, axis=1) / np.linalg.norm(eps, axis=1)
    return (signal + scale[:, None] * eps).reshape(T * n)


def _with_y(data, y):
    import dataclasses

    return dataclasses.replace(data, y=y)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run(seed: int, overrides: dict, models: list[str]) -> dict:
    data_kw = {**DATA, **{k: v for k, v in overrides.items() if k in DATA_KEYS}}
    skip = DATA_KEYS | EXTRA_KEYS
    model_kw = {**MODEL, **{k: v for k, v in overrides.items() if k not in skip}}
    if isinstance(model_kw.get("hidden_sizes"), list):
        model_kw["hidden_sizes"] = tuple(model_kw["hidden_sizes"])
    data = make_sparse_tasks(random_state=seed, **data_kw)
    if "weights" in overrides:
        y = _relabel(data, overrides["weights"], data_kw.get("noise_ratio", 0.1), seed)
        data = data._replace(y=y) if hasattr(data, "_replace") else _with_y(data, y)
    d = data_kw["n_latents"]
    rng = np.random.default_rng(10_000 + seed)
    Z_ind = rng.standard_normal((20_000, d))
    X_ind = _apply_mlp(Z_ind, data.params["decoder"])
    out = {"seed": seed, **overrides}
    for name in models:
        t0 = time.perf_counter()
        if name == "lasso":
            m = BilevelSparseMTL(d, random_state=seed, **model_kw)
        else:
            kw = {k: v for k, v in model_kw.items() if k != "l1_reg"}
            m = RidgeICA(d, random_state=seed, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.fit(data.X, data.y, task_ids=data.task_ids)
        out[f"{name}_s"] = round(time.perf_counter() - t0, 1)
        if name == "lasso":
            out["lasso"] = round(mcc(data.Z, m.transform(data.X)), 4)
            out["lasso_ind"] = round(mcc(Z_ind, m.transform(X_ind)), 4)
            out["lasso_r"] = round(linear_r(data.Z, m.transform(data.X)), 4)
            out["lasso_support"] = round(float(m.supports_.mean()), 3)
        else:
            out["ridge"] = round(mcc(data.Z, MTRN.transform(m, data.X)), 4)
            out["ridge_r"] = round(linear_r(data.Z, MTRN.transform(m, data.X)), 4)
            out["ridge_ica"] = round(mcc(data.Z, m.transform(data.X)), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--models", nargs="+", default=["lasso"])
    args = ap.parse_args()
    overrides = dict(kv.split("=", 1) for kv in args.set)
    overrides = {k: _value(v) for k, v in overrides.items()}
    for seed in args.seeds:
        print(json.dumps(run(seed, overrides, args.models)), flush=True)


if __name__ == "__main__":
    main()
