"""Probe of Table 2's networks (Moran et al., 2022) on one split, high shift.

Separates the shift from training failures: fits a model on the shifted
training documents (or, with ``--unshifted``, on the same documents with the
test factors) and prints its reconstruction NLL on the training documents, on
the held-out documents from the *training* distribution, on the real (unshifted)
test documents, and the KL per latent of the VAE family.

Usage (data home with ml_abstracts; about 60 s of LDA, then 10-40 s per fit)::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src OMP_NUM_THREADS=1 \
        python benchmarks/table2_shift_probe.py VAE 50 [--beta 0.05] [--unshifted]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
import torch

import identrep.models as models
from identrep.datasets import make_topic_shift
from identrep.experiments.studies import _moran2022 as mo
from identrep.experiments.studies import moran2022_table2 as t2
from identrep.utils.seeding import derive_seed


def dense(M):
    return M.toarray() if sp.issparse(M) else np.asarray(M, float)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("epochs", type=int)
    ap.add_argument("--beta", type=float, default=None)
    ap.add_argument("--unshifted", action="store_true")
    args = ap.parse_args()
    cfg = next(c for c in t2.grid(seeds=1, models=("VAE",)) if c.sigma_pct == 50)
    X, topics = t2._topics(cfg.n_rows)
    seed = derive_seed("data", *cfg.data_key())
    d = make_topic_shift(X, "high", topics=topics, random_state=seed)
    tr, te = mo.split_rows(X.shape[0], derive_seed("split", cfg.table, cfg.n_rows, 0))
    shifted = {r: i for i, r in enumerate(d.train_rows)}
    plain = {r: i for i, r in enumerate(d.test_rows)}
    pick = lambda M, idx, rows: dense(M[[idx[r] for r in rows if r in idx]])  # noqa: E731
    Xtr = pick(d.X_test, plain, tr) if args.unshifted else pick(d.X_train, shifted, tr)
    X_in = pick(d.X_train, shifted, te)  # held out, training distribution
    X_te = pick(d.X_test, plain, te)  # the table's test documents
    p = Xtr.sum(0) + 1e-3
    p /= p.sum()
    pop = -(X_te * np.log(p)).sum(1).mean()
    kw = dict(
        n_latents=20,
        hidden_sizes=(50, 50),
        max_epochs=args.epochs,
        batch_size=128,
        lr=1e-2,
        likelihood="categorical",
        val_fraction=0.0,
        patience=None,
        random_state=0,
        beta=args.beta,
    )
    cls = getattr(models, args.model)
    params = cls().get_params()
    est = cls(**{k: v for k, v in kw.items() if k in params and v is not None})
    t0 = time.process_time()
    est.fit(Xtr)
    cpu = time.process_time() - t0
    line = (
        f"{args.model} epochs={args.epochs} beta={args.beta} "
        f"unshifted={args.unshifted} cpu={cpu:.1f}s popularity(test)={pop:.2f} "
        f"NLL train={est.heldout_nll(Xtr):.2f} heldout-in-dist="
        f"{est.heldout_nll(X_in):.2f} test={est.heldout_nll(X_te):.2f}"
    )
    m = est.module_
    if hasattr(m, "standardize") and hasattr(m, "encoder"):
        with torch.no_grad():
            x = torch.as_tensor(X_te)
            mu, lv = m.encoder(m.standardize(x), None)
        kl = (0.5 * (mu**2 + lv.exp() - 1 - lv)).mean(0).numpy()
        line += f" KL sum={kl.sum():.2f} active(>0.1)={(kl > 0.1).sum()}"
    print(line)


if __name__ == "__main__":
    main()
