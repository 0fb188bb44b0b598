"""Moran et al. (2022) Table 2: held-out NLL when the training and test factors
are correlated differently (semi-synthetic abstracts built with LDA,
:func:`~identrep.datasets.make_topic_shift`; high, medium and low shift)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from functools import lru_cache

import numpy as np

from identrep.experiments.registry import Option, ReportSpec, Study, register_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.experiments.studies.moran2022_table1b import (
    COLUMNS,
    GROUP,
    NLL_FOOTNOTE,
    load_abstracts,
)
from identrep.utils.seeding import derive_seed

__all__ = ["SHIFTS", "TABLE2_FULL", "TABLE2_QUICK", "grid"]

NAME = "moran2022_table2"
#: shift -> sigma_pct (100 x the noise sd of the replaced log-factors).
SHIFTS = {"high": 50, "medium": 100, "low": 300}
#: The paper's Table 6 for the semi-synthetic data: K = 20, layers of 50, Adam
#: 0.01, 50 epochs, batch 128, softmax likelihood. LDA has 20 topics.
TABLE2_FULL = {
    "n_latents": 20,
    "hidden": 50,
    "max_epochs": 50,
    "batch_size": 128,
    "lr": 1e-2,
}
#: ``--test-docs`` -> the config's ``source``. "heldout" (source ""): an 80/20
#: split of the abstracts, the test ones with LDA's factors. "same": every
#: abstract in training (shifted factors) and in test (LDA's factors), as the
#: authors' data files hold them (``IntervenedDataset``: ``sim_obs`` and
#: ``orig_obs`` of the same documents). "resampled": every abstract, the test
#: factors a second draw of the shifted ones (the notebook's last cell).
TEST_SOURCES = {"heldout": "", "same": "same", "resampled": "resampled"}
#: ``--quick``: 1 data set, LDA on 800 abstracts, 3 epochs.
TABLE2_QUICK = {"max_epochs": 3, "n_rows": 800}
N_TOPICS = 20


def grid(
    seeds=5,
    quick=False,
    models=mo.TEXT_MODELS,
    test_docs="heldout",
    **options,
):
    """Three shifts x five semi-synthetic data sets (noise draw per seed, and the
    80/20 split of the documents for "heldout"; ``quick``: TABLE2_QUICK).
    ``test_docs``: "heldout", "same" or "resampled" (:data:`TEST_SOURCES`).
    ``options``: ``n_latents``, ``max_epochs`` and ``lr_schedule``
    (:func:`~identrep.experiments.studies._moran2022.table_settings`)."""
    if test_docs not in TEST_SOURCES:
        raise ValueError(
            f"--test-docs must be one of {tuple(TEST_SOURCES)}; got {test_docs!r}."
        )
    settings, splits = mo.table_settings(
        TABLE2_FULL,
        TABLE2_QUICK,
        seeds=seeds,
        quick=quick,
        default_latents=20,
        **options,
    )
    load_abstracts()  # absent data fail here, saying where to put them
    base = mo.MoranConfig(table=NAME, source=TEST_SOURCES[test_docs], **settings)
    return [
        dataclasses.replace(base, model=m, sigma_pct=sig, seed=s)
        for m, sig, s in itertools.product(models, SHIFTS.values(), splits)
    ]


@lru_cache(maxsize=2)
def _topics(n_rows: int):
    """LDA (20 topics, seed 0) on the abstracts used: fitted once per process
    and shared by every shift and data set (as the authors' one pre-training)."""
    from identrep.datasets.text import fit_topics

    bow = load_abstracts()
    rows = mo.subsample(bow.X.shape[0], n_rows, derive_seed("table2-docs", n_rows))
    X = bow.X[rows]
    return X, fit_topics(X, N_TOPICS, random_state=0)


def make_data(config: mo.MoranConfig):
    from identrep.datasets import make_topic_shift

    shift = {v: k for k, v in SHIFTS.items()}.get(config.sigma_pct)
    if shift is None:
        raise ValueError(
            f"sigma_pct must be one of {tuple(SHIFTS.values())}; "
            f"got {config.sigma_pct}."
        )
    if config.source not in TEST_SOURCES.values():
        raise ValueError(
            f"source must be one of {tuple(TEST_SOURCES.values())}; "
            f"got {config.source!r}."
        )
    X, topics = _topics(config.n_rows)
    seed = derive_seed("data", *config.data_key())
    test_factors = "resampled" if config.source == "resampled" else "original"
    d = make_topic_shift(
        X, shift, topics=topics, random_state=seed, test_factors=test_factors
    )
    if config.source:  # every document in training and in test (the authors')
        X_train, X_test = d.X_train, d.X_test
    else:
        # the same documents are held out at every shift of a seed (only the
        # shift differs between the three columns of the table)
        split_seed = derive_seed("split", config.table, config.n_rows, config.seed)
        train, test = mo.split_rows(X.shape[0], split_seed)
        X_train = d.X_train[np.isin(d.train_rows, train)]
        X_test = d.X_test[np.isin(d.test_rows, test)]
    test_docs = {v: k for k, v in TEST_SOURCES.items()}[config.source]
    split = mo.Split(
        X_train=X_train,
        X_test=X_test,
        names=load_abstracts().vocabulary,
        info={"shift": shift, "test_docs": test_docs},
    )
    return split, seed


def fit(config: mo.MoranConfig, split: mo.Split, model_seed: int, artifacts=None):
    """Fit on the shifted training documents; NLL on the test ones."""
    est, fit_seconds = mo.fit_estimator(
        config, split, model_seed, "categorical", needs=("heldout_nll",)
    )
    t0 = time.perf_counter()
    nll = mo.heldout_nll(est, split.X_test)
    return {
        "nll": nll,
        "n_train": int(split.X_train.shape[0]),
        "n_test": int(split.X_test.shape[0]),
        "score_seconds": time.perf_counter() - t0,
        "fit_seconds": fit_seconds,
    }


_SHIFT = (
    "sigma_pct: 100 x the noise sd of the replaced log-factors; 50 = high shift, "
    "100 = medium, 300 = low. LDA (20 topics) on the abstracts gives factors theta "
    "and topics beta; training documents have theta's last 10 log-columns replaced "
    "by noisy copies of the first 10 (correlated factors), "
)
_COUNTS = "each document's counts are its rounded expected counts. "
#: Report intro per ``source`` (the --test-docs value behind it).
_WHAT = {
    "": _SHIFT + "test documents keep theta; " + _COUNTS + "Mean ± std over the "
    "semi-synthetic data sets (noise draw and 80/20 document split per seed; the "
    "paper: 5); lower is better.",
    "same": _SHIFT + "and the test documents are the same documents with theta "
    "(--test-docs same: every abstract in both, as the authors' data files); "
    + _COUNTS
    + "Mean ± std over the semi-synthetic data sets (noise draw per seed; the "
    "paper: 5); lower is better.",
    "resampled": _SHIFT + "and the test documents are the same abstracts with a "
    "second draw of that noise (--test-docs resampled, the last cell of the "
    "authors' generating notebook); " + _COUNTS + "Mean ± std over the "
    "semi-synthetic data sets (noise draws per seed; the paper: 5); lower is "
    "better.",
}


def _intro(runs) -> str:
    source = runs["source"].fillna("").iloc[0] if "source" in runs else ""
    return mo.quick_intro(TABLE2_FULL, _WHAT.get(source, _WHAT[""]))(runs)


STUDY = register_study(
    Study(
        name=NAME,
        title=(
            "Moran et al. (2022) Table 2: held-out NLL under a train/test shift of "
            "the factors (semi-synthetic abstracts)"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={m: fit for m in (*mo.TEXT_MODELS, *mo.variants_of(mo.TEXT_MODELS))},
        published="moran2022_table2_semisynthetic.csv",
        options=(
            mo.LATENTS_OPTION,
            mo.EPOCHS_OPTION,
            mo.SCHEDULE_OPTION,
            Option(
                flag="--test-docs",
                param="test_docs",
                default="heldout",
                choices=tuple(TEST_SOURCES),
                help="test documents: 20%% of the abstracts held out, with LDA's "
                "factors (heldout, default); every abstract, trained with the "
                "shifted factors and tested with LDA's (same, the authors' data "
                "files); every abstract, tested with a second shifted draw "
                "(resampled, the notebook's last cell). The records' source",
            ),
        ),
        progress=(("nll", "NLL"),),
        comparable=("n_rows", "max_epochs", "source"),
        report=ReportSpec(
            columns=(*COLUMNS, "source"),
            sort=("sigma_pct", "n_latents"),
            group=(*GROUP, "source"),
            sections=("source",),
            heading=lambda s: f", test documents: {s['source']}" if s["source"] else "",
            keys=("sigma_pct",),
            metrics=(("nll", "held-out NLL", 1), ("fit_seconds", "fit s", 1)),
            compare=(("nll", None, "paper"),),
            main="nll",
            lower_is_better=("nll",),
            intro=_intro,
            footnote=NLL_FOOTNOTE,
            plots=(),
        ),
    )
)
