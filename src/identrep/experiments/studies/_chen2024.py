"""Pieces shared by the Chen et al. (2024) studies (Tables 1-3): the baselines'
estimators, the MTRN + MTLCM pipeline, latent scoring, CLI options and the report
vocabulary. Not a study itself (no ``register_study`` here)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from identrep.experiments.registry import Option, PlotSpec
from identrep.utils.numerics import CAUSAL_THRESHOLD

__all__ = [
    "BASELINE_CLASSES",
    "FOOTNOTE",
    "MIXING_OPTIONS",
    "RealData",
    "baseline_estimator",
    "baseline_fit",
    "chen_models",
    "pipeline",
    "score_latents",
]

#: The baselines (rows of every Chen et al. table after MTLCM) and their
#: estimator classes in ``identrep.models.vae``.
BASELINE_CLASSES = {
    "iVAE": "IVAE",
    "MT-iVAE": "MTIVAE",
    "iCaRL": "ICaRL",
    "MT-iCaRL": "MTICaRL",
}


def chen_models(mtlcm_fit, baseline):
    """A study's fits in the paper's row order: MTLCM, then the baselines."""
    return {"MTLCM": mtlcm_fit, **{name: baseline for name in BASELINE_CLASSES}}


def n_seeds(seeds: int, quick: bool, quick_seeds: int = 1) -> int:
    return min(seeds, quick_seeds) if quick else seeds


def quick_intro(n_configs: int, size: tuple[int, int], keys: tuple[str, ...]):
    """The report intro of a study: when its runs use smaller budgets than the
    paper's protocol (``n_configs`` configurations of ``keys``, ``size`` = tasks x
    samples, 5 seeds, the default epoch budgets), one line saying which, as
    ``identrep reproduce --quick`` does; empty for a full run."""

    def intro(runs) -> str:
        below = []
        if "max_epochs" in runs and runs["max_epochs"].notna().any():
            caps = runs.groupby("model", sort=False)["max_epochs"].first().dropna()
            below.append(
                "epoch caps " + ", ".join(f"{m} {int(e)}" for m, e in caps.items())
            )
        shape = runs[["n_tasks", "n_samples"]].drop_duplicates().to_numpy()
        if any(tuple(int(v) for v in row) != tuple(size) for row in shape):
            shown = ", ".join(f"{int(a)} x {int(b)}" for a, b in shape)
            below.append(f"{shown} tasks x samples (paper: {size[0]} x {size[1]})")
        n = len(runs[list(keys)].drop_duplicates())
        if n < n_configs:
            below.append(f"{n} of the paper's {n_configs} configurations")
        seeds = runs["seed"].nunique()
        if seeds < 5:
            below.append(f"{seeds} seed(s) (paper: 5)")
        if not below:
            return ""
        return (
            "**Smaller budgets than the paper's** (as `identrep reproduce --quick` "
            f"runs): {'; '.join(below)}. A first look at every model, not a "
            "comparison with the paper."
        )

    return intro


MIXING_OPTIONS = (
    Option(
        "--mixing",
        "mixing",
        default="random",
        choices=("random", "orthogonal", "identity"),
        help="mixing matrix of the linear data",
    ),
    Option(
        "--mixing-source",
        "mixing_source",
        default="reference",
        choices=("reference", "seeded"),
        help="'reference': the authors' mixing matrix for each seed index "
        "(torch.manual_seed(s); randn(d, d)); 'seeded': identrep's own "
        "config-derived draw",
    ),
)

#: results.csv columns, row order and seed groups of the RunConfig studies.
COLUMNS = (
    "table",
    "model",
    "seed",
    "n_latents",
    "n_causal",
    "n_observed",
    "n_tasks",
    "n_samples",
    "mixing",
    "mixing_source",
    "n_init",
)
SORT = ("mixing", "n_causal", "n_latents", "n_observed")
GROUP = ("mixing", "mixing_source", "n_causal", "n_latents", "n_observed")
SECTIONS = ("mixing", "mixing_source")
#: one figure per mixing: the main metric against each varied key field
PLOT = PlotSpec(by=("mixing",))

STRONG = (
    ("mcc_task_spearman", "MCC per task (Spearman)", 100),
    ("mcc_pooled", "MCC pooled (Pearson)", 100),
)
CAUSAL = (
    ("causal_accuracy", "causal acc.", 100),
    ("causal_exact_set_rate", "exact causal sets", 100),
)
PROGRESS = (
    ("mcc_task_spearman", "MCC task"),
    ("mcc_pooled", "pooled"),
    ("mtrn_weak_mcc", "weak"),
    ("mtrn_r2", "MTRN R2"),
)

FOOTNOTE = (
    "MCC per task: Spearman MCC with its own matching in every task, averaged "
    "over tasks (the paper's protocol). MCC pooled: one matching over all "
    "samples. 'true unmixing, per task' applies the true A^-1 to the noisy "
    "observations (the reference code's noise ceiling): an ill-conditioned "
    "random mixing amplifies the observation noise. "
    "'random unmixing, per task' is the per-task score of a random "
    "linear unmixing on the same data: the per-task metric is biased upward "
    "because a task's spurious latents are nearly collinear with its target. "
    "MTRN weak MCC: CCA to the latent dimension, then Spearman MCC of the "
    "canonical variates, fitted and scored on a pooled random subsample of "
    "10,000 points (the paper's protocol; 'held-out CCA' fits the CCA on half "
    "of them and scores the other half). "
    f"Causal accuracy: indicators ≥ {CAUSAL_THRESHOLD} against the true causal "
    "sets after a pooled matching of latents. Std over seeds with ddof=0."
)


@dataclasses.dataclass(frozen=True)
class RealData:
    """A real data set in the wide layout: inputs ``X`` (n, p), tasks ``Y`` (n, T)."""

    X: np.ndarray
    Y: np.ndarray


def pipeline(config, model_seed: int, mtrn_base: dict | None = None):
    """The unfitted MTRN + MTLCM pipeline of a configuration: the study's MTRN
    settings, overridden by the configuration's head solver and epoch budget."""
    from identrep.models import TaskIdentifiable

    mtrn_params = dict(mtrn_base or {})
    if config.heads is not None:
        mtrn_params["heads"] = config.heads
    if config.max_epochs is not None:
        mtrn_params["max_epochs"] = config.max_epochs
    return TaskIdentifiable(
        n_latents=config.n_latents,
        mtrn_params=mtrn_params,
        mtlcm_params={"n_init": config.n_init},
        random_state=model_seed,
    )


def score_latents(data, Z_hat: np.ndarray, causal_hat: np.ndarray | None) -> dict:
    """Strong MCC per task and pooled (and causal scores) against the true latents."""
    from identrep.metrics import causal_scores, match_latents, mcc, mcc_per_task

    out = {
        "mcc_task_spearman": mcc_per_task(data.Z, Z_hat, data.task_ids, "spearman"),
        "mcc_pooled": mcc(data.Z, Z_hat, "pearson"),
        "mcc_pooled_spearman": mcc(data.Z, Z_hat, "spearman"),
    }
    if causal_hat is not None:
        perm = match_latents(data.Z, Z_hat)
        sc = causal_scores(data.causal, causal_hat, perm)
        out.update({f"causal_{k}": v for k, v in sc.items()})
    return out


def baseline_estimator(
    config, model_seed: int, settings: dict, per_model: dict | None = None
):
    """The unfitted baseline estimator of a configuration with the study's
    ``settings``, updated by ``per_model[config.model]`` where given
    (``config.max_epochs`` overrides the epoch budget)."""
    from identrep.models import vae

    params = {**settings, **(per_model or {}).get(config.model, {})}
    if config.max_epochs is not None:
        params["max_epochs"] = config.max_epochs
    cls = getattr(vae, BASELINE_CLASSES[config.model])
    return cls(n_latents=config.n_latents, random_state=model_seed, **params)


def baseline_fit(settings: dict, per_model: dict | None = None):
    """The fit-and-score of the baselines on synthetic data with ``settings``
    (updated by ``per_model[model name]``, e.g. the multi-task variants' own
    training settings): the conditioning is the target (and the task for the
    multi-task versions); the latents are the encoder means given the same
    conditioning, scored like MTLCM's."""

    def fit(config, data, model_seed: int, artifacts=None) -> dict:
        model = baseline_estimator(config, model_seed, settings, per_model)
        t0 = time.perf_counter()
        model.fit(data.X, data.y, task_ids=data.task_ids)
        fit_seconds = time.perf_counter() - t0
        Z_hat = model.transform(data.X, data.y, task_ids=data.task_ids)
        metrics = score_latents(data, Z_hat, None)
        history = model.history_
        metrics.update(
            epochs=len(history["train_loss"]),
            best_epoch=history["best_epoch"],
            fit_seconds=fit_seconds,
        )
        return metrics

    return fit
