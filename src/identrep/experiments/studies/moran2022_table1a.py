"""Moran et al. (2022) Table 1a: MovieLens, held-out NLL, Recall@5 and NDCG@10.

The paper uses MovieLens 25M (100,000 users, the 300 most rated movies); MovieLens
may not be redistributed, so the study reads it from the data home
(:func:`~identrep.datasets.load_movielens`; MovieLens 100K installs offline with
``pip install --no-deps recbole``) and fails with that instruction when it is
absent. ``--movielens`` picks the variant (default 100K).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from functools import lru_cache

from identrep.experiments.registry import Option, ReportSpec, Study, register_study
from identrep.experiments.studies import _moran2022 as mo
from identrep.experiments.studies.moran2022_table1b import COLUMNS, GROUP
from identrep.utils.seeding import derive_seed

__all__ = ["TABLE1A_FULL", "TABLE1A_QUICK", "grid", "load_ratings"]

NAME = "moran2022_table1a"
#: The paper's Table 6 for MovieLens: K = 30, layers of 300, 100 epochs, batch
#: 100, softmax (multinomial) likelihood; learning rate not legible in our copy
#: (Adam 1e-3).
TABLE1A_FULL = {
    "n_latents": 30,
    "hidden": 300,
    "max_epochs": 100,
    "batch_size": 100,
    "lr": 1e-3,
}
#: ``--quick``: 1 split, 3 epochs, layers of 100 (every user of 100K).
TABLE1A_QUICK = {"max_epochs": 3, "hidden": 100}
#: Users sampled from the large variants (the paper: 100,000 of 25M).
N_USERS = {"20m": 100_000, "25m": 100_000}
VARIANTS = ("100k", "1m", "10m", "20m", "25m")


def grid(
    seeds=5,
    quick=False,
    models=mo.PAPER_MODELS,
    source="100k",
    **options,
):
    """Five random 80/20 splits of the users (``quick``: TABLE1A_QUICK). The data must
    be installed: checked here, before any run. ``options``: ``n_latents``,
    ``max_epochs`` and ``lr_schedule``
    (:func:`~identrep.experiments.studies._moran2022.table_settings`)."""
    if source not in VARIANTS:
        raise ValueError(f"--movielens must be one of {VARIANTS}; got {source!r}.")
    settings, splits = mo.table_settings(
        TABLE1A_FULL,
        TABLE1A_QUICK,
        seeds=seeds,
        quick=quick,
        default_latents=30,
        **options,
    )
    load_ratings(source)  # a missing data set fails here, with how to install it
    base = mo.MoranConfig(table=NAME, source=source, **settings)
    return [
        dataclasses.replace(base, model=m, seed=s)
        for m, s in itertools.product(models, splits)
    ]


@lru_cache(maxsize=2)
def load_ratings(source: str):
    """Binary ratings, 300 most rated movies, users with >= 20 positives."""
    from identrep.datasets import load_movielens

    return load_movielens(source, n_users=N_USERS.get(source), random_state=0)


def make_data(config: mo.MoranConfig):
    data = load_ratings(config.source)
    seed = derive_seed("data", *config.data_key())
    rows = mo.subsample(data.X.shape[0], config.n_rows, seed)
    train, test = mo.split_rows(len(rows), seed)
    X = data.X[rows]
    split = mo.Split(X_train=X[train], X_test=X[test], names=data.titles)
    return split, seed


def fit(config: mo.MoranConfig, split: mo.Split, model_seed: int, artifacts=None):
    """Fit on the training users; on the test users: NLL of their ratings, then
    Recall@5 and NDCG@10 under the fold-in and the authors' protocols
    (:func:`~identrep.experiments.studies._moran2022.ranking_scores`; models
    without ``reconstruct`` get the NLL only)."""
    est, fit_seconds = mo.fit_estimator(
        config, split, model_seed, "categorical", needs=("heldout_nll",)
    )
    t0 = time.perf_counter()
    # a model without reconstructions keeps its NLL row; its ranking cells stay
    # empty ("-" in the report)
    out = (
        mo.ranking_scores(
            est, split.X_test, seed=derive_seed("fold-in", *config.data_key())
        )
        if hasattr(est, "reconstruct")
        else {}
    )
    out["nll"] = mo.heldout_nll(est, split.X_test)
    return {
        **out,
        "n_train": int(split.X_train.shape[0]),
        "n_test": int(split.X_test.shape[0]),
        "top_features": mo.top_features(est, split.names),
        "score_seconds": time.perf_counter() - t0,
        "fit_seconds": fit_seconds,
    }


STUDY = register_study(
    Study(
        name=NAME,
        title=(
            "Moran et al. (2022) Table 1a: MovieLens (300 most rated movies), "
            "held-out NLL, Recall@5, NDCG@10"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={m: fit for m in (*mo.PAPER_MODELS, *mo.variants_of(mo.PAPER_MODELS))},
        published="moran2022_table1a_movielens.csv",
        options=(
            mo.LATENTS_OPTION,
            mo.EPOCHS_OPTION,
            mo.SCHEDULE_OPTION,
            Option(
                flag="--movielens",
                param="source",
                default="100k",
                choices=VARIANTS,
                help="MovieLens variant in the data home (the paper: 25m)",
            ),
        ),
        progress=(("nll", "NLL"), ("recall_at_5", "Recall@5")),
        comparable=("n_rows", "max_epochs", "source"),
        report=ReportSpec(
            columns=(*COLUMNS, "source"),
            sort=("n_latents",),
            group=(*GROUP, "source"),
            keys=("n_latents",),
            metrics=(
                ("nll", "held-out NLL", 1),
                ("recall_at_5", "Recall@5 fold-in", 100),
                ("ndcg_at_10", "NDCG@10 fold-in", 100),
                ("recall_at_5_same_rows", "Recall@5 same rows", 100),
                ("ndcg_at_10_same_rows", "NDCG@10 same rows", 100),
                ("fit_seconds", "fit s", 1),
            ),
            compare=(
                ("nll", None, "paper NLL"),
                ("recall_at_5_same_rows", None, "paper Recall@5"),
                ("ndcg_at_10_same_rows", None, "paper NDCG@10"),
            ),
            main="nll",
            lower_is_better=("nll",),
            intro=mo.quick_intro(
                TABLE1A_FULL,
                "Mean ± std over random 80/20 splits of the users (the paper: 5). "
                "Ratings >= 4 are 1, the rest 0; users with >= 20 such ratings; the "
                "300 movies with the most. NLL: multinomial reconstruction NLL of "
                "the test users' ratings (lower is better). Recall@5 / NDCG@10 "
                "fold-in: VAE-CF's protocol (Liang et al., 2018), 20% of each test "
                "user's movies hidden and ranked from the other 80%. Same rows: the "
                "authors' script, which ranks the movies the model was given as "
                "input (what the paper reports, so the paper's columns sit beside "
                "these; it rewards copying the input).",
            ),
            footnote=(
                "The paper's numbers are on MovieLens 25M (100,000 users); a "
                "smaller variant (the default 100K: 703 users) is not the same "
                "experiment. Networks: 2 hidden layers as the authors' code (the "
                "paper's Table 6 says 3). beta-VAE: beta = 2. " + mo.SETTINGS_NOTE
            ),
            plots=(),
        ),
    )
)
