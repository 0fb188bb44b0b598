"""Epoch by epoch: does a Sparse VAE row's posterior collapse before its masks empty?

Refits stored runs of a real-data table of Moran et al. (2022) (as
``moran2022_svae_probe.py``: the same splits, data and model seeds, budget and
scoring; ``--variant`` estimator parameters on top of the study's) and prints, after
every epoch, the training and validation loss, the KL of q(z | x) to N(0, 1) per
latent (mean over the first training batch, latents sorted; "active" = KL above 0.01
nats), the fraction of the decoder's masks with inclusion probability above 1/2
(the E-step's p*), and the largest |W| entry. The SSL penalty starts after the
``ssl_warmup`` fraction of the steps. The per-epoch pass runs without gradients in
eval mode on a batch the loss already saw, so it changes nothing in the fit (the
final line is the stored probe's line, comparable with ``moran2022_svae_probe.py``).

Usage::

    IDENTREP_DATA=/work/shared/data OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/moran2022_collapse_probe.py table1b --split 0 \\
        --model SparseVAE --variant "lr=0.01"
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from _probe_params import parse_params
from identrep.experiments import get_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.models.vae._elbo import kl_diag_gaussians, standardized_input

METRICS = {"table1a": "nll", "table1b": "nll", "table2": "nll", "table4": "accuracy"}


def traced_fit_module(original, rows: list):
    """The estimator's ``_fit_module`` with a per-epoch callback recording rows."""

    def run(self, module, loss_fn, train_b, val_b=None, **kw):
        seen: list = []

        def loss(m, batch):
            if not seen:
                seen.append(batch)
            return loss_fn(m, batch)

        def callback(epoch, m, history):
            with torch.no_grad():
                mean, log_var = m.encoder(standardized_input(m, seen[0]))
                zero = torch.zeros_like(mean[..., None])  # per latent, not summed
                kl = kl_diag_gaussians(mean[..., None], log_var[..., None], zero, zero)
                kl = kl.mean(0)
            kl = np.sort(kl.double().cpu().numpy())[::-1]
            p = m.p_star.double().cpu().numpy() if hasattr(m, "p_star") else None
            W = m.decoder.W.detach().abs().max().item() if p is not None else np.nan
            rows.append(
                dict(
                    epoch=epoch + 1,
                    train=history["train_loss"][-1],
                    val=(history["val_loss"] or [np.nan])[-1],
                    kl=kl,
                    active=int(np.sum(kl > 0.01)),
                    p_half=np.nan if p is None else float(np.mean(p > 0.5)),
                    w_max=W,
                )
            )
            return None

        return original(self, module, loss, train_b, val_b, callback=callback, **kw)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", choices=sorted(METRICS))
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--model", default="SparseVAE")
    ap.add_argument("--variant", default="")
    ap.add_argument("--every", type=int, default=1, help="print every N-th epoch")
    args = ap.parse_args()
    study = get_study(f"moran2022_{args.table}")
    configs = study.grid(seeds=args.split + 1, models=(args.model,))
    config = [c for c in configs if c.seed == args.split][0]  # Table 2: high shift
    overrides = parse_params(args.variant.split(), "--variant")
    build, rows, built = mo.make_estimator, [], [None]

    def keep(*a, **kw):
        est = build(*a, **kw).set_params(**overrides)
        cls = type(est)
        if "_fit_module" not in cls.__dict__:  # patch the class once
            cls._fit_module = traced_fit_module(cls._fit_module, rows)
        built[0] = est
        return est

    split, _ = study.make_data(config)
    mo.make_estimator = keep
    t0 = time.process_time()
    try:
        out = study.fits[args.model](config, split, config.model_seed())
    finally:
        mo.make_estimator = build
    print(f"{args.table} {config.describe()} {args.model} variant=[{args.variant}]")
    print("epoch  train      val        active  p*>1/2  max|W|  KL per latent (nats)")
    for r in rows:
        if r["epoch"] % args.every and r is not rows[-1]:
            continue
        kl = " ".join(f"{v:.3f}" for v in r["kl"])
        print(
            f"{r['epoch']:5d}  {r['train']:.4f}  {r['val']:.4f}  {r['active']:6d}  "
            f"{r['p_half']:.3f}   {r['w_max']:.3f}  {kl}"
        )
    metric = METRICS[args.table]
    print(f"{metric}={out[metric]:.4f} cpu_s={time.process_time() - t0:.1f}")


if __name__ == "__main__":
    main()
