"""Sparse VAE decoder at MovieLens width: one training step, CPU, one thread.

A random binary matrix of 943 x 1682 (MovieLens-100K's shape), K = 50 latents,
hidden width 300 (two layers), batch 64 (``--batch-size``), categorical
likelihood. Each variant runs in its own child process (so its peak resident
memory is its own) and times ``--batches`` full training steps (forward, backward,
Adam step) of the Sparse VAE loss in CPU time (``time.process_time``, so other
processes on a shared machine do not count); the epoch time is extrapolated as
seconds per batch x 943 / batch. In the same process, before and after the steps,
a plain float32 GEMM of the same multiply-add count as one decoder forward pass
((16384, 300) x (300, 300) products into a preallocated output) is timed the same
way; its mean rate is the reference. Variants:

* ``kernel``: :class:`~identrep.models.nn.sparse_vae.MaskedFeatureDecoder`, the
  library default: one autograd node with a hand-written backward
  (:mod:`identrep.models.nn._masked_kernel`), cache-sized blocks, no autograd
  temporaries; the blocks' activations are kept for the backward when they fit
  ``KEEP_ELEMENTS`` (batch 64 here) and recomputed per block above it (batch 512);
* ``vectorised``: the earlier decoder, the same blocks through autograd (einsum
  over a (batch, features, K) masked input), each block checkpointed;
* ``loop``: one pass of the shared network per feature (the authors' structure);
* ``vae``: a plain VAE decoder of the same widths (K -> H -> H -> G, no masks);

Achieved throughput counts 3 x the forward multiply-adds per step (forward +
backward), whatever the variant recomputes (where the kernel recomputes its
forward in the backward, 0.75 is its ceiling), and is reported as a fraction of the
reference GEMM's rate measured in the same process; the kernel's time is also
given as a ratio to the loop's and the VAE's.

Usage::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/bench_sparse_vae.py \
        [--batches 2] [--batch-size B] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import resource
import time

N, G, K, H, B = 943, 1682, 50, 300, 64
#: Rows of one reference GEMM product (a 20 MB operand, as a decoder block).
GEMM_ROWS = 16384


def _forward_macs(batch: int) -> float:
    """Multiply-adds of one decoder forward pass for ``batch`` rows."""
    return float(batch) * G * (K * H + H * H + H)


def _vae_macs(batch: int) -> float:
    """Multiply-adds of a plain VAE decoder forward pass of the same widths."""
    return float(batch) * (K * H + H * H + H * G)


def _loop_forward(dec, z):
    import torch

    cols = []
    for j in range(dec.n_features):
        h = dec.act(dec.first(z * dec.W[j]))
        for layer in dec.rest:
            h = dec.act(layer(h))
        cols.append(h @ dec.head_weight[j] + dec.head_bias[j])
    return torch.stack(cols, 1)


def _checkpointed_forward(dec, z, step=32):
    import torch
    from torch.utils.checkpoint import checkpoint

    outs = []
    for s in range(0, dec.n_features, step):
        args = (z, dec.W[s : s + step], dec.head_weight[s : s + step])
        outs.append(
            checkpoint(
                dec._block, *args, dec.head_bias[s : s + step], use_reentrant=False
            )
        )
    return torch.cat(outs, 1)


def _gemm_rate(macs: float) -> float:
    """Multiply-adds per CPU second of plain (GEMM_ROWS, H) x (H, H) float32
    products, as many as make ``macs``, into a preallocated output."""
    import torch

    a, w = torch.randn(GEMM_ROWS, H), torch.randn(H, H)
    o = torch.empty(GEMM_ROWS, H)
    torch.mm(a, w, out=o)  # warm-up
    reps = max(2, round(macs / (GEMM_ROWS * H * H)))
    t0 = time.process_time()
    for _ in range(reps):
        torch.mm(a, w, out=o)
    return reps * GEMM_ROWS * H * H / (time.process_time() - t0)


def _child(variant: str, n_batches: int, B: int, threads: int, queue) -> None:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    from identrep.models.nn.sparse_vae import MaskedFeatureDecoder, SparseVAEModule
    from identrep.models.nn.vae import GaussianEncoder
    from identrep.models.vae._elbo import VAEBatch
    from identrep.models.vae._ssl import sparse_vae_loss

    rng = np.random.default_rng(0)
    gemm_before = _gemm_rate(_forward_macs(B))
    X = torch.tensor((rng.random((N, G)) < 0.06).astype(np.float32))
    torch.manual_seed(0)
    dec = MaskedFeatureDecoder(K, G, (H, H), "relu")
    enc = GaussianEncoder(G, 0, K, (H, H), "relu")
    mod = SparseVAEModule(enc, dec, "categorical", X.mean(0), X.std(0) + 1e-3)
    if variant == "loop":
        mod.decoder.forward = lambda z: _loop_forward(dec, z)
    elif variant == "vectorised":
        mod.decoder.forward = lambda z: _checkpointed_forward(dec, z)
    elif variant == "vae":
        from identrep.models.nn.mlp import MLP

        plain = MLP(K, (H, H), G, activation="relu")
        mod.decoder.forward = plain.forward
        mod.plain = plain  # its parameters are trained too
    opt = torch.optim.Adam([p for p in mod.parameters() if p.requires_grad], lr=1e-3)
    cpu, wall = [], []
    for i in range(n_batches + 1):  # the first step is a warm-up
        idx = torch.as_tensor(rng.choice(N, B, replace=False))
        batch = VAEBatch(X[idx], torch.zeros(B), torch.zeros(B, dtype=torch.int64))
        t0, w0 = time.process_time(), time.perf_counter()
        loss, _ = sparse_vae_loss(mod, batch, n_data=N, lambda0=10.0, lambda1=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i:
            cpu.append(time.process_time() - t0)
            wall.append(time.perf_counter() - w0)
    gemm_after = _gemm_rate(_forward_macs(B))
    sec = float(np.median(cpu))
    macs = _vae_macs(B) if variant == "vae" else _forward_macs(B)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux)
    gemm = (gemm_before + gemm_after) / 2
    queue.put(
        dict(
            variant=variant,
            batch_size=B,
            threads=torch.get_num_threads(),
            interop_threads=torch.get_num_interop_threads(),
            seconds_per_batch=sec,
            wall_seconds_per_batch=float(np.median(wall)),
            epoch_seconds=sec * N / B,
            macs_per_s=3 * macs / sec,
            gemm_macs_per_s=gemm,
            gemm_before_after=(gemm_before, gemm_after),
            fraction_of_gemm=3 * macs / sec / gemm,
            peak_rss_mib=peak,
        )
    )


def run(variant: str, n_batches: int, batch: int = B, threads: int = 1) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(variant, n_batches, batch, threads, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument(
        "--batch-size", type=int, default=B, help="rows per step (MovieLens: 512)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument(
        "--variants",
        nargs="+",
        default=["kernel", "loop", "vae"],
        help="among kernel, loop, vae, vectorised",
    )
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    print(
        f"Sparse VAE decoder, {N}x{G} binary, K={K}, hidden ({H}, {H}), "
        f"batch {args.batch_size}, {args.threads} thread(s), "
        f"{platform.processor() or platform.machine()}; "
        f"{_forward_macs(1) / 1e6:.0f} M multiply-adds per sample forward; "
        "CPU time",
        flush=True,
    )
    res = []
    for v in args.variants:  # one line per variant as soon as it is measured
        r = run(v, args.batches, args.batch_size, args.threads)
        res.append(r)
        print(
            f"  {r['variant']:<11} {r['seconds_per_batch']:7.2f} s/batch "
            f"(wall {r['wall_seconds_per_batch']:.2f})  "
            f"epoch ~{r['epoch_seconds']:6.1f} s  "
            f"{r['macs_per_s'] / 1e9:6.2f} G MAC/s = "
            f"{r['fraction_of_gemm']:4.2f} of GEMM "
            f"({r['gemm_macs_per_s'] / 1e9:.2f} G MAC/s, same process)  "
            f"peak RSS {r['peak_rss_mib']:6.0f} MiB",
            flush=True,
        )
    sec = {r["variant"]: r.get("seconds_per_batch") for r in res}
    if sec.get("kernel"):
        for other in ("loop", "vectorised", "vae"):
            if sec.get(other):
                print(
                    f"  kernel / {other:<10} time ratio "
                    f"{sec['kernel'] / sec[other]:7.2f}  ({other} / kernel "
                    f"{sec[other] / sec['kernel']:.2f})"
                )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
