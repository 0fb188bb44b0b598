"""Registry of paper tables: each maps to a grid of frozen run configurations."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import pandas as pd

from identrep.experiments.configs import RunConfig

__all__ = ["TABLES", "Table", "get_table", "published_results"]


@dataclass(frozen=True)
class Table:
    """A reproducible paper table.

    Attributes
    ----------
    name : str
    title : str
    grid : callable
        ``grid(seeds, quick, mixing) -> list[RunConfig]``.
    published : str
        CSV file (shipped in ``identrep/experiments/published``) with the paper's
        numbers.
    keys : tuple of str
        Configuration fields that identify a row of the published table.
    headline : str
        Metric column compared with the published ``mcc_mean``.
    published_mixing : str
        The mixing the published numbers were obtained with.
    """

    name: str
    title: str
    grid: Callable[..., list[RunConfig]]
    published: str
    keys: tuple[str, ...]
    headline: str
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


def _table1_grid(
    seeds: int = 5,
    quick: bool = False,
    mixing: str = "random",
    models: tuple[str, ...] = ("MTLCM",),
    mixing_source: str = "reference",
) -> list[RunConfig]:
    """Chen et al. Table 1: 9 (k, d) configurations, 200 tasks x 100 samples.

    ``quick`` keeps every configuration but one seed (unless ``seeds`` is smaller).
    """
    n_seeds = min(seeds, 1) if quick else seeds
    base = RunConfig(table="table1", mixing=mixing, mixing_source=mixing_source)
    out = []
    for model, (k, d), s in itertools.product(models, TABLE1_DIMS, range(n_seeds)):
        out.append(
            dataclasses.replace(
                base, model=model, n_causal=k, n_latents=d, n_observed=d, seed=s
            )
        )
    return out


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
        headline="mcc_task_spearman",
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
