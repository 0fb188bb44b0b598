"""A researcher's own table -> identified latents and per-task causal maps.

``identrep fit`` and ``identrep transform`` (and :func:`fit` / :func:`transform` from
Python) read a CSV or Parquet file, fit the two-stage method (MTRN then MTLCM,
:class:`~identrep.TaskIdentifiable`) or MTLCM alone, and write
plain files.

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
    Heat-map of the causal map (needs matplotlib, ``pip install "identrep[plot]"``).
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
"""

from __future__ import annotations

import base64
import html
import importlib
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from identrep.exceptions import DataError
from identrep.utils.io import atomic_write_bytes, atomic_write_text

__all__ = [
    "FitResult",
    "TableData",
    "add_subcommands",
    "fit",
    "load_table",
    "read_table",
    "transform",
]

_PARQUET = (".parquet", ".pq")
_MIN_PER_TASK = 2


# ------------------------------------------------------------------------ reading
def _log(msg: str, progress: bool = True) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _require_parquet(path: Path) -> None:
    for engine in ("pyarrow", "fastparquet"):
        try:
            importlib.import_module(engine)
            return
        except ImportError:
            continue
    raise ImportError(
        f'Reading {path} (Parquet) needs pyarrow: pip install "identrep[parquet]" '
        "(or save the table as CSV)."
    )


def read_table(path: str | os.PathLike):
    """Read a CSV (``.csv``, ``.csv.gz``, ``.tsv``, anything else as CSV) or a
    Parquet file (``.parquet``, ``.pq``; needs pyarrow) into a DataFrame.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ImportError
        For Parquet without pyarrow (names ``pip install "identrep[parquet]"``).
    DataError
        If the file is empty or has a header but no rows.
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No such data file: {path}.")
    if path.is_dir():
        raise DataError(f"{path} is a folder; expected a CSV or Parquet file.")
    if path.suffix.lower() in _PARQUET:
        _require_parquet(path)
        try:
            df = pd.read_parquet(path)
        except ImportError:
            raise
        except Exception as exc:
            raise DataError(f"{path} could not be read as Parquet: {exc}") from exc
    else:
        sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
        try:
            df = pd.read_csv(path, sep=sep)
        except pd.errors.EmptyDataError:
            raise DataError(
                f"{path} is empty: expected a header line of column names and one "
                "line per row."
            ) from None
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise DataError(f"{path} could not be parsed as CSV: {exc}") from exc
    if df.shape[1] == 0:
        raise DataError(f"{path} has no columns.")
    if df.shape[0] == 0:
        raise DataError(
            f"{path} has a header ({', '.join(map(str, df.columns[:8]))}"
            f"{', ...' if df.shape[1] > 8 else ''}) but no data rows."
        )
    df.columns = [str(c) for c in df.columns]
    return df


def _plain(v):
    """A numpy scalar as the plain Python value users wrote."""
    return v.item() if isinstance(v, np.generic) else v


def _where(path: Path, i: int) -> str:
    """Human position of the 0-based data row ``i`` (``df.iloc[i]``)."""
    if path.suffix.lower() in _PARQUET:
        return f"row index {i}"
    return f"line {i + 2} of the file (row index {i})"


def _numeric_column(df, col: str, path: Path, role: str) -> np.ndarray:
    """Column as float64; a value that is not a number is an error naming it."""
    import pandas as pd

    s = df[col]
    if pd.api.types.is_bool_dtype(s) or pd.api.types.is_numeric_dtype(s):
        return s.to_numpy(dtype=np.float64, na_value=np.nan)
    num = pd.to_numeric(s, errors="coerce")
    bad = num.isna().to_numpy() & s.notna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{path}: {role} column {col!r} has a non-numeric value {s.iloc[i]!r} at "
            f"{_where(path, i)} ({int(bad.sum())} such value(s) in the column). "
            f"{role.capitalize()} columns must hold numbers"
            + (
                "; leave a cell empty for 'not measured'."
                if role == "target"
                else "; fix the value or choose other columns with --features."
            )
        )
    return num.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_columns(df, cols: list[str], path: Path, option: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        shown = ", ".join(map(repr, list(df.columns)[:20]))
        more = f", ... ({df.shape[1]} in all)" if df.shape[1] > 20 else ""
        raise DataError(
            f"{path}: {option} column(s) {', '.join(map(repr, missing))} not found; "
            f"the file has columns {shown}{more}."
        )


def _task_labels(s, path: Path, col: str) -> np.ndarray:
    import pandas as pd

    if s.isna().any():
        i = int(np.flatnonzero(s.isna().to_numpy())[0])
        raise DataError(
            f"{path}: task column {col!r} is empty at {_where(path, i)} "
            f"({int(s.isna().sum())} row(s) in all); every row needs a task."
        )
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        v = s.to_numpy()
        if np.all(np.isfinite(v)) and np.all(v == np.round(v)):
            return v.astype(np.int64)
    return np.asarray(s.astype(str).to_numpy(), dtype=object)


@dataclass(frozen=True)
class TableData:
    """A validated table, ready for fitting.

    Attributes
    ----------
    path : Path
    layout : {"wide", "long"}
    features, targets : list of str
        Input and target column names.
    task_col, id_col : str or None
    X : ndarray of shape (n_rows, n_features)
        Inputs of every data row.
    Y : DataFrame of shape (n_rows, n_tasks) or None
        Wide layout: targets, NaN = unobserved; column names are the task labels.
    y, task_ids, obs_rows : ndarray of shape (n_obs,) or None
        Long layout: observed targets, their task labels and data rows (rows
        without a target value are left out).
    unit_rows : ndarray of shape (n_units,)
        Data row of every output row of ``latents.csv`` (every row in the wide
        layout; the first row of each distinct input in the long layout).
    ids : ndarray of shape (n_units,) or None
        ``id_col`` values of the output rows.
    ignored : list of str
        Non-numeric columns left out of the default features.
    n_dropped : int
        Long layout: rows left out for lack of a target value.
    """

    path: Path
    layout: str
    features: list[str]
    targets: list[str]
    task_col: str | None
    id_col: str | None
    X: np.ndarray
    Y: Any
    y: np.ndarray | None
    task_ids: np.ndarray | None
    obs_rows: np.ndarray | None
    unit_rows: np.ndarray
    ids: np.ndarray | None
    ignored: list[str] = field(default_factory=list)
    n_dropped: int = 0

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    @property
    def tasks(self) -> np.ndarray:
        if self.layout == "wide":
            return np.asarray(self.targets, dtype=object)
        return np.unique(self.task_ids)

    def task_counts(self) -> np.ndarray:
        """Observed targets per task, in the order of :attr:`tasks`."""
        if self.layout == "wide":
            return self.Y.notna().sum(axis=0).to_numpy()
        return np.unique(self.task_ids, return_counts=True)[1]

    @property
    def n_obs(self) -> int:
        return int(self.task_counts().sum())

    def fit_args(self) -> tuple:
        """``(X, y, task_ids)`` for an estimator's ``fit``."""
        if self.layout == "wide":
            return self.X, self.Y, None
        return self.X[self.obs_rows], self.y, self.task_ids


def _select_features(df, path: Path, exclude: list[str], features, transform=False):
    import pandas as pd

    if features is not None:
        features = list(features)
        _check_columns(df, features, path, "--features" if not transform else "model")
        clash = [c for c in features if c in exclude]
        if clash:
            raise DataError(
                f"{path}: column(s) {clash} are given both as features and as "
                "target/task/id columns; a column can play one role only."
            )
        return features, []
    feats, ignored = [], []
    for c in df.columns:
        if c in exclude:
            continue
        s = df[c]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            feats.append(c)
            continue
        num = pd.to_numeric(s, errors="coerce")
        if num.notna().any():  # mostly numbers with a stray text value: a typo
            _numeric_column(df, c, path, "feature")
        ignored.append(c)
    if not feats:
        raise DataError(
            f"{path}: no numeric input column besides the target/task/id columns "
            f"{exclude}; pass the inputs with --features COL ..."
        )
    return feats, ignored


def _feature_matrix(
    df, features: list[str], path: Path, defaulted: bool = False
) -> np.ndarray:
    X = np.column_stack([_numeric_column(df, c, path, "feature") for c in features])
    bad = ~np.isfinite(X)
    if bad.any():
        j = int(np.flatnonzero(bad.any(axis=0))[0])
        i = int(np.flatnonzero(bad[:, j])[0])
        kind = "missing" if np.isnan(X[i, j]) else "infinite"
        raise DataError(
            f"{path}: feature column {features[j]!r} has {int(bad[:, j].sum())} "
            f"missing or infinite value(s) (first, {kind}, at {_where(path, i)}); "
            f"{int(bad.any(axis=1).sum())} row(s) in all are incomplete. Inputs "
            "must be complete: drop or impute those rows, or leave the column out "
            "with --features."
            + (
                f" ({features[j]!r} was taken as an input because it is numeric and "
                "not a --target/--task-col/--id-col column; if it is a target, "
                "list it with --target.)"
                if defaulted
                else ""
            )
        )
    return X


def _distinct_units(df, X: np.ndarray, id_col: str | None, path: Path):
    """First data row of each distinct input (by id, else by features), in order."""
    import pandas as pd

    if id_col is not None:
        codes, _ = pd.factorize(df[id_col], use_na_sentinel=False)
        first = np.unique(codes, return_index=True)[1]
        differ = np.any(X[first[codes]] != X, axis=1)
        if differ.any():
            i = int(np.flatnonzero(differ)[0])
            i0 = int(first[codes[i]])
            raise DataError(
                f"{path}: rows with the same {id_col!r} value {df[id_col].iloc[i]!r} "
                f"have different features ({_where(path, i0)} and {_where(path, i)}); "
                "in the long layout an id names one input, so its features must "
                "agree on every row."
            )
        return np.sort(first)
    _, first = np.unique(X, axis=0, return_index=True)
    return np.sort(first)


def load_table(
    path: str | os.PathLike,
    *,
    target: str | list[str],
    task_col: str | None = None,
    features: list[str] | None = None,
    id_col: str | None = None,
) -> TableData:
    """Read and validate a table for :func:`fit` (see the module docstring).

    Parameters
    ----------
    path : path-like
        CSV or Parquet file.
    target : str or list of str
        Wide layout: several target columns, one per task. Long layout (with
        ``task_col``): one target column.
    task_col : str, optional
        Column of task labels (long layout).
    features : list of str, optional
        Input columns; default every remaining numeric column.
    id_col : str, optional
        Column carried to ``latents.csv`` (and identifying inputs in the long
        layout).

    Returns
    -------
    TableData

    Raises
    ------
    DataError
        With the file, column and row, for: missing columns, non-numeric values,
        missing/infinite inputs, a single task, a task with fewer than 2
        observations, an empty file.
    """
    path = Path(path)
    targets = [target] if isinstance(target, str) else list(target)
    if not targets:
        raise DataError("Give at least one target column (--target COL ...).")
    if len(set(targets)) != len(targets):
        raise DataError(f"--target lists a column twice: {targets}.")
    df = read_table(path)
    _check_columns(df, targets, path, "--target")
    for opt, col in (("--task-col", task_col), ("--id-col", id_col)):
        if col is not None:
            _check_columns(df, [col], path, opt)
    if task_col is not None and len(targets) != 1:
        raise DataError(
            f"The long layout (--task-col {task_col}) takes one --target column (the "
            f"values of every task); got {len(targets)}: {targets}. For one column "
            "per task (wide layout) leave out --task-col."
        )
    roles = targets + [c for c in (task_col, id_col) if c is not None]
    if len(set(roles)) != len(roles):
        raise DataError(
            f"{path}: the target, task and id columns must differ; got {roles}."
        )
    if task_col is None and len(targets) < 2:
        raise DataError(
            f"{path}: one target column ({targets[0]!r}) and no --task-col gives "
            "a single task; identrep learns from many related tasks. Give one "
            "target column per task (--target COL1 COL2 ...), or a long table "
            "with --target VALUE --task-col TASK."
        )
    defaulted = features is None
    features, ignored = _select_features(df, path, roles, features)
    X = _feature_matrix(df, features, path, defaulted)
    tvals = {c: _numeric_column(df, c, path, "target") for c in targets}
    for c, v in tvals.items():
        if np.isinf(v).any():
            i = int(np.flatnonzero(np.isinf(v))[0])
            raise DataError(
                f"{path}: target column {c!r} has an infinite value at "
                f"{_where(path, i)}; use an empty cell for 'not measured'."
            )
    ids_all = None if id_col is None else df[id_col].to_numpy()

    if task_col is None:
        import pandas as pd

        Y = pd.DataFrame(tvals, columns=targets)
        counts = Y.notna().sum(axis=0)
        few = [c for c in targets if counts[c] < _MIN_PER_TASK]
        if few:
            raise DataError(
                f"{path}: target column {few[0]!r} has {int(counts[few[0]])} "
                f"observed value(s)"
                + (f" ({len(few)} such columns: {few[:5]})" if len(few) > 1 else "")
                + f"; every task needs at least {_MIN_PER_TASK}. Drop such columns "
                "or gather more rows."
            )
        return TableData(
            path=path,
            layout="wide",
            features=features,
            targets=targets,
            task_col=None,
            id_col=id_col,
            X=X,
            Y=Y,
            y=None,
            task_ids=None,
            obs_rows=None,
            unit_rows=np.arange(X.shape[0]),
            ids=ids_all,
            ignored=ignored,
        )

    labels = _task_labels(df[task_col], path, task_col)
    yv = tvals[targets[0]]
    obs = np.flatnonzero(~np.isnan(yv))
    n_dropped = X.shape[0] - obs.size
    levels, counts = np.unique(labels[obs], return_counts=True)
    if levels.size < 2:
        only = (
            f"a single value {_plain(levels[0])!r}"
            if levels.size
            else "no task with a target value"
        )
        raise DataError(
            f"{path}: task column {task_col!r} has {only}; identrep learns from "
            "many related tasks, so the long layout needs at least 2 distinct tasks "
            "(usually many more)."
        )
    few = np.flatnonzero(counts < _MIN_PER_TASK)
    if few.size:
        lab = levels[few[0]]
        raise DataError(
            f"{path}: task {_plain(lab)!r} (column "
            f"{task_col!r}) has {int(counts[few[0]])} row(s) with a target value"
            + (f" ({few.size} such tasks)" if few.size > 1 else "")
            + f"; every task needs at least {_MIN_PER_TASK}. Drop such tasks or "
            "gather more rows."
        )
    unit_rows = _distinct_units(df, X, id_col, path)
    return TableData(
        path=path,
        layout="long",
        features=features,
        targets=targets,
        task_col=task_col,
        id_col=id_col,
        X=X,
        Y=None,
        y=yv[obs],
        task_ids=labels[obs],
        obs_rows=obs,
        unit_rows=unit_rows,
        ids=None if ids_all is None else ids_all[unit_rows],
        ignored=ignored,
        n_dropped=n_dropped,
    )


# ------------------------------------------------------------------------ writing
def _write_csv(path: Path, frame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False))


def _latent_frame(Z: np.ndarray, table_ids, id_col, rows=None):
    import pandas as pd

    cols = {}
    if id_col is not None and table_ids is not None:
        cols[id_col] = table_ids
    elif rows is not None:
        cols["row"] = rows
    for j in range(Z.shape[1]):
        cols[f"z{j}"] = Z[:, j]
    return pd.DataFrame(cols)


def _heatmap_png(C: np.ndarray, tasks, title: str) -> bytes | None:
    """PNG bytes of the causal map, or None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    import io

    T, d = C.shape
    fig = Figure(figsize=(min(2.0 + 0.45 * d, 12.0), min(1.6 + 0.22 * T, 12.0)))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    im = ax.imshow(C, aspect="auto", vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(d), [f"z{j}" for j in range(d)], fontsize=8)
    if T <= 40:
        ax.set_yticks(range(T), [str(t) for t in tasks], fontsize=7)
    ax.set_xlabel("latent")
    ax.set_ylabel(f"task ({T})")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="causal indicator c (1 = cause, 0 = effect)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


# ------------------------------------------------------------------------ fitting
@dataclass
class FitResult:
    """What :func:`fit` produced.

    Attributes
    ----------
    model : TaskIdentifiable or MTLCM
        The model of the first seed (the one saved).
    latents : DataFrame
        Contents of ``latents.csv``.
    causal_map : DataFrame
        Contents of ``causal_map.csv``.
    cross_seed : dict or None
        :func:`identrep.metrics.cross_seed_mcc` of the latents across seeds.
    seconds : list of float
        Fit time of each seed.
    out : Path
    files : dict
        Name -> path of every written output.
    """

    model: Any
    latents: Any
    causal_map: Any
    cross_seed: dict | None
    seconds: list[float]
    out: Path
    files: dict[str, Path]


def _make_model(stage2_only, n_latents, seed, max_epochs, verbose):
    from identrep.models import MTLCM, TaskIdentifiable

    if stage2_only:
        return MTLCM(n_latents=n_latents, random_state=seed)
    return TaskIdentifiable(
        n_latents=n_latents,
        mtrn_params={"max_epochs": int(max_epochs), "verbose": verbose},
        random_state=seed,
    )


def _check_positive(name: str, v, allow_none=False) -> None:
    if v is None and allow_none:
        return
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}.")


def fit(
    data: str | os.PathLike,
    *,
    target: str | list[str],
    out: str | os.PathLike,
    task_col: str | None = None,
    features: list[str] | None = None,
    id_col: str | None = None,
    n_latents: int | None = None,
    stage2_only: bool = False,
    seed: int = 0,
    seeds: int = 1,
    max_epochs: int = 200,
    progress: bool = True,
    command: str | None = None,
) -> FitResult:
    """Fit identrep on a table and write latents, causal map, model and report.

    Parameters
    ----------
    data : path-like
        CSV or Parquet file (see the module docstring for the layouts).
    target, task_col, features, id_col
        Columns, as in :func:`load_table`.
    out : path-like
        Output folder (created; existing outputs are replaced).
    n_latents : int, optional
        Latent dimension K. Default: the number of features with
        ``stage2_only``, else ``min(10, n_tasks)``.
    stage2_only : bool, default=False
        Fit MTLCM directly on the features (a linear mixing of the latents)
        instead of MTRN then MTLCM.
    seed : int, default=0
        Seed of the saved model; extra seeds are ``seed + 1, ...``.
    seeds : int, default=1
        Number of seeds; with 2 or more the report gives the cross-seed MCC of the
        latents (Pearson, Hungarian-matched, every pair), the stability measure
        of the paper's Table 3 for data without ground truth.
    max_epochs : int, default=200
        MTRN epochs (early stopping on a 10% validation split may stop sooner).
    progress : bool, default=True
        Progress messages on stderr.
    command : str, optional
        The command line, quoted in the report.

    Returns
    -------
    FitResult

    Raises
    ------
    DataError
        Malformed data (the message names the file, column and row).
    """
    import pandas as pd

    import identrep
    from identrep.metrics import cross_seed_mcc
    from identrep.persistence import save_model

    _check_positive("n_latents", n_latents, allow_none=True)
    _check_positive("seeds", seeds)
    _check_positive("max_epochs", max_epochs)
    out = Path(out)
    _log(f"Reading {data} ...", progress)
    table = load_table(
        data, target=target, task_col=task_col, features=features, id_col=id_col
    )
    n_tasks = len(table.tasks)
    _log(
        f"  {table.layout} layout: {table.n_rows} rows, {len(table.features)} "
        f"features, {n_tasks} tasks, {table.n_obs} observed targets",
        progress,
    )
    notes = []
    if table.ignored:
        notes.append(
            f"Non-numeric column(s) left out of the inputs: {table.ignored[:10]}"
            + (" ..." if len(table.ignored) > 10 else "")
        )
    if table.n_dropped:
        notes.append(
            f"{table.n_dropped} row(s) without a target value were left out of the "
            "fit (they still get latents)."
        )
    if n_latents is None:
        n_latents = len(table.features) if stage2_only else min(10, n_tasks)
        notes.append(f"n_latents not given; using {n_latents}.")
    if n_latents > n_tasks:
        notes.append(
            f"n_latents={n_latents} exceeds the number of tasks ({n_tasks}): the "
            "identifiability results need at least n_latents tasks with linearly "
            "independent weights, so some latents may not be identified."
        )
    if stage2_only and seeds > 1:
        notes.append(
            "MTLCM's default start (joint diagonalisation from the identity) does "
            "not depend on the seed, so seeds usually agree exactly with "
            "--stage2-only."
        )
    for n in notes:
        _log(f"  note: {n}", progress)

    X, y, t = table.fit_args()
    X_units = table.X[table.unit_rows]
    what = "MTLCM" if stage2_only else "MTRN + MTLCM"
    models, seconds, latents, caught = [], [], [], []
    verbose = bool(progress) and sys.stderr.isatty()
    for s in range(seeds):
        _log(f"Fitting {what}, seed {seed + s} ({s + 1}/{seeds}) ...", progress)
        model = _make_model(stage2_only, n_latents, seed + s, max_epochs, verbose)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                model.fit(X, y, task_ids=t)
            except DataError as exc:
                raise DataError(f"{table.path}: {exc}") from exc
        seconds.append(time.perf_counter() - t0)
        for item in w:
            msg = f"seed {seed + s}: {item.category.__name__}: {item.message}"
            caught.append(msg)
            _log(f"  warning: {msg}", progress)
        _log(f"  done in {seconds[-1]:.1f} s", progress)
        models.append(model)
        latents.append(model.transform(X_units))
    model = models[0]
    model.feature_names_in_ = np.asarray(table.features, dtype=object)
    K = latents[0].shape[1]
    cross = cross_seed_mcc(latents, "pearson") if seeds > 1 else None
    if cross is not None:
        _log(
            f"  cross-seed MCC of the latents: {cross['mean']:.4f} +/- "
            f"{cross['std']:.4f} over {len(cross['pairs'])} pair(s)",
            progress,
        )

    lat = _latent_frame(
        latents[0],
        table.ids,
        table.id_col,
        rows=table.unit_rows if table.layout == "long" else None,
    )
    zcols = [f"z{j}" for j in range(K)]
    cmap = pd.DataFrame(model.causal_indicators_, columns=zcols)
    cmap.insert(0, "task", list(model.tasks_))

    _log(f"Writing outputs to {out} ...", progress)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "latents.csv": _write_csv(out / "latents.csv", lat),
        "causal_map.csv": _write_csv(out / "causal_map.csv", cmap),
    }
    png = _heatmap_png(
        model.causal_indicators_,
        list(model.tasks_),
        f"Causal map ({what}, K={K}, seed {seed})",
    )
    if png is not None:
        files["causal_map.png"] = atomic_write_bytes(out / "causal_map.png", png)
    metadata = {
        "layout": table.layout,
        "features": table.features,
        "targets": table.targets,
        "task_col": table.task_col,
        "id_col": table.id_col,
        "data_file": str(table.path),
        "n_latents": int(K),
        "stage2_only": bool(stage2_only),
        "seed": int(seed),
        "max_epochs": None if stage2_only else int(max_epochs),
    }
    files["model"] = save_model(model, out / "model", metadata=metadata)
    info = {
        "table": table,
        "what": what,
        "K": K,
        "seed": seed,
        "seeds": seeds,
        "max_epochs": max_epochs,
        "stage2_only": stage2_only,
        "models": models,
        "seconds": seconds,
        "cross": cross,
        "notes": notes,
        "warnings": caught,
        "png": png,
        "command": command,
        "version": identrep.__version__,
    }
    md, page = _report(info)
    files["report.md"] = atomic_write_text(out / "report.md", md)
    files["report.html"] = atomic_write_text(out / "report.html", page)
    _log(
        "Wrote " + ", ".join(str(p.name) for p in files.values()) + f" in {out}.",
        progress,
    )
    return FitResult(model, lat, cmap, cross, seconds, out, files)


# ------------------------------------------------------------------------- report
def _fit_rows(info) -> list[tuple[str, str]]:
    rows = []
    secs = info["seconds"]
    rows.append(
        (
            "fit time",
            f"{secs[0]:.1f} s"
            + (
                f" (seed {info['seed']}); all {len(secs)} seeds {sum(secs):.1f} s"
                if len(secs) > 1
                else ""
            ),
        )
    )
    m = info["models"][0]
    if info["stage2_only"]:
        lcm = m
    else:
        lcm = m.mtlcm_
        h = m.mtrn_.history_
        rows.append(
            (
                "stage 1 (MTRN)",
                f"{h['n_epochs']} epochs (best {h['best_epoch'] + 1}"
                + (", stopped early" if h.get("stopped_early") else "")
                + f"), {m.mtrn_.fit_seconds_:.1f} s, in-sample R^2 averaged over "
                f"tasks {_r2(m.mtrn_, info['table']):.3f}",
            )
        )
    where = "standardised stage-1 features" if not info["stage2_only"] else "inputs"
    rows.append(
        (
            "stage 2 (MTLCM)",
            f"mean log-likelihood per observation {lcm.log_likelihood_:.4f} (on the "
            f"{where}), {lcm.n_iter_} L-BFGS iterations, converged={lcm.converged_}, "
            f"{lcm.fit_seconds_:.2f} s",
        )
    )
    if len(info["models"]) > 1:
        lls = [
            (mm if info["stage2_only"] else mm.mtlcm_).log_likelihood_
            for mm in info["models"]
        ]
        rows.append(("log-likelihood per seed", ", ".join(f"{v:.4f}" for v in lls)))
    return rows


def _r2(mtrn, table: TableData) -> float:
    """Stage-1 R^2 per task on the fitted data (about each task's mean), averaged."""
    P = mtrn.predict(table.X)  # (n_rows, n_tasks), columns in mtrn.tasks_ order
    if table.layout == "wide":
        Y = table.Y[list(mtrn.tasks_)].to_numpy()
        obs = ~np.isnan(Y)
        rows, cols = np.nonzero(obs)
        y, pred = Y[rows, cols], P[rows, cols]
    else:
        cols = np.searchsorted(np.asarray(mtrn.tasks_), table.task_ids)
        y, pred = table.y, P[table.obs_rows, cols]
    T = P.shape[1]
    n = np.bincount(cols, minlength=T)
    mean = np.bincount(cols, y, T) / np.maximum(n, 1)
    ss_tot = np.bincount(cols, (y - mean[cols]) ** 2, T)
    ss_res = np.bincount(cols, (y - pred) ** 2, T)
    ok = ss_tot > 0
    return float(np.mean(1.0 - ss_res[ok] / ss_tot[ok]))


def _report(info) -> tuple[str, str]:
    """Markdown and HTML text of the report."""
    import torch

    table: TableData = info["table"]
    m = info["models"][0]
    counts = table.task_counts()
    feats = table.features
    fshow = ", ".join(feats[:12])
    if len(feats) > 12:
        fshow += f", ... ({len(feats)} in all)"
    data_rows = [
        ("file", str(table.path)),
        (
            "layout",
            f"{table.layout} ("
            + (
                f"target columns {', '.join(table.targets[:8])}"
                + (" ..." if len(table.targets) > 8 else "")
                if table.layout == "wide"
                else f"target {table.targets[0]!r}, task column {table.task_col!r}"
            )
            + ")",
        ),
        ("rows", f"{table.n_rows}"),
        ("distinct inputs (rows of latents.csv)", f"{len(table.unit_rows)}"),
        ("features", f"{len(feats)}: {fshow}"),
        ("tasks", f"{len(counts)}"),
        (
            "observed targets",
            f"{int(counts.sum())} (per task: min {int(counts.min())}, median "
            f"{float(np.median(counts)):g}, max {int(counts.max())})",
        ),
    ]
    if table.id_col:
        data_rows.append(("id column", table.id_col))
    settings = [
        (
            "model",
            "MTLCM on the inputs (--stage2-only)"
            if info["stage2_only"]
            else "TaskIdentifiable: MTRN (stage 1) then MTLCM (stage 2)",
        ),
        ("n_latents", str(info["K"])),
        (
            "seeds",
            f"{info['seed']}"
            if info["seeds"] == 1
            else f"{info['seed']}..{info['seed'] + info['seeds'] - 1} (the model "
            f"of seed {info['seed']} is saved)",
        ),
    ]
    if not info["stage2_only"]:
        settings.append(("max_epochs", str(info["max_epochs"])))
    settings.append(
        ("versions", f"identrep {info['version']}, torch {torch.__version__}")
    )
    if info["command"]:
        settings.append(("command", info["command"]))
    fit_rows = _fit_rows(info)

    C = m.causal_indicators_
    K = C.shape[1]
    n_show = min(len(C), 20)
    sets = []
    for lab, row in zip(list(m.tasks_)[:n_show], C[:n_show], strict=True):
        causes = [f"z{j}" for j in np.flatnonzero(row > 0.5)]
        sets.append((str(lab), ", ".join(causes) if causes else "(none)"))
    usage = (C > 0.5).sum(axis=0)
    usage_text = ", ".join(f"z{j}: {int(usage[j])}" for j in range(K))

    cross = info["cross"]
    md: list[str] = ["# identrep fit report", ""]
    h: list[str] = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        "<title>identrep fit report</title><style>body{font-family:sans-serif;"
        "max-width:60em;margin:2em auto;padding:0 1em}td,th{padding:2px 8px;"
        "text-align:left;vertical-align:top}table{border-collapse:collapse}"
        "tr:nth-child(even){background:#f3f3f3}</style></head><body>",
        "<h1>identrep fit report</h1>",
    ]

    def section(title, rows, header=("", "")):
        md.extend([f"## {title}", "", f"| {header[0]} | {header[1]} |", "|---|---|"])
        md.extend(f"| {a} | {b.replace('|', '/')} |" for a, b in rows)
        md.append("")
        h.append(f"<h2>{html.escape(title)}</h2><table>")
        if any(header):
            h.append(
                "<tr>" + "".join(f"<th>{html.escape(x)}</th>" for x in header) + "</tr>"
            )
        h.extend(
            f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>"
            for a, b in rows
        )
        h.append("</table>")

    def para(text):
        md.extend([text, ""])
        h.append(f"<p>{html.escape(text)}</p>")

    section("Data", data_rows)
    section("Settings", settings)
    section("Fit", fit_rows)
    md.extend(["## Causal map", ""])
    h.append("<h2>Causal map</h2>")
    para(
        "Causal indicator c_tj in [0, 1] of every task t and latent z_j: near 1 the "
        "latent causes the task's target, near 0 it is an effect of it (spurious). "
        "All values: causal_map.csv."
    )
    if info["png"] is not None:
        md.extend(["![causal map](causal_map.png)", ""])
        b64 = base64.b64encode(info["png"]).decode("ascii")
        h.append(f"<p><img alt='causal map' src='data:image/png;base64,{b64}'></p>")
    else:
        para(
            "(No heat-map: matplotlib is not installed; pip install "
            '"identrep[plot]" to get causal_map.png.)'
        )
    para(f"Number of tasks each latent causes (c > 0.5): {usage_text}.")
    section(
        "Causal sets (c > 0.5)"
        + (f", first {n_show} of {len(C)} tasks" if len(C) > n_show else ""),
        sets,
        header=("task", "causal latents"),
    )
    if cross is not None:
        worst = min(cross["pairs"], key=lambda p: p[1])
        section(
            "Agreement across seeds",
            [
                (
                    "MCC of the latents (Pearson)",
                    f"{cross['mean']:.4f} +/- {cross['std']:.4f} over "
                    f"{len(cross['pairs'])} pair(s) of seeds (lowest "
                    f"{worst[1]:.4f}, seeds {info['seed'] + worst[0][0]} and "
                    f"{info['seed'] + worst[0][1]})",
                )
            ],
        )
        para(
            "1.0 means every seed recovers the same latents up to permutation and "
            "scale; without ground truth this is the evidence that they are "
            "identified (the paper's Table 3 protocol)."
        )
    if info["notes"] or info["warnings"]:
        md.extend(["## Notes", ""])
        h.append("<h2>Notes</h2><ul>")
        for n in info["notes"] + info["warnings"]:
            md.append(f"- {n}")
            h.append(f"<li>{html.escape(n)}</li>")
        md.append("")
        h.append("</ul>")
    outputs = (
        "latents.csv (latents of every input), causal_map.csv, "
        + ("causal_map.png, " if info["png"] is not None else "")
        + "model/ (identrep transform model/ DATA --out FILE applies it to new data)"
    )
    md.extend(["## Outputs", "", outputs, ""])
    h.append(f"<h2>Outputs</h2><p>{html.escape(outputs)}</p></body></html>")
    return "\n".join(md), "\n".join(h) + "\n"


# ---------------------------------------------------------------------- transform
def transform(
    model_path: str | os.PathLike,
    data_path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    progress: bool = False,
):
    """Apply a saved model to a table and write its latents as CSV.

    The model's input columns (saved by :func:`fit`) are read from the table by
    name. Rows are identified as in :func:`fit`: if the model was fitted on a long
    table and ``data_path`` has its task column, one row per distinct input (by
    the id column when present, else by feature values, with a ``row`` column);
    otherwise one row per data row. The id column is carried over when present.

    Parameters
    ----------
    model_path : path-like
        Folder written by :func:`identrep.persistence.save_model` (``OUT/model``).
    data_path : path-like
        CSV or Parquet file with the model's feature columns.
    out : path-like
        CSV file to write (atomically); an existing folder gets ``latents.csv``.

    Returns
    -------
    DataFrame
        The latents written.
    """
    from identrep.persistence import load_model, read_manifest

    manifest = read_manifest(model_path)
    meta = manifest.get("metadata") or {}
    _log(f"Loading model {model_path} ...", progress)
    model = load_model(model_path)
    data_path = Path(data_path)
    df = read_table(data_path)
    features = meta.get("features") or manifest.get("feature_names")
    if features is not None:
        _check_columns(df, features, data_path, "model feature")
    else:
        features, _ = _select_features(df, data_path, [], None)
        if len(features) != model.n_features_in_:
            raise DataError(
                f"{data_path}: the saved model has no column names and expects "
                f"{model.n_features_in_} inputs; the file has {len(features)} "
                "numeric columns."
            )
    X = _feature_matrix(df, features, data_path)
    id_col = meta.get("id_col")
    id_col = id_col if id_col in df.columns else None
    rows = None
    if meta.get("layout") == "long" and meta.get("task_col") in df.columns:
        rows = _distinct_units(df, X, id_col, data_path)
        X = X[rows]
    ids = None if id_col is None else df[id_col].to_numpy()
    if ids is not None and rows is not None:
        ids = ids[rows]
    Z = model.transform(X)
    frame = _latent_frame(Z, ids, id_col, rows=rows)
    out = Path(out)
    if out.is_dir():
        out = out / "latents.csv"
    _write_csv(out, frame)
    _log(f"Wrote {len(frame)} rows x {Z.shape[1]} latents to {out}.", progress)
    return frame


# --------------------------------------------------------------------------- CLI
_FIT_EPILOG = """\
layouts:
  wide  one row per input, one column per task:   --target Y1 Y2 Y3 ...
        (empty cell = task not measured on that row)
  long  one row per (input, task) observation:     --target VALUE --task-col TASK
inputs: --features COL ..., or by default every other numeric column.

outputs in --out DIR:
  latents.csv     z0..z{K-1} (plus the --id-col column). Wide: one row per input
                  row. Long: one row per distinct input, identified by --id-col or
                  else by its feature values, with a 'row' column giving the
                  0-based row index where it first appears.
  causal_map.csv  one row per task: task, causal indicator (0..1) of each latent
  causal_map.png  heat-map of causal_map.csv (needs matplotlib)
  model/          the fitted model, for `identrep transform MODEL DATA --out FILE`
  report.md, report.html  data summary, settings, fit, causal map, seed agreement

example:
  identrep fit data.csv --target y0 y1 y2 y3 --n-latents 3 --seeds 3 --out fit1
"""


def _cli_error(prog: str, exc: BaseException) -> int:
    print(f"identrep {prog}: error: {exc}", file=sys.stderr)
    return 2


_CLI_ERRORS = (ValueError, TypeError, OSError, ImportError)


def _cmd_fit(args) -> int:
    try:
        res = fit(
            args.data,
            target=args.target,
            out=args.out,
            task_col=args.task_col,
            features=args.features,
            id_col=args.id_col,
            n_latents=args.n_latents,
            stage2_only=args.stage2_only,
            seed=args.seed,
            seeds=args.seeds,
            max_epochs=args.max_epochs,
            progress=not args.quiet,
            command=_fit_command(args),
        )
    except _CLI_ERRORS as exc:
        return _cli_error("fit", exc)
    K = res.latents.filter(regex=r"^z\d+$").shape[1]
    print(f"Fitted {len(res.causal_map)} tasks, {K} latents in {res.seconds[0]:.1f} s.")
    if res.cross_seed is not None:
        print(
            f"Cross-seed MCC of the latents: {res.cross_seed['mean']:.4f} +/- "
            f"{res.cross_seed['std']:.4f} ({len(res.seconds)} seeds)."
        )
    for name, p in res.files.items():
        print(f"  {name:<15} {p}")
    return 0


def _cmd_transform(args) -> int:
    try:
        frame = transform(args.model, args.data, args.out, progress=not args.quiet)
    except _CLI_ERRORS as exc:
        return _cli_error("transform", exc)
    out = Path(args.out)
    out = out / "latents.csv" if out.is_dir() else out
    print(f"Wrote {len(frame)} rows to {out}.")
    return 0


def _fit_command(args) -> str:
    """The canonical command line of parsed ``identrep fit`` arguments."""
    import shlex

    q = shlex.quote
    parts = ["identrep", "fit", q(str(args.data)), "--target", *map(q, args.target)]
    for opt in ("task_col", "id_col"):
        if getattr(args, opt) is not None:
            parts += [f"--{opt.replace('_', '-')}", q(getattr(args, opt))]
    if args.features:
        parts += ["--features", *map(q, args.features)]
    if args.n_latents is not None:
        parts += ["--n-latents", str(args.n_latents)]
    if args.stage2_only:
        parts.append("--stage2-only")
    parts += ["--seed", str(args.seed)]
    if args.seeds != 1:
        parts += ["--seeds", str(args.seeds)]
    if not args.stage2_only:
        parts += ["--max-epochs", str(args.max_epochs)]
    return " ".join([*parts, "--out", q(str(args.out))])


def add_subcommands(subparsers) -> None:
    """Register ``identrep fit`` and ``identrep transform`` on ``subparsers``."""
    import argparse

    f = subparsers.add_parser(
        "fit",
        help="fit identrep on your own CSV/Parquet table",
        usage="identrep fit DATA --target COL [COL ...] [options] --out DIR",
        description="Learn identified latents and per-task causal maps from a\n"
        "table of inputs and many related task targets (MTRN then MTLCM, or\n"
        "MTLCM alone with --stage2-only). Give DATA first: --target takes\n"
        "every name that follows it.",
        epilog=_FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("data", help="CSV or Parquet file (Parquet needs pyarrow)")
    f.add_argument(
        "--target",
        nargs="+",
        required=True,
        metavar="COL",
        help="target column(s): one per task (wide), or one with --task-col (long)",
    )
    f.add_argument("--task-col", metavar="COL", help="task label column (long layout)")
    f.add_argument(
        "--features",
        nargs="+",
        metavar="COL",
        help="input columns (default: every other numeric column)",
    )
    f.add_argument("--id-col", metavar="COL", help="id column carried into latents.csv")
    f.add_argument(
        "--n-latents",
        type=int,
        metavar="K",
        help="latent dimension (default: min(10, n_tasks); n_features with "
        "--stage2-only)",
    )
    f.add_argument(
        "--stage2-only",
        action="store_true",
        help="fit MTLCM directly on the features (linear mixing) instead of "
        "MTRN then MTLCM",
    )
    f.add_argument("--seed", type=int, default=0, help="seed of the saved model")
    f.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="fit N seeds (seed, seed+1, ...) and report the cross-seed MCC",
    )
    f.add_argument(
        "--max-epochs", type=int, default=200, metavar="E", help="MTRN epochs"
    )
    f.add_argument("--out", required=True, metavar="DIR", help="output folder")
    f.add_argument("--quiet", action="store_true", help="no progress on stderr")
    f.set_defaults(func=_cmd_fit)

    t = subparsers.add_parser(
        "transform",
        help="apply a saved model to a table",
        description="Write the latents of a table's rows under a model saved by "
        "`identrep fit` (its OUT/model folder).",
    )
    t.add_argument("model", help="saved model folder (OUT/model of identrep fit)")
    t.add_argument("data", help="CSV or Parquet file with the model's input columns")
    t.add_argument("--out", required=True, metavar="FILE", help="CSV file to write")
    t.add_argument("--quiet", action="store_true", help="no progress on stderr")
    t.set_defaults(func=_cmd_transform)
