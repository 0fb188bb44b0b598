"""A researcher's own table -> identified latents and per-task causal maps.

``identrep fit`` and ``identrep transform`` (and :func:`fit` / :func:`transform` from
Python) read a CSV or Parquet file, fit the two-stage method (MTRN then MTLCM,
:class:`~identrep.TaskIdentifiable`) or MTLCM alone, and write
plain files.

Modules: :mod:`~identrep.tabular.read` (read and check the table),
:mod:`~identrep.tabular.fitting` (fit, transform, write the outputs) and
:mod:`~identrep.tabular.report` (the md/html report and the heat-map).

Layouts
-------
wide
    One row per input (sample), one column per task target: ``--target T1 T2 ...``.
    An empty cell (NaN) means the task was not measured on that row. Rows with no
    target at all still get latents.
long
    One row per (input, task) observation: ``--target VALUE --task-col TASK``. The
    same input may appear on several rows (one per task it was measured for).

Inputs are the ``--features`` columns, or by default every remaining numeric column
(everything except the targets, the task column and ``--id-col``). Text columns
are ignored with a note; a mostly numeric column with a stray text value is an
error that names the column and row.

Output folder (every file written atomically)
---------------------------------------------
``latents.csv``
    Columns ``z0 .. z{K-1}``, preceded by the ``--id-col`` column when given.
    Wide layout: one row per input row, in file order. Long layout: one row per
    *distinct input*, in order of first appearance; inputs are identified by the
    ``--id-col`` value when given (rows sharing an id must have equal features),
    otherwise by their exact feature values, and a ``row`` column gives the
    row index (0-based data row, as in ``pandas.read_csv(...).iloc[row]``) where
    each input first appears. Error messages use the same row index and, for
    CSV, the line number in the file.
``causal_map.csv``
    One row per task: ``task`` and, for every latent ``zj``, the causal indicator
    c_tj in [0, 1] (the probability-like weight that latent j causes the task's
    target; spurious latents, effects of the target, are near 0).
``causal_map.png``
    Heat-map of the causal map (matplotlib, a core dependency).
``model/``
    The fitted model (:func:`identrep.persistence.save_model`), with the column
    names and layout it was fitted on; reuse it with ``identrep transform``.
``report.md``, ``report.html``
    Data summary, settings, fit time, log-likelihood, the heat-map, and the
    agreement (MCC) of the latents across seeds when ``--seeds N`` > 1.

Examples
--------
Wide layout, three tasks, two-stage fit, three seeds::

    identrep fit data.csv --target y0 y1 y2 --n-latents 4 --seeds 3 --out fit1
    identrep transform fit1/model new_data.csv --out new_latents.csv

Long layout on given features, MTLCM only::

    identrep fit obs.parquet --target value --task-col assay --stage2-only --out fit2

From Python::

    from identrep.tabular import fit, transform
    res = fit("data.csv", target=["y0", "y1", "y2"], n_latents=4, out="fit1")
"""

from identrep.tabular.fitting import FitResult, fit, transform
from identrep.tabular.read import TableData, load_table, read_table

__all__ = [
    "FitResult",
    "TableData",
    "fit",
    "load_table",
    "read_table",
    "transform",
]
