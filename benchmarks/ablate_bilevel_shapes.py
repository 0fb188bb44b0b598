"""Renderer runs of the bilevel learner (docs/notes.md, "Bilevel sparse MTL at
correlation 0.9"): one JSON line per run with MCC on the training images, on
images with independent factors, and the matched per-factor correlations.

Usage::

    python benchmarks/ablate_bilevel_shapes.py seed=1 models=lasso ep=10
    python benchmarks/ablate_bilevel_shapes.py seed=2 models=ridge ep=10
"""

import json
import sys
import time
import warnings

import numpy as np

import identrep as ir
from identrep import MTRN
from identrep.datasets import make_shapes_tasks, render_shapes, sample_shapes_factors
from identrep.metrics import mcc
from identrep.models.nn.conv import ConvEncoder

a = dict(kv.split("=") for kv in sys.argv[1:])
seed = int(a.get("seed", 0))
T = int(a.get("T", 400))
p = float(a.get("p", 0.15))
rho = float(a.get("rho", 0.9))
ep = int(a.get("ep", 10))
size = int(a.get("size", 32))
models = a.get("models", "lasso").split(",")
t0 = time.time()
data = make_shapes_tasks(
    T, 50, rho=rho, support_prob=p, image_size=size, random_state=seed
)
f_ind = sample_shapes_factors(2000, rho=0.0, random_state=seed + 100)
X_ind = render_shapes(f_ind, image_size=size).reshape(2000, -1)
Z_ind = (f_ind - data.params["factors"].mean(0)) / data.params["factors"].std(0)
out = dict(
    seed=seed, T=T, p=p, rho=rho, ep=ep, size=size, data_s=round(time.time() - t0, 1)
)
enc = lambda q, d: ConvEncoder(d, image_shape=(size, size, 3))
for name in models:
    t0 = time.time()
    kw = dict(extractor=enc, max_epochs=ep, random_state=seed)
    if name == "lasso":
        m = ir.BilevelSparseMTL(6, l1_reg=float(a.get("l1", 0.3)), **kw)
    else:
        m = ir.RidgeICA(6, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(data.X, data.y, task_ids=data.task_ids)
    out[name + "_s"] = round(time.time() - t0, 1)
    if name == "lasso":
        out["lasso"] = round(mcc(data.Z, m.transform(data.X)), 4)
        out["lasso_ind"] = round(mcc(Z_ind, m.transform(X_ind)), 4)
        from scipy.optimize import linear_sum_assignment

        R = np.abs(np.corrcoef(data.Z.T, m.transform(data.X).T)[:6, 6:])
        r, c = linear_sum_assignment(-R)
        out["per_factor"] = [round(float(v), 3) for v in R[r, c]]
    else:
        out["ridge"] = round(mcc(data.Z, MTRN.transform(m, data.X)), 4)
        out["ridge_ica"] = round(mcc(data.Z, m.transform(data.X)), 4)
        out["ridge_ica_ind"] = round(mcc(Z_ind, m.transform(X_ind)), 4)
    print(json.dumps(out), flush=True)
