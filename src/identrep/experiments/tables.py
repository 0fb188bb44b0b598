"""Registry of paper tables: each maps to a grid of frozen run configurations."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import pandas as pd

from identrep.experiments.configs import MODELS, RunConfig

__all__ = ["TABLES", "Table", "get_table", "published_results"]


@dataclass(frozen=True)
class Table:
    """A reproducible paper table.

    Attributes
    ----------
    name : str
    title : str
    grid : callable
        ``grid(seeds, quick, mixing, mixing_source, models) -> list[RunConfig]``.
    published : str
        CSV file (shipped in ``identrep/experiments/published``) with the paper's
        numbers (x100, columns ``model``, the key fields, ``mcc_mean``, ``mcc_std``).
    keys : tuple of str
        Configuration fields that identify a row of the published table.
    metrics : tuple of (column, label, scale)
        Metric columns shown in the report.
    compare : tuple of (column, published model, label)
        Our metric column compared with the published row of that model (None:
        the row's own model, e.g. iVAE against the paper's iVAE).
    published_mixing : str
        The mixing the published numbers were obtained with.
    """

    name: str
    title: str
    grid: Callable[..., list[RunConfig]]
    published: str
    keys: tuple[str, ...]
    metrics: tuple[tuple[str, str, float], ...]
    compare: tuple[tuple[str, str | None, str], ...]
    published_mixing: str = "random"


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
TABLE2_DIMS = tuple(itertools.product((4, 8, 12), (50, 100, 200)))  # (k, p)


def _check_models(models) -> tuple[str, ...]:
    models = tuple(models)
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise ValueError(
            f"models must be a non-empty subset of {MODELS}; got {models}."
        )
    return models


def _table1_grid(
    seeds: int = 5,
    quick: bool = False,
    mixing: str = "random",
    mixing_source: str = "reference",
    models=MODELS,
) -> list[RunConfig]:
    """Chen et al. Table 1: 9 (k, d) configurations, 200 tasks x 100 samples,
    for each model (MTLCM and the four baselines by default).

    ``quick`` keeps every configuration but one seed.
    """
    n_seeds = min(seeds, 1) if quick else seeds
    base = RunConfig(table="table1", mixing=mixing, mixing_source=mixing_source)
    return [
        dataclasses.replace(
            base, model=m, n_causal=k, n_latents=d, n_observed=d, seed=s
        )
        for m, (k, d), s in itertools.product(
            _check_models(models), TABLE1_DIMS, range(n_seeds)
        )
    ]


def _table2_grid(
    seeds: int = 5,
    quick: bool = False,
    mixing: str = "random",
    mixing_source: str = "reference",
    models=MODELS,
) -> list[RunConfig]:
    """Chen et al. Table 2: 20 latents, k in {4, 8, 12}, p in {50, 100, 200},
    500 tasks x 200 samples, random MLP mixing; MTRN then MTLCM ("MTLCM"), and
    the four baselines.

    ``quick`` keeps every configuration with one seed and 200 tasks.
    """
    if mixing != "random":
        raise ValueError("table2 uses a random MLP mixing only; drop --mixing.")
    n_seeds = min(seeds, 1) if quick else seeds
    base = RunConfig(
        table="table2",
        n_latents=20,
        n_tasks=200 if quick else 500,
        n_samples=200,
        mixing="mlp",
    )
    return [
        dataclasses.replace(base, model=m, n_causal=k, n_observed=p, seed=s)
        for m, (k, p), s in itertools.product(
            _check_models(models), TABLE2_DIMS, range(n_seeds)
        )
    ]


TABLE3_LATENTS = (5, 10, 20, 40, 80)


def _table3_grid(
    seeds: int = 5,
    quick: bool = False,
    mixing: str = "random",
    mixing_source: str = "reference",
    models=MODELS,
) -> list[RunConfig]:
    """Chen et al. Table 3: superconductivity (21,263 materials, 86 element
    counts as inputs, 80 derived features as tasks), MTRN + MTLCM with 5, 10, 20,
    40 and 80 latents, and the baselines (trained on a subset of the materials,
    see ``runner.TABLE3_BASELINE_MATERIALS``); agreement across seeds.

    ``quick`` keeps 5 and 10 latents, 2 seeds and 40 MTRN epochs (baselines: 4
    epochs).
    """
    if mixing != "random" or mixing_source != "reference":
        raise ValueError("table3 is real data: drop --mixing and --mixing-source.")
    n_seeds = min(seeds, 2) if quick else seeds
    if n_seeds < 2:
        raise ValueError("table3 compares seeds: use --seeds 2 or more.")
    base = RunConfig(
        table="table3",
        n_causal=0,
        n_observed=86,
        n_tasks=80,
        n_samples=21263,
        mixing="none",
    )
    dims = TABLE3_LATENTS[:2] if quick else TABLE3_LATENTS
    return [
        dataclasses.replace(
            base,
            model=m,
            n_latents=d,
            seed=s,
            max_epochs=(40 if m == "MTLCM" else 4) if quick else None,
        )
        for m, d, s in itertools.product(_check_models(models), dims, range(n_seeds))
    ]


_STRONG = (
    ("mcc_task_spearman", "MCC per task (Spearman)", 100),
    ("mcc_pooled", "MCC pooled (Pearson)", 100),
)
_CAUSAL = (
    ("causal_accuracy", "causal acc.", 100),
    ("causal_exact_set_rate", "exact causal sets", 100),
)

TABLES: dict[str, Table] = {
    "table1": Table(
        name="table1",
        title=(
            "Chen et al. (2024) Table 1: strong MCC on linear synthetic data "
            "(200 tasks x 100 samples)"
        ),
        grid=_table1_grid,
        published="chen2024_table1_linear.csv",
        keys=("n_causal", "n_latents"),
        metrics=(
            *_STRONG,
            *_CAUSAL,
            ("ceiling_mcc_task", "true unmixing, per task", 100),
            ("random_mcc_task", "random unmixing, per task", 100),
            ("fit_seconds", "fit s", 1),
        ),
        compare=(("mcc_task_spearman", None, "paper"),),
    ),
    "table2": Table(
        name="table2",
        title=(
            "Chen et al. (2024) Table 2: MTRN weak MCC and MTRN+MTLCM strong MCC "
            "on non-linear synthetic data (20 latents, MLP mixing)"
        ),
        grid=_table2_grid,
        published="chen2024_table2_nonlinear.csv",
        keys=("n_causal", "n_observed"),
        metrics=(
            ("mtrn_weak_mcc", "MTRN weak MCC", 100),
            ("mtrn_weak_mcc_heldout", "MTRN weak MCC, held-out CCA", 100),
            *_STRONG,
            *_CAUSAL,
            ("mtrn_epochs", "MTRN epochs", 1),
            ("fit_seconds", "fit s", 1),
        ),
        compare=(
            ("mtrn_weak_mcc", "MTRN-weak", "paper MTRN weak"),
            ("mcc_task_spearman", None, "paper"),
        ),
        published_mixing="mlp",
    ),
    "table3": Table(
        name="table3",
        title=(
            "Chen et al. (2024) Table 3: agreement across seeds on the "
            "superconductivity data (21,263 materials, 80 tasks)"
        ),
        grid=_table3_grid,
        published="chen2024_table3_superconductivity.csv",
        keys=("n_latents",),
        metrics=(
            ("cross_seed_weak_mcc", "MTRN weak MCC across seeds", 100),
            ("cross_seed_mcc", "strong MCC across seeds (latents)", 100),
            ("mtrn_r2", "MTRN R²", 100),
            ("mtrn_epochs", "MTRN epochs", 1),
            ("fit_seconds", "fit s", 1),
        ),
        compare=(
            ("cross_seed_weak_mcc", "MTRN-weak", "paper MTRN weak"),
            ("cross_seed_mcc", None, "paper"),
        ),
        published_mixing="none",
    ),
}


def get_table(name: str) -> Table:
    """Look up a registered table; unknown names list the known ones."""
    try:
        return TABLES[name]
    except KeyError:
        raise ValueError(
            f"Unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}."
        ) from None


def published_results(name: str) -> pd.DataFrame:
    """The paper's numbers for a table (x100 MCC, mean and std over seeds)."""
    table = get_table(name)
    ref = resources.files("identrep.experiments") / "published" / table.published
    with ref.open("r", encoding="utf-8") as f:
        return pd.read_csv(f, comment="#")
