"""EGNN extractor speed: a per-molecule loop, padded size buckets, and the edge list.

Times, in one process on the same molecules and the same weights, forward +
backward (one MTRN training step without the optimiser: sum of squares of the
pooled output) and forward alone (no_grad, as for validation and the per-epoch head
refit), in batches of ``--batch`` molecules, for

* ``per_molecule``: the plain reference, a Python loop over molecules, each alone
  on its real atoms through the dense :meth:`EGNNLayer.forward`;
* ``buckets``: the previous extractor (before issue 13 part 4): the batch sorted by
  atom count, cut into buckets of 64, each padded to its largest molecule and run
  through the dense, masked layers;
* ``edges``: :class:`~identrep.models.nn.egnn.EGNNExtractor` as it is now (one
  pass over the flat list of ordered pairs of real atoms).

Before timing, the three are checked to give the same pooled outputs and
gradients in float64 (max abs difference printed). Times are CPU seconds
(``time.process_time``, one thread), the median over ``--repeats`` passes over
the molecules; the machine's load average is printed with them.

Usage::

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_egnn.py
    python benchmarks/bench_egnn.py --n-molecules 512 --repeats 3 --name egnn_cpu
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from identrep.models.nn.egnn import EGNNExtractor, per_molecule

ROOT = Path(__file__).resolve().parents[1]


def buckets(net: EGNNExtractor, x_flat: torch.Tensor, size: int = 64) -> torch.Tensor:
    """The previous extractor: size-sorted buckets padded to their largest molecule."""
    feats, pos, mask = net.decode(x_flat)
    order = torch.argsort(mask.sum(1), stable=True)
    outs = []
    for idx in order.split(size):
        mk = mask[idx]
        cols = torch.nonzero(mk.any(0)).squeeze(1)
        f, p = feats[idx][:, cols], pos[idx][:, cols]
        outs.append(net._embed_dense(f, p, mk[:, cols]))  # padded, masked layers
    out = torch.cat(outs)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    return out[inverse]


METHODS = {
    "per_molecule": per_molecule,
    "buckets": buckets,
    "edges": lambda net, x: net(x),
}


def check(net: EGNNExtractor, X: torch.Tensor) -> dict:
    """Max abs differences to the per-molecule loop (float64), outputs and grads."""
    net = net.double()
    X = X.double()
    params = list(net.parameters())
    ref = per_molecule(net, X)
    g_ref = torch.autograd.grad(ref.square().sum(), params)
    out = {}
    for name in ("buckets", "edges"):
        y = METHODS[name](net, X)
        g = torch.autograd.grad(y.square().sum(), params)
        out[name] = {
            "output": float((y - ref).abs().max().detach()),
            "grad": max(
                float((a - b).abs().max()) for a, b in zip(g, g_ref, strict=True)
            ),
        }
    net.float()
    return out


def cpu_ms_per_molecule(fn, net, X, batch: int, backward: bool, repeats: int):
    times = []
    for _ in range(repeats):
        c = time.process_time()
        for k in range(0, len(X), batch):
            if backward:
                fn(net, X[k : k + batch]).square().sum().backward()
            else:
                with torch.no_grad():
                    fn(net, X[k : k + batch])
        times.append((time.process_time() - c) / len(X) * 1e3)
    return float(np.median(times)), times


def mtrn_epochs(X, Y, args, variant: str) -> dict:
    """CPU seconds of one MTRN epoch (fit with 2 epochs minus fit with 1) with the
    extractor's forward replaced by ``variant``, and the fitted validation losses
    (the same seed must give the same numbers whichever forward runs)."""
    import functools

    from identrep.models.multitask.mtrn import MTRN

    make = functools.partial(
        EGNNExtractor.for_flat_input,
        hidden=args.hidden,
        n_layers=args.n_layers,
        n_rbf=args.n_rbf,
    )
    saved = EGNNExtractor.forward
    if variant == "buckets":
        EGNNExtractor.forward = buckets
    try:
        cpu, val = {}, None
        for epochs in (1, 2):
            model = MTRN(
                n_latents=8,
                extractor=make,
                max_epochs=epochs,
                batch_size=args.batch,
                patience=None,
                random_state=0,
            )
            c = time.process_time()
            model.fit(X, Y)
            cpu[epochs] = time.process_time() - c
            val = [float(v) for v in model.history_["val_loss"]]
    finally:
        EGNNExtractor.forward = saved
    return {"cpu_per_epoch": cpu[2] - cpu[1], "val_loss": val}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-molecules", type=int, default=1024)
    p.add_argument("--batch", type=int, default=128, help="molecules per step")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--n-layers", type=int, default=3)
    p.add_argument("--n-rbf", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--loop-molecules",
        type=int,
        default=256,
        help="molecules timed for the slow per-molecule loop",
    )
    p.add_argument(
        "--epoch-molecules",
        type=int,
        default=2000,
        help="molecules of the whole-epoch MTRN comparison (0: skip it)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--name", default="egnn_cpu")
    a = p.parse_args(argv)
    torch.set_num_threads(1)

    from identrep.datasets import load_qm9

    try:
        data = load_qm9(n_molecules=a.n_molecules, random_state=0)
        source = "qm9pack"
    except Exception:  # noqa: BLE001 - fall back to the test fixture
        data = load_qm9(source=ROOT / "tests" / "data" / "qm9")
        source = "tests/data/qm9 (qm9pack not installed)"
    X = torch.as_tensor(data.X, dtype=torch.float32)
    torch.manual_seed(0)
    net = EGNNExtractor.for_flat_input(
        X.shape[1], 8, hidden=a.hidden, n_layers=a.n_layers, n_rbf=a.n_rbf
    )
    diffs = check(net, X[: min(len(X), 256)])
    print(
        f"{len(X)} molecules ({source}), mean {data.n_atoms.mean():.1f} atoms; "
        f"hidden {a.hidden} x {a.n_layers} layers, n_rbf {a.n_rbf}"
    )
    print("max |difference| to the per-molecule loop (float64):", json.dumps(diffs))

    rows = {}
    for name, fn in METHODS.items():
        Xm = X[: a.loop_molecules] if name == "per_molecule" else X
        for backward in (True, False):
            cpu_ms_per_molecule(fn, net, Xm[: a.batch], a.batch, backward, 1)  # warm
            med, all_ = cpu_ms_per_molecule(fn, net, Xm, a.batch, backward, a.repeats)
            rows[(name, backward)] = {"ms": med, "all": all_, "n": len(Xm)}
    epochs = {}
    if a.epoch_molecules:
        ep = load_qm9(n_molecules=a.epoch_molecules, random_state=0)
        Ye = np.asarray(ep.Y, dtype=float)
        Ye = (Ye - Ye.mean(0)) / Ye.std(0)
        mtrn_epochs(ep.X[:256], Ye[:256], a, "edges")  # warm: first-fit imports
        epochs = {v: mtrn_epochs(ep.X, Ye, a, v) for v in ("buckets", "edges")}
    load = os.getloadavg()
    lines = [
        f"# EGNN extractor: CPU ms per molecule ({platform.node()}, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f})",
        "",
        f"{len(X)} QM9 molecules ({source}), batches of {a.batch}, hidden "
        f"{a.hidden} x {a.n_layers} layers, n_rbf {a.n_rbf}, float32, one thread; "
        f"median of {a.repeats} passes (per-molecule loop: first "
        f"{min(a.loop_molecules, len(X))} molecules).",
        "",
        "| implementation | fwd+bwd ms/mol | vs loop | vs buckets | fwd ms/mol "
        "| vs loop | vs buckets |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in METHODS:
        cells = [name]
        for backward in (True, False):
            ms = rows[(name, backward)]["ms"]
            cells += [
                f"{ms:.3f}",
                f"{rows[('per_molecule', backward)]['ms'] / ms:.2f}x",
                f"{rows[('buckets', backward)]['ms'] / ms:.2f}x",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Max |difference| to the per-molecule loop, float64, first 256 molecules: "
        + "; ".join(
            f"{k}: output {v['output']:.1e}, gradients {v['grad']:.1e}"
            for k, v in diffs.items()
        ),
    ]
    if epochs:
        b, e = epochs["buckets"], epochs["edges"]
        lines += [
            "",
            f"One MTRN epoch (fit of 2 epochs minus fit of 1; {a.epoch_molecules} "
            f"molecules, 12 standardised targets, batch {a.batch}, joint heads with "
            f"the per-epoch head refit, validation 10%): buckets "
            f"{b['cpu_per_epoch']:.2f} CPU-s, edges {e['cpu_per_epoch']:.2f} CPU-s "
            f"({b['cpu_per_epoch'] / e['cpu_per_epoch']:.2f}x). Validation losses "
            f"of the 2-epoch fits, same seed: buckets {b['val_loss']}, edges "
            f"{e['val_loss']}.",
        ]
    text = "\n".join(lines)
    print(text)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{a.name}.md").write_text(text + "\n")
    record = {
        "args": {k: str(v) for k, v in vars(a).items()},
        "load_average": load,
        "differences": diffs,
        "ms_per_molecule": {
            f"{n}/{'fwd+bwd' if b else 'fwd'}": v for (n, b), v in rows.items()
        },
        "mtrn_epoch": epochs,
        "torch": torch.__version__,
    }
    (a.out / f"{a.name}.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
