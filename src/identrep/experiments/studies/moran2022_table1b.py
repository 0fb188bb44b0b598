"""Moran et al. (2022) Table 1b: held-out NLL of bag-of-words abstracts (the
PeerRead stand-in, :func:`~identrep.datasets.load_ml_abstracts`)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from functools import lru_cache

from identrep.experiments.registry import ReportSpec, Study, register_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.utils.seeding import derive_seed

__all__ = ["TABLE1B_FULL", "TABLE1B_QUICK", "grid", "load_abstracts"]

NAME = "moran2022_table1b"
#: The paper's Table 6 for PeerRead: K = 20, layers of 100, 40 epochs, batch 128,
#: softmax (multinomial) likelihood; learning rate not legible in our copy (Adam
#: 1e-3).
TABLE1B_FULL = {
    "n_latents": 20,
    "hidden": 100,
    "max_epochs": 40,
    "batch_size": 128,
    "lr": 1e-3,
}
#: ``--quick``: 1 split, 1,200 abstracts, 3 epochs, layers of 50.
TABLE1B_QUICK = {"max_epochs": 3, "n_rows": 1200, "hidden": 50}


def grid(
    seeds=5,
    quick=False,
    models=mo.TEXT_MODELS,
    **options,
):
    """Five random 80/20 splits of the abstracts (``quick``: TABLE1B_QUICK).
    ``options``: ``n_latents``, ``max_epochs`` and ``lr_schedule``
    (:func:`~identrep.experiments.studies._moran2022.table_settings`)."""
    settings, splits = mo.table_settings(
        TABLE1B_FULL,
        TABLE1B_QUICK,
        seeds=seeds,
        quick=quick,
        default_latents=20,
        **options,
    )
    load_abstracts()  # absent data fail here, saying where to put them
    base = mo.MoranConfig(table=NAME, **settings)
    return [
        dataclasses.replace(base, model=m, seed=s)
        for m, s in itertools.product(models, splits)
    ]


@lru_cache(maxsize=1)
def load_abstracts():
    """The ML abstracts (ICLR and NeurIPS) as counts of 500 words."""
    from identrep.datasets import load_ml_abstracts

    return load_ml_abstracts()


def make_data(config: mo.MoranConfig):
    bow = load_abstracts()
    seed = derive_seed("data", *config.data_key())
    rows = mo.subsample(bow.X.shape[0], config.n_rows, seed)
    train, test = mo.split_rows(len(rows), seed)
    X = bow.X[rows]
    return mo.Split(X_train=X[train], X_test=X[test], names=bow.vocabulary), seed


def fit_counts(
    config: mo.MoranConfig, split: mo.Split, model_seed: int, artifacts=None
):
    """Fit on the training documents; held-out NLL on the test documents."""
    est, fit_seconds = mo.fit_estimator(
        config, split, model_seed, "categorical", needs=("heldout_nll",)
    )
    t0 = time.perf_counter()
    nll = mo.heldout_nll(est, split.X_test)
    return {
        "nll": nll,
        "n_train": int(split.X_train.shape[0]),
        "n_test": int(split.X_test.shape[0]),
        "top_features": mo.top_features(est, split.names),
        "score_seconds": time.perf_counter() - t0,
        "fit_seconds": fit_seconds,
    }


COLUMNS = (
    "table",
    "model",
    "n_latents",
    "hidden",
    "max_epochs",
    "n_rows",
    "sigma_pct",
    "seed",
)
GROUP = ("n_latents", "hidden", "max_epochs", "n_rows", "sigma_pct")
NLL_FOOTNOTE = (
    "Held-out NLL: the multinomial reconstruction NLL of the test documents' word "
    "counts (nats per document, the multinomial coefficient omitted, as the "
    "authors), not a marginal likelihood. Networks: 2 hidden layers as the "
    "authors' code (the paper's Table 6 says 3). beta-VAE: beta = 2 (the paper "
    "sweeps 2-16 without saying which it reports). Words: alphabetic tokens, "
    "English stop words and document-frequency filters as the authors, but no "
    "lemmatisation; the corpus is 4,829 ICLR and NeurIPS abstracts, not PeerRead. "
    + mo.SETTINGS_NOTE
)

STUDY = register_study(
    Study(
        name=NAME,
        title=(
            "Moran et al. (2022) Table 1b: held-out NLL, ML abstracts (PeerRead "
            "stand-in, 500 words)"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={
            m: fit_counts for m in (*mo.TEXT_MODELS, *mo.variants_of(mo.TEXT_MODELS))
        },
        published="moran2022_table1b_peerread.csv",
        options=(mo.LATENTS_OPTION, mo.EPOCHS_OPTION, mo.SCHEDULE_OPTION),
        progress=(("nll", "NLL"),),
        comparable=("n_rows", "max_epochs"),
        report=ReportSpec(
            columns=COLUMNS,
            sort=("n_latents",),
            group=GROUP,
            keys=("n_latents",),
            metrics=(("nll", "held-out NLL", 1), ("fit_seconds", "fit s", 1)),
            compare=(("nll", None, "paper"),),
            main="nll",
            lower_is_better=("nll",),
            intro=mo.quick_intro(
                TABLE1B_FULL,
                "Mean ± std over random 80/20 splits of the documents (the paper: "
                "5 splits); lower is better.",
            ),
            footnote=NLL_FOOTNOTE,
            plots=(),
        ),
    )
)
