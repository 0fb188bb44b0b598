"""Bilevel sparse MTL: outer-step cost of lasso heads against ridge heads (CPU).

In one run, on the same sparse-task data (``make_sparse_tasks``), this measures:

* the time per outer step of ``MTRN(heads="group_lasso")`` (inner FISTA + implicit
  gradient) and of ``MTRN(heads="ridge")`` (closed-form heads) with the same
  extractor and batches; the ratio lasso / ridge is printed;
* the inner solver alone: time per task of a batched lasso solve from a cold start
  and from a warm start (the previous solution of a perturbed problem);
* the implicit solve: support-restricted conjugate gradient against the dense
  direct solve of the full (d k)-square system (same answer), per batch, for
  several feature widths d.

Usage::

    python benchmarks/bench_bilevel.py
    python benchmarks/bench_bilevel.py --n-tasks 400 --epochs 3 --threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import identrep as ir
from identrep.models.multitask.heads import group_lasso_quadratic
from identrep.models.multitask.heads.group_lasso import (
    QuadraticLoss,
    lambda_max_quadratic,
    support_solve,
)


def outer_step_ms(data, heads: str, epochs: int, seed: int) -> float:
    m = ir.MTRN(
        n_latents=data.n_latents,
        heads=heads,
        hidden_sizes=(64, 64),
        activation="leaky_relu",
        batch_size=400,
        max_epochs=epochs,
        lr=1e-3,
        lr_schedule=None,
        patience=None,
        val_fraction=0.0,
        random_state=seed,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    steps = epochs * int(np.ceil(data.n_tasks * data.params["n_samples"] / 400))
    return 1000 * m.history_["seconds"] / steps


def moments(T: int, n: int, d: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    F = torch.randn(T, n, d, generator=g)
    F = F + 0.9 * F[..., :1]  # correlated features
    W = torch.randn(T, d, 1, generator=g) * (torch.rand(T, d, 1, generator=g) < 0.3)
    Y = F @ W + 0.1 * torch.randn(T, n, 1, generator=g)
    Fc, Yc = F - F.mean(1, keepdim=True), Y - Y.mean(1, keepdim=True)
    return Fc.transpose(1, 2) @ Fc / n, Fc.transpose(1, 2) @ Yc / n


def timed(fn, repeat: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-tasks", type=int, default=400)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    data = ir.datasets.make_sparse_tasks(
        n_tasks=args.n_tasks, n_samples=50, n_latents=6, random_state=args.seed
    )
    ridge = outer_step_ms(data, "ridge", args.epochs, args.seed)
    lasso = outer_step_ms(data, "group_lasso", args.epochs, args.seed)
    print("outer step (8 tasks x 50 samples, d=6, MLP 16-64-64-6, 1 thread)")
    print(f"  ridge heads        {ridge:8.2f} ms   (baseline)")
    print(f"  group-lasso heads  {lasso:8.2f} ms   ratio {lasso / ridge:.2f}x")

    G, C = moments(8, 50, 6, args.seed)
    lam = 0.3 * lambda_max_quadratic(C)
    cold = timed(lambda: group_lasso_quadratic(G, C, lam, tol=1e-5), 50)
    W, _ = group_lasso_quadratic(G, C, lam, tol=1e-5)
    G2 = G + 1e-3 * torch.eye(6)
    warm = timed(lambda: group_lasso_quadratic(G2, C, lam, W, tol=1e-5), 50)
    print("inner solver, batch of 8 tasks, d=6, tol 1e-5 (per task)")
    print(
        f"  cold start {1e6 * cold / 8:8.1f} us   warm start {1e6 * warm / 8:8.1f} us"
    )

    print("implicit solve per batch of 8 tasks (k=1): masked CG vs dense solve")
    for d in (6, 32, 128):
        G, C = moments(8, max(4 * d, 50), d, args.seed)
        lam = 0.3 * lambda_max_quadratic(C)
        W, _ = group_lasso_quadratic(G, C, lam, tol=1e-6, max_iter=5000)
        V = torch.randn_like(W)
        args_ = (QuadraticLoss, W, lam, None, (G, C), V)
        t_cg = timed(lambda a=args_: support_solve(*a, method="cg", tol=1e-6), 20)
        t_dense = timed(lambda a=args_: support_solve(*a, method="dense"), 20)
        frac = float((W != 0).float().mean())
        print(
            f"  d={d:4d} support {100 * frac:5.1f}%  masked CG {1e3 * t_cg:7.3f} ms  "
            f"dense {1e3 * t_dense:7.3f} ms  ratio dense/CG {t_dense / t_cg:6.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
