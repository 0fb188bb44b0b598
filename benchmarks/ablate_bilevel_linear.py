"""Population check of the bilevel lasso objective (docs/notes.md, "Bilevel sparse
MTL at correlation 0.9"): optimise only a linear map L of the TRUE latents
(features batch-standardised Z L^T) under lasso heads and print the MCC of Z L^T
every 100 steps.

Usage::

    python benchmarks/ablate_bilevel_linear.py steps=1501 init=full seed=0 lr=0.02
    python benchmarks/ablate_bilevel_linear.py steps=1501 init=full seed=0 lr=0.001 B=8
"""

import json
import sys

import numpy as np
import torch

from identrep.datasets import make_sparse_tasks
from identrep.metrics import mcc
from identrep.models.multitask.heads import group_lasso_heads, ridge_heads, task_moments

torch.set_default_dtype(torch.float64)
args = dict(kv.split("=") for kv in sys.argv[1:])
p = float(args.get("p", 0.5))
rho = float(args.get("rho", 0.9))
l1 = float(args.get("l1", 0.3))
T = int(args.get("T", 2000))
n = int(args.get("n", 50))
steps = int(args.get("steps", 300))
weights = args.get("w", "sparse")
init = args.get("init", "eye")
seed = int(args.get("seed", 0))
d = 6
data = make_sparse_tasks(
    n_tasks=T,
    n_samples=n,
    n_latents=d,
    correlation=rho,
    support_prob=p,
    random_state=seed,
    mixing="linear",
)
Z = torch.tensor(data.Z)
y = torch.tensor(data.y)
t = torch.tensor(data.task_ids)
if weights == "laplace":
    rng = np.random.default_rng(seed)
    W = rng.laplace(size=(T, d))
    s = np.einsum("tnd,td->tn", data.Z.reshape(T, n, d), W)
    e = rng.standard_normal((T, n))
    sc = 0.1 * np.linalg.norm(s, axis=1) / np.linalg.norm(e, axis=1)
    y = torch.tensor((s + sc[:, None] * e).reshape(-1))
g = torch.Generator().manual_seed(seed)
L0 = (
    torch.eye(d)
    if init == "eye"
    else (
        torch.randn(d, d, generator=g)
        if init == "full"
        else torch.eye(d) + 0.3 * torch.randn(d, d, generator=g)
    )
)
L = L0.clone().requires_grad_(True)
opt = torch.optim.Adam([L], lr=float(args.get("lr", 0.01)))
W0 = None


def loss_fn(L, tasks):
    rows = torch.isin(t, tasks)
    F = Z[rows] @ L.T
    F = (F - F.mean(0)) / F.std(0)
    loc = torch.unique(t[rows], return_inverse=True)[1]
    m = task_moments(F, y[rows], loc, tasks.numel())
    if l1 > 0:
        Wt, b, _ = group_lasso_heads(m, l1, tol=1e-7, max_iter=3000)
    else:
        Wt, b = ridge_heads(F, y[rows], loc, tasks.numel(), 1e-7)
    pred = (F * Wt[loc]).sum(1) + b[loc]
    return 0.5 * ((pred - y[rows]) ** 2).mean()


hist = []
for s in range(steps):
    tasks = torch.randperm(T, generator=g)[: int(args.get("B", 64))]
    opt.zero_grad()
    loss = loss_fn(L, tasks)
    loss.backward()
    opt.step()
    if s % 100 == 0 or s == steps - 1:
        with torch.no_grad():
            hist.append(
                (s, round(float(loss), 4), round(mcc(data.Z, (Z @ L.T).numpy()), 4))
            )
print(json.dumps(dict(p=p, rho=rho, l1=l1, w=weights, init=init, hist=hist)))
