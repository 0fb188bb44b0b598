"""Experiment harness: paper-table registry, run(config), sweeps, records, reports."""

from identrep.experiments.configs import RunConfig
from identrep.experiments.io import load_records, write_record
from identrep.experiments.report import records_to_frame, summarise, write_report
from identrep.experiments.runner import run
from identrep.experiments.sweep import run_sweep
from identrep.experiments.tables import TABLES, get_table, published_results

__all__ = [
    "TABLES",
    "RunConfig",
    "get_table",
    "load_records",
    "published_results",
    "records_to_frame",
    "run",
    "run_sweep",
    "summarise",
    "write_record",
    "write_report",
]
