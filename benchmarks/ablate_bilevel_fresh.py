"""Fresh tasks and per-task target scaling for the bilevel learner at rho = 0.9
(docs/notes.md, "Bilevel sparse MTL: per-task target scaling, fresh tasks").

One JSON line: the settings, the Pearson MCC on the training inputs, the process
CPU time of the fit and, with ``objective=1``, the population outer loss (exact
lasso heads on 100 batches of 64 fresh tasks) of the learned features, of the
true latents and of the learned features' linear part.

Usage::

    python benchmarks/ablate_bilevel_fresh.py seed=0 fresh=1 bs=3200 ep=100 lr=3e-3
    python benchmarks/ablate_bilevel_fresh.py seed=0 fresh=1 bs=3200 ep=100 lr=3e-3 \
        std=1 objective=1
"""

import json
import sys
import time

import numpy as np
import torch

from identrep import BilevelSparseMTL
from identrep.datasets import SparseTaskSampler, make_sparse_tasks
from identrep.metrics import mcc
from identrep.models.multitask.heads import group_lasso_heads, task_moments

a = dict(kv.split("=", 1) for kv in sys.argv[1:])
seed = int(a.get("seed", 0))
std = a.get("std", "0") == "1"
l1 = float(a.get("l1", 0.3))
data = make_sparse_tasks(
    n_tasks=int(a.get("T", 1000)),
    n_samples=50,
    n_latents=6,
    correlation=float(a.get("rho", 0.9)),
    support_prob=float(a.get("p", 0.5)),
    random_state=seed,
)
sampler = SparseTaskSampler.from_data(data)
model = BilevelSparseMTL(
    6,
    hidden_sizes=(64, 64),
    max_epochs=int(a.get("ep", 10)),
    lr=float(a.get("lr", 1e-3)),
    batch_size=int(a.get("bs", 400)),
    l1_reg=l1,
    standardize_targets=std,
    random_state=seed,
)
t0 = time.process_time()
model.fit(
    data.X,
    data.y,
    task_ids=data.task_ids,
    task_sampler=sampler if a.get("fresh", "0") == "1" else None,
)
out = dict(a, cpu_s=round(time.process_time() - t0, 1))
H = model.transform(data.X)
out["mcc"] = round(mcc(data.Z, H), 4)


def outer_loss(F: np.ndarray, n_batches: int = 100, B: int = 64) -> float:
    """Mean outer loss of features F (rows of the pool) on fresh tasks, targets
    scaled as in training, features batch-standardised as the batch norm does."""
    rng = np.random.default_rng(123)
    task = torch.arange(B).repeat_interleave(sampler.n_samples)
    total = 0.0
    for _ in range(n_batches):
        draw = sampler.sample(B, rng)
        y = draw.y
        if std:
            y = (y - y.mean(1, keepdims=True)) / y.std(1, keepdims=True)
        Ft = torch.tensor(F[draw.rows.reshape(-1)])
        Ft = (Ft - Ft.mean(0)) / Ft.std(0, unbiased=False)
        yt = torch.tensor(y.reshape(-1))
        W, b, _ = group_lasso_heads(
            task_moments(Ft, yt, task, B), l1, None, tol=1e-8, max_iter=5000
        )
        total += float(0.5 * ((Ft * W[task]).sum(1) + b[task] - yt).square().mean())
    return total / n_batches


if a.get("objective", "0") == "1":
    Z = data.Z
    coef = np.linalg.lstsq(np.c_[Z, np.ones(len(Z))], H, rcond=None)[0][:6]
    out["loss_learned"] = round(outer_loss(H), 5)
    out["loss_true_latents"] = round(outer_loss(Z), 5)
    out["loss_linear_part"] = round(outer_loss(Z @ coef), 5)
    out["mcc_linear_part"] = round(mcc(Z, Z @ coef), 4)
print(json.dumps(out), flush=True)
