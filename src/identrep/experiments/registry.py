"""The study registry: every paper study declares, in one module of
``identrep.experiments.studies``, its grid of frozen run configurations, its data,
its fit-and-score per model, its published numbers, its command-line options and
its report. The runner, the sweep, the report, the plots and the CLI read the
entry and have no per-study branches.

Adding a study is adding one module to ``identrep/experiments/studies/`` (and, if
the paper has a table, its CSV to ``identrep/experiments/published/``) that calls
:func:`register_study`; modules are discovered on first use of the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "STUDIES",
    "Option",
    "PlotSpec",
    "ReportSpec",
    "Study",
    "get_study",
    "published_results",
    "register_study",
]

#: ``fit(config, data, model_seed, artifacts) -> metrics``; ``artifacts`` is the
#: folder for stored representations (``out/latents`` in a sweep) or None.
FitFn = Callable[[Any, Any, int, Any], dict]


@dataclass(frozen=True)
class Option:
    """A study's own command-line option of ``identrep reproduce`` and the grid
    keyword it sets.

    Attributes
    ----------
    flag : str
        ``"--latent-dims"``; studies that share a flag share one definition.
    param : str
        Keyword of the study's grid that receives the value.
    default : object
        Value when the flag is absent (given to the grid after ``convert``).
    help, metavar : str
    type : callable, optional
        argparse ``type``.
    choices : sequence, optional
        argparse ``choices``.
    convert : callable, optional
        Applied to the parsed value before the grid sees it; raises ValueError
        with a message naming the flag.
    """

    flag: str
    param: str
    default: Any = None
    help: str = ""
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    choices: Sequence[Any] | None = None
    convert: Callable[[Any], Any] | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def value(self, raw: Any) -> Any:
        return raw if self.convert is None else self.convert(raw)


@dataclass(frozen=True)
class PlotSpec:
    """One family of figures: metrics (x100, mean with std over seeds) against
    each varied key field, one panel per value of the other key field.

    Attributes
    ----------
    metrics : tuple of str
        Metric columns drawn, one line per model and metric; empty: the report's
        main metric (and the paper's numbers, dashed).
    by : tuple of str
        Configuration fields with one figure per value (``("mixing",)``).
    ylabel : str, optional
        Default: the label of the single metric, else "MCC".
    """

    metrics: tuple[str, ...] = ()
    by: tuple[str, ...] = ()
    ylabel: str | None = None


@dataclass(frozen=True)
class ReportSpec:
    """How a study's runs become ``results.csv``, ``report.md/.tex`` and plots.

    Attributes
    ----------
    columns : tuple of str
        Configuration fields of ``results.csv`` (in order, before the seeds and
        the metrics).
    sort : tuple of str
        Rows of ``results.csv`` are sorted by table, model, these, then seed.
    group : tuple of str
        Runs of the same table, model and these fields are seeds of one row.
    keys : tuple of str
        Fields identifying a row of the published table (shown in the report).
    metrics : tuple of (column, label, scale)
        Metric columns shown in the report.
    compare : tuple of (column, published model, label)
        Our metric column beside the published row of that model (None: the
        row's own model).
    main : str, optional
        Main metric (side-by-side table, bold in LaTeX, plots); default the
        last compared column, else the first metric.
    sections : tuple of str
        Fields that split the report into sections (one table each).
    published_when : tuple of (field, value)
        The published numbers hold for sections with these values only.
    heading : callable, optional
        ``heading(section) -> str`` appended to the title (``section``: dict of
        the section fields).
    intro : str or callable
        Paragraph under the heading; a callable gets the section's summary rows.
    footnote : str
        Paragraph at the end of the report (once per distinct footnote).
    plots : tuple of PlotSpec
    cross_seed : bool
        Real data: score agreement between the seeds' stored representations
        (``cross_seed_mcc`` and ``cross_seed_weak_mcc`` columns).
    lower_is_better : tuple of str
        Metrics where the smallest value is best (a held-out NLL): the LaTeX
        table sets the row with the smallest main metric in bold.

    The published CSV holds numbers in each compared metric's display scale (its
    ``scale`` in ``metrics``: x100 for MCC, 1 for an NLL); with a ``metric``
    column, a row is the published value of that metric (columns ``mean``,
    ``std``, or ``mcc_mean``, ``mcc_std``).
    """

    columns: tuple[str, ...]
    sort: tuple[str, ...]
    group: tuple[str, ...]
    keys: tuple[str, ...]
    metrics: tuple[tuple[str, str, float], ...]
    compare: tuple[tuple[str, str | None, str], ...] = ()
    main: str | None = None
    sections: tuple[str, ...] = ()
    published_when: tuple[tuple[str, Any], ...] = ()
    heading: Callable[[dict], str] | None = None
    intro: str | Callable[[Any], str] = ""
    footnote: str = ""
    plots: tuple[PlotSpec, ...] = (PlotSpec(),)
    cross_seed: bool = False
    lower_is_better: tuple[str, ...] = ()

    def scale(self, metric: str) -> float:
        """Display scale of a metric (100 unless ``metrics`` says otherwise)."""
        return next((sc for m, _, sc in self.metrics if m == metric), 100)

    @property
    def main_metric(self) -> str:
        if self.main is not None:
            return self.main
        return self.compare[-1][0] if self.compare else self.metrics[0][0]


@dataclass(frozen=True)
class Study:
    """A reproducible paper study (a table or a figure).

    Attributes
    ----------
    name : str
        Registry id, also ``config.table`` of its runs and the CLI argument.
    title : str
    make_grid : callable
        ``make_grid(seeds, quick, models, **options) -> list of configs`` (frozen
        dataclasses derived from :class:`~identrep.experiments.configs.
        StudyConfig`); ``models`` arrives checked against :attr:`models`.
    make_data : callable
        ``make_data(config) -> (data, data_seed)``.
    fits : mapping of str to callable
        The study's models, in the paper's row order, and the fit-and-score of
        each (see ``FitFn``). This is the one list of the study's model names.
    report : ReportSpec
    published : str, optional
        CSV in ``identrep/experiments/published`` with the paper's numbers (x100,
        columns ``model``, the key fields, ``mcc_mean``, ``mcc_std``).
    published_note : str
        Without a CSV: what the paper reports instead (shown in the report).
    options : tuple of Option
        The study's own CLI options.
    progress : tuple of (metric, label)
        Metrics shown in the sweep's progress line.
    stores_latents : bool
        Runs store representations in ``artifacts/<run_id>.npz``; a record
        without them is not finished (the sweep runs it again).
    comparable : tuple of str
        Configuration fields that every run of the study in one output folder
        must share (seeds are compared with each other).
    """

    name: str
    title: str
    make_grid: Callable[..., list]
    make_data: Callable[[Any], tuple[Any, int]]
    fits: Mapping[str, FitFn]
    report: ReportSpec
    published: str | None = None
    published_note: str = ""
    options: tuple[Option, ...] = ()
    progress: tuple[tuple[str, str], ...] = ()
    stores_latents: bool = False
    comparable: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.fits)

    def check_models(self, models) -> tuple[str, ...]:
        models = self.models if models is None else tuple(models)
        unknown = [m for m in models if m not in self.models]
        if unknown or not models:
            raise ValueError(
                f"models must be a non-empty subset of {self.models}; got {models}."
            )
        return models

    def grid(
        self, seeds: int | None = None, quick: bool = False, models=None, **options
    ) -> list:
        """The run configurations (``quick``: the study's cheap variant;
        ``seeds=None``: the study's own number, e.g. 10 for the Moran et al.
        synthetic process, 5 for the tables)."""
        if seeds is not None:
            options["seeds"] = seeds
        return self.make_grid(quick=quick, models=self.check_models(models), **options)

    def fit(self, config, data, model_seed: int, artifacts=None) -> dict:
        return self.fits[config.model](config, data, model_seed, artifacts)


class _Registry(Mapping):
    """Study id -> :class:`Study`; the study modules are imported on first use."""

    def __init__(self):
        self._studies: dict[str, Study] = {}
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        from identrep.experiments import studies

        for mod in sorted(pkgutil.iter_modules(studies.__path__), key=lambda m: m[1]):
            if not mod.name.startswith("_"):
                importlib.import_module(f"{studies.__name__}.{mod.name}")

    def add(self, study: Study) -> Study:
        if study.name in self._studies:
            raise ValueError(f"A study named {study.name!r} is already registered.")
        self._studies[study.name] = study
        return study

    def __getitem__(self, name: str) -> Study:
        self._load()
        return self._studies[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._studies)

    def __len__(self) -> int:
        self._load()
        return len(self._studies)


#: Every registered study by name (loaded lazily).
STUDIES = _Registry()


def register_study(study: Study) -> Study:
    """Add a study to :data:`STUDIES` (called once by its module)."""
    return STUDIES.add(study)


def get_study(name: str) -> Study:
    """Look up a registered study; unknown names list the known ones."""
    try:
        return STUDIES[name]
    except KeyError:
        raise ValueError(
            f"Unknown study {name!r}; known studies: {', '.join(sorted(STUDIES))}."
        ) from None


def published_results(name: str):
    """The paper's numbers for a study (x100 MCC, mean and std over seeds), as a
    pandas DataFrame; None when the paper has no table for it."""
    from importlib import resources

    import pandas as pd

    study = get_study(name)
    if study.published is None:
        return None
    ref = resources.files("identrep.experiments") / "published" / study.published
    with ref.open("r", encoding="utf-8") as f:
        return pd.read_csv(f, comment="#")
