"""Which spurious latents MTLCM calls causal, and the accuracy at other thresholds.

One seed (0), d = 10 and 50, k = 2, 200 tasks x 100 samples. Prints the AUROC of the
fitted indicators, |gamma| (true spurious coefficient) of the false positives against
the smallest |gamma| of a correctly rejected spurious latent, and the accuracy when
the indicators are thresholded at 0.5-0.99. Run from the repository root::

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/indicators_diag.py
"""

import numpy as np

import identrep as ir
from identrep.metrics import causal_scores, match_latents

for d, k in [(10, 2), (50, 2)]:
    data = ir.datasets.make_linear_tasks(
        n_tasks=200, n_samples=100, n_latents=d, n_causal=k, random_state=0
    )
    m = ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    mt = match_latents(data.Z, m.transform(data.X))
    c = m.causal_indicators_[:, mt]
    tb = data.causal.astype(bool)
    pred = c >= 0.5
    fp = pred & ~tb
    g = np.abs(data.gammas)
    sc = causal_scores(data.causal, m.causal_indicators_, mt)
    print(f"d={d} k={k} auroc {sc['auroc']:.4f}")
    print(
        f"  |gamma| of false positives: max {g[fp].max():.3f} median "
        f"{np.median(g[fp]):.3f}; smallest |gamma| of a true negative "
        f"{g[~tb & ~pred].min():.3f}"
    )
    for thr in [0.5, 0.7, 0.9, 0.95, 0.99]:
        acc = causal_scores(data.causal, m.causal_indicators_, mt, threshold=thr)
        print(f"  threshold {thr}: accuracy {acc['accuracy']:.4f}")
    print(f"  c of true causal: min {c[tb].min():.3f} median {np.median(c[tb]):.3f}")
