"""Where an EGNN-MTRN epoch on CUDA spends its time (one process on a quiet GPU).

Fits the QM9 study's MTRN (EGNN 32 x 3, batches of 128, d = 8) on ``--n``
molecules for ``--epochs`` epochs and prints wall and process-CPU seconds per
epoch (CPU close to or above wall: the host bounds the step) for:

* ``edges``: the extractor as it is (flat edge list, ``index_add``), with torch's
  deterministic kernels, as every fit on an accelerator runs;
* ``edges, default kernels``: the same with ``torch.use_deterministic_algorithms``
  made a no-op (what determinism costs);
* ``buckets``: the previous extractor (``bench_egnn.buckets``: size-sorted buckets
  of 64 padded to their largest molecule, dense masked layers);
* ``dense``: ``EGNNExtractor(path="dense")``, the whole batch padded to
  ``max_atoms``, dense masked layers, no data-dependent shapes (no host
  synchronisation in the forward); ``path="auto"`` takes it on a GPU;
* ``dense-capturable``: the same inside ``identrep.training.cuda_graphs(capture=
  False)``: the capturable Adam (learning rate a device tensor), no graphs;
* ``dense-graphs``: inside ``cuda_graphs()``: every full batch's step replayed
  from one recorded CUDA graph. Its parameters must equal ``dense-capturable``'s
  (printed: the largest difference).

``--variants`` picks some (comma-separated; default all).

Then profiles ``--profile-steps`` training steps of ``edges`` (top operators by
self CPU and by self CUDA time). ``--device cpu --n 300`` is a dry run.

Usage: ``PYTHONPATH=src python benchmarks/gpu_mtrn_probe.py --n 12000``
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_egnn import buckets  # noqa: E402
from identrep.experiments.studies.chen2024_qm9 import _load  # noqa: E402
from identrep.models.multitask.mtrn import MTRN  # noqa: E402
from identrep.models.nn.egnn import EGNNExtractor  # noqa: E402
from identrep.training import cuda_graphs  # noqa: E402

# extractor keyword arguments, or a replacement of EGNNExtractor.forward
VARIANTS = {
    "edges": {"path": "edges"},
    "buckets": buckets,
    "dense": {"path": "dense"},
    "dense-capturable": {"path": "dense"},
    "dense-graphs": {"path": "dense"},
}
CONTEXTS = {
    "dense-capturable": lambda: cuda_graphs(capture=False),
    "dense-graphs": cuda_graphs,
}


def fit(X, Y, epochs, device, variant="edges"):
    how = VARIANTS[variant]
    context = CONTEXTS.get(variant, contextlib.nullcontext)
    kw = how if isinstance(how, dict) else {}
    extractor = functools.partial(
        EGNNExtractor.for_flat_input, hidden=32, n_layers=3, **kw
    )
    m = MTRN(
        n_latents=8,
        extractor=extractor,
        max_epochs=epochs,
        batch_size=128,
        lr=3e-3,
        random_state=0,
        device=device,
    )
    saved = EGNNExtractor.forward
    if not isinstance(how, dict):
        EGNNExtractor.forward = how
    try:
        if device == "cuda":
            torch.cuda.synchronize()
        t, c = time.perf_counter(), time.process_time()
        with context():
            m.fit(X, Y)
        if device == "cuda":
            torch.cuda.synchronize()
    finally:
        EGNNExtractor.forward = saved
    wall = (time.perf_counter() - t) / epochs
    return wall, (time.process_time() - c) / epochs, m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--profile-steps", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    dev = args.device
    data = _load(args.n, 0, "qm9pack")
    X, Y = data.X, data.Y
    n_thr = torch.get_num_threads()
    print(f"{len(X)} molecules, torch {torch.__version__}, threads {n_thr}, {dev}")
    fit(X[:1000], Y[:1000], 1, dev)  # warm-up: CUDA context, kernels
    fitted, walls = {}, {}
    for variant in args.variants.split(","):
        wall, cpu, m = fit(X, Y, args.epochs, dev, variant)
        fitted[variant], walls[variant] = m, wall
        val = m.history_["val_loss"][-1]
        print(
            f"{variant:8s}: {wall:.2f} s/epoch wall, {cpu:.2f} CPU-s/epoch, "
            f"val loss {val:.6f}",
            flush=True,
        )
        if variant == "edges":
            real = torch.use_deterministic_algorithms
            torch.use_deterministic_algorithms = lambda *a, **k: None
            try:
                wall, cpu, m = fit(X, Y, args.epochs, dev)
            finally:
                torch.use_deterministic_algorithms = real
            val = m.history_["val_loss"][-1]
            print(
                f"edges, default kernels: {wall:.2f} s/epoch wall, "
                f"{cpu:.2f} CPU-s/epoch, val loss {val:.6f}"
            )
    base = "dense" if "dense" in walls else next(iter(walls))
    print(
        f"speed-up against {base} (same run): "
        + ", ".join(f"{v} {walls[base] / w:.2f}x" for v, w in walls.items())
    )
    if "dense-graphs" in fitted and "dense-capturable" in fitted:
        a, b = (
            fitted[v].module_.state_dict() for v in ("dense-graphs", "dense-capturable")
        )
        diff = max(float((a[k] - b[k]).abs().max()) for k in a)
        print(
            "dense-graphs against dense-capturable: largest parameter "
            f"difference {diff:g}"
        )
    if dev != "cuda" or not args.profile_steps:
        return
    from torch.profiler import ProfilerActivity, profile

    n_prof = args.profile_steps * 128
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fit(X[:n_prof], Y[:n_prof], 1, dev)
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cpu_time_total", row_limit=15))
    print(ka.table(sort_by="self_cuda_time_total", row_limit=10))


if __name__ == "__main__":
    main()
