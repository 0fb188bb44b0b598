"""Read and check a user's table: CSV or Parquet, wide or long layout.

:func:`read_table` reads the file; :func:`load_table` checks it and returns a
:class:`TableData` ready for fitting; :func:`load_inputs` reads the inputs of a
table for a saved model (``identrep transform``). Every error is a
:class:`DataError` that names the file, the column and the row (see
:mod:`identrep.tabular` for the layouts).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from identrep.exceptions import DataError
from identrep.utils.validation import integral_labels

__all__ = ["TableData", "load_inputs", "load_table", "read_table"]

_PARQUET = (".parquet", ".pq")
_MIN_PER_TASK = 2


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
            return integral_labels(v)  # exact, also beyond int64
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
    index_like : list of str
        Columns that number the rows (distinct integers, strictly monotone) left
        out of the default features: a row number carries no information about
        the inputs; pass it with ``features`` (``--features``) to use it anyway.
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
    index_like: list[str] = field(default_factory=list)

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

    def frame(self, rows: np.ndarray | None = None):
        """The inputs (of ``rows``, default all) as a DataFrame named by
        ``features``, so estimators record and check ``feature_names_in_``."""
        import pandas as pd

        X = self.X if rows is None else self.X[rows]
        return pd.DataFrame(X, columns=list(self.features), copy=False)

    def fit_args(self) -> tuple:
        """``(X, y, task_ids)`` for an estimator's ``fit`` (X named by feature)."""
        if self.layout == "wide":
            return self.frame(), self.Y, None
        return self.frame(self.obs_rows), self.y, self.task_ids


def _is_row_index(s) -> bool:
    """A column that numbers the rows: integer values, one per row, all distinct
    and strictly increasing or decreasing (0, 1, 2, ... or ids in file order)."""
    import pandas as pd

    if len(s) < 3 or pd.api.types.is_bool_dtype(s):
        return False
    v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    if np.isnan(v).any() or not np.array_equal(v, np.round(v)):
        return False
    step = np.diff(v)
    return bool((step > 0).all() or (step < 0).all())


def _select_features(df, path: Path, exclude: list[str], features, transform=False):
    """``(features, non-numeric columns left out, row-index columns left out)``."""
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
        return features, [], []
    feats, ignored, index_like = [], [], []
    for c in df.columns:
        if c in exclude:
            continue
        s = df[c]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            (index_like if _is_row_index(s) else feats).append(c)
            continue
        num = pd.to_numeric(s, errors="coerce")
        if num.notna().any():  # mostly numbers with a stray text value: a typo
            _numeric_column(df, c, path, "feature")
        ignored.append(c)
    if not feats:
        raise DataError(
            f"{path}: no numeric input column besides the target/task/id columns "
            f"{exclude}"
            + (f" and the row-index column(s) {index_like}" if index_like else "")
            + "; pass the inputs with --features COL ..."
        )
    return feats, ignored, index_like


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
    """Read and validate a table for :func:`~identrep.tabular.fit`.

    The layouts are described in :mod:`identrep.tabular`.

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
    features, ignored, index_like = _select_features(df, path, roles, features)
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
            index_like=index_like,
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
        index_like=index_like,
    )


def load_inputs(
    path: str | os.PathLike,
    *,
    features: list[str] | None,
    n_features_in: int,
    layout: str | None = None,
    task_col: str | None = None,
    id_col: str | None = None,
) -> tuple[np.ndarray, np.ndarray | None, str | None, np.ndarray | None]:
    """Read the inputs of a table for a saved model.

    Parameters
    ----------
    path : path-like
        CSV or Parquet file.
    features : list of str or None
        The model's input columns; None (a model saved without column names):
        every numeric column, which must number ``n_features_in``.
    n_features_in : int
        Number of inputs the model expects.
    layout, task_col, id_col : str or None
        As the model was fitted (its saved metadata). With ``layout="long"`` and
        ``task_col`` in the file, one row per distinct input (by ``id_col`` when
        present, else by feature values); otherwise every data row.

    Returns
    -------
    X : ndarray of shape (n_units, n_features)
    ids : ndarray of shape (n_units,) or None
        ``id_col`` values, when the file has that column.
    id_col : str or None
        ``id_col`` if the file has it, else None.
    rows : ndarray of shape (n_units,) or None
        Data row of every input in the long layout, else None.

    Raises
    ------
    DataError
        Missing model columns, non-numeric or missing inputs, or (without column
        names) a different number of numeric columns.
    """
    path = Path(path)
    df = read_table(path)
    if features is not None:
        _check_columns(df, features, path, "model feature")
    else:
        features = _select_features(df, path, [], None)[0]
        if len(features) != n_features_in:
            raise DataError(
                f"{path}: the saved model has no column names and expects "
                f"{n_features_in} inputs; the file has {len(features)} "
                "numeric columns."
            )
    X = _feature_matrix(df, features, path)
    id_col = id_col if id_col in df.columns else None
    rows = None
    if layout == "long" and task_col in df.columns:
        rows = _distinct_units(df, X, id_col, path)
        X = X[rows]
    ids = None if id_col is None else df[id_col].to_numpy()
    if ids is not None and rows is not None:
        ids = ids[rows]
    return X, ids, id_col, rows
