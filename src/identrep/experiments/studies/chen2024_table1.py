"""Chen et al. (2024) Table 1: strong MCC on linear synthetic data (MTLCM on the
observations, and the four baselines)."""

from __future__ import annotations

import dataclasses
import itertools
import time

import numpy as np

from identrep.experiments.configs import RunConfig
from identrep.experiments.registry import ReportSpec, Study, register_study
from identrep.experiments.studies import _chen2024 as chen
from identrep.utils.seeding import derive_seed

__all__ = [
    "BASELINE_SETTINGS",
    "MT_BASELINE_SETTINGS",
    "TABLE1_DIMS",
    "reference_mixing",
]

#: (k, d) configurations of the table.
TABLE1_DIMS = (
    (2, 3),
    (2, 5),
    (2, 10),
    (2, 20),
    (2, 50),
    (4, 5),
    (4, 10),
    (4, 20),
    (4, 50),
)

#: The baselines' fixed budget on the linear data (DESIGN.md section 7): linear
#: encoder and decoder; the epoch budget is a cap (early stopping on a 10%
#: validation split restores the best epoch).
BASELINE_SETTINGS = {"encoder": "linear", "max_epochs": 100, "batch_size": 256}

#: The multi-task variants' own settings on top of :data:`BASELINE_SETTINGS`:
#: their free task prior (the models' default), pooled ZCA whitening of x, a
#: learned decoder variance and Adam at 1e-2; MT-iVAE early-stops within 200
#: epochs, MT-iCaRL (no validation split: its objective lacks log C(u)) runs
#: the 100 epochs with its cosine schedule (measurements: docs/notes.md,
#: "MT-iVAE's free task prior").
MT_SETTINGS = {"whiten": "zca", "decoder_var": "learned", "lr": 1e-2}
MT_BASELINE_SETTINGS = {
    "MT-iVAE": {**MT_SETTINGS, "max_epochs": 200},
    "MT-iCaRL": MT_SETTINGS,
}

#: ``--quick``: three of the (k, d) configurations, one seed, and epoch caps
#: (the baselines' 100-epoch runs dominate the full table's time) so that every
#: model row appears in minutes on 2 cores (benchmarks/bench_quick.py).
QUICK_DIMS = ((2, 3), (2, 10), (4, 10))
QUICK_BASELINE_EPOCHS = 10  # MTLCM on linear data trains no network


def grid(
    seeds: int = 5,
    quick: bool = False,
    models=(),
    mixing: str = "random",
    mixing_source: str = "reference",
) -> list[RunConfig]:
    """9 (k, d) configurations, 200 tasks x 100 samples, for each model.

    ``quick`` keeps :data:`QUICK_DIMS`, one seed and the baselines capped at
    :data:`QUICK_BASELINE_EPOCHS` epochs (said so in the report).
    """
    base = RunConfig(table="table1", mixing=mixing, mixing_source=mixing_source)

    def epochs(m):
        return QUICK_BASELINE_EPOCHS if quick and m != "MTLCM" else None

    return [
        dataclasses.replace(
            base,
            model=m,
            n_causal=k,
            n_latents=d,
            n_observed=d,
            seed=s,
            max_epochs=epochs(m),
        )
        for m, (k, d), s in itertools.product(
            models,
            QUICK_DIMS if quick else TABLE1_DIMS,
            range(chen.n_seeds(seeds, quick)),
        )
    ]


def reference_mixing(d: int, kind: str, seed: int) -> np.ndarray:
    """The d x d mixing matrix the authors' code draws for seed index ``seed``.

    Their experiment seeds torch with the seed index and draws a standard-normal
    d x d matrix G first (float32): "random" uses G, "orthogonal" U V^T from its
    SVD, "identity" discards it.
    """
    import torch

    gen = torch.Generator().manual_seed(int(seed))
    G = torch.randn(d, d, generator=gen).double().numpy()
    if kind == "identity":
        return np.eye(d)
    if kind == "orthogonal":
        U, _, Vt = np.linalg.svd(G)
        return U @ Vt
    return G


def make_data(config: RunConfig):
    """The linear data set of a configuration (seeded from the configuration)."""
    from identrep.datasets import make_linear_tasks

    seed = derive_seed("data", *config.data_key())
    mixing = config.mixing
    if config.mixing_source == "reference":
        mixing = reference_mixing(config.n_latents, config.mixing, config.seed)
    data = make_linear_tasks(
        n_tasks=config.n_tasks,
        n_samples=config.n_samples,
        n_latents=config.n_latents,
        n_causal=config.n_causal,
        n_observed=config.n_observed,
        mixing=mixing,
        random_state=seed,
    )
    return data, seed


def fit_mtlcm(config: RunConfig, data, model_seed: int, artifacts=None) -> dict:
    """MTLCM on the observations, with two reference points of the per-task
    metric on the same data: ``ceiling_mcc_task`` (the true unmixing applied to
    the noisy observations) and ``random_mcc_task`` (a random unmixing), which
    shows how much of the per-task score is free (DESIGN.md section 6)."""
    from identrep.metrics import mcc_per_task
    from identrep.models import MTLCM

    t0 = time.perf_counter()
    model = MTLCM(
        n_latents=config.n_latents, n_init=config.n_init, random_state=model_seed
    )
    model.fit(data.X, data.y, task_ids=data.task_ids)
    fit_seconds = time.perf_counter() - t0
    Z_hat = model.transform(data.X)
    metrics = chen.score_latents(data, Z_hat, model.causal_indicators_)
    metrics.update(
        log_likelihood=model.log_likelihood_,
        n_iter=model.n_iter_,
        converged=model.converged_,
        fit_seconds=fit_seconds,
    )
    rng = np.random.default_rng(derive_seed("random-unmixing", *config.data_key()))
    metrics["ceiling_mcc_task"] = mcc_per_task(
        data.Z, data.X @ np.linalg.pinv(data.mixing).T, data.task_ids, "spearman"
    )
    metrics["random_mcc_task"] = mcc_per_task(
        data.Z,
        data.X @ rng.standard_normal((config.n_latents, data.X.shape[1])).T,
        data.task_ids,
        "spearman",
    )
    return metrics


def _heading(section: dict) -> str:
    source = (
        " (the authors' mixing matrices)"
        if section["mixing_source"] == "reference"
        else " (mixing matrices from identrep's seeds)"
    )
    return f", {section['mixing']} mixing{source}"


STUDY = register_study(
    Study(
        name="table1",
        title=(
            "Chen et al. (2024) Table 1: strong MCC on linear synthetic data "
            "(200 tasks x 100 samples)"
        ),
        make_grid=grid,
        make_data=make_data,
        fits=chen.chen_models(
            fit_mtlcm, chen.baseline_fit(BASELINE_SETTINGS, MT_BASELINE_SETTINGS)
        ),
        published="chen2024_table1_linear.csv",
        options=chen.MIXING_OPTIONS,
        progress=chen.PROGRESS,
        report=ReportSpec(
            columns=chen.COLUMNS,
            sort=chen.SORT,
            group=chen.GROUP,
            sections=chen.SECTIONS,
            keys=("n_causal", "n_latents"),
            metrics=(
                *chen.STRONG,
                *chen.CAUSAL,
                ("ceiling_mcc_task", "true unmixing, per task", 100),
                ("random_mcc_task", "random unmixing, per task", 100),
                ("fit_seconds", "fit s", 1),
            ),
            compare=(("mcc_task_spearman", None, "paper"),),
            published_when=(("mixing", "random"),),
            heading=_heading,
            intro=chen.quick_intro(
                len(TABLE1_DIMS), (200, 100), ("n_causal", "n_latents")
            ),
            footnote=chen.FOOTNOTE,
            plots=(chen.PLOT,),
        ),
    )
)
