"""Experiment harness: the study registry, run(config), sweeps, records, reports.

``TABLES`` and ``get_table`` are the registry's older names (kept as aliases).
"""

from identrep.experiments.configs import RunConfig
from identrep.experiments.io import load_records, write_record
from identrep.experiments.registry import (
    STUDIES,
    Study,
    get_study,
    published_results,
    register_study,
)
from identrep.experiments.report import records_to_frame, summarise, write_report
from identrep.experiments.runner import run
from identrep.experiments.sweep import run_sweep

TABLES = STUDIES
get_table = get_study

__all__ = [
    "STUDIES",
    "TABLES",
    "RunConfig",
    "Study",
    "get_study",
    "get_table",
    "load_records",
    "published_results",
    "records_to_frame",
    "register_study",
    "run",
    "run_sweep",
    "summarise",
    "write_record",
    "write_report",
]
