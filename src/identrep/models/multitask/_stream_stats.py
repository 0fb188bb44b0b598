"""MTLCM's sufficient statistics from chunks of rows: files, generators, Dask.

:class:`StatisticsAccumulator` takes long-layout chunks ``(X, y, task_ids)`` in any
order and keeps, per task seen so far, the count, the means and the centred scatters
(:class:`~identrep.models.multitask._stats.TaskStats`), merged with Chan et al.'s
pairwise update. Memory is O(T p^2) plus one chunk: the task ids are grouped within a
chunk only (no copy of the ids of all rows, no sort of all rows), so a table larger
than memory can be reduced chunk by chunk, and partial accumulators from separate
workers merge exactly (:meth:`StatisticsAccumulator.merge`), which is how
:func:`dask_task_statistics` reduces a Dask array or DataFrame.
"""

from __future__ import annotations

import numpy as np

from identrep.exceptions import DataError
from identrep.models.multitask._stats import TaskStats, power_of_two_unit
from identrep.utils.validation import _plain, check_array, encode_task_ids

__all__ = [
    "StatisticsAccumulator",
    "array_statistics",
    "chunk_statistics",
    "wide_statistics",
    "dask_task_statistics",
    "is_dask_collection",
    "table_chunks",
]

# per-task scatter entries (tasks x p x p) a chunk of ``array_statistics`` may hold
_CHUNK_ENTRIES = 2**22


def is_dask_collection(a) -> bool:
    """Whether ``a`` is a Dask array, DataFrame or Series (without importing Dask)."""
    return hasattr(a, "__dask_graph__") and callable(a.__dask_graph__)


def table_chunks(path, features: list, target: str, task: str, *, rows: int = 65536):
    """``(X, y, task_ids)`` chunks of a Parquet file (one row group at a time) or a
    CSV file (``rows`` rows at a time), for :meth:`MTLCM.fit_chunks`."""
    import pandas as pd

    cols = [*features, target, task]
    if str(path).endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        for i in range(f.num_row_groups):
            df = f.read_row_group(i, columns=cols).to_pandas()
            yield (
                df[features].to_numpy(np.float64),
                df[target].to_numpy(),
                df[task].to_numpy(),
            )
    else:
        for df in pd.read_csv(path, usecols=cols, chunksize=rows):
            yield (
                df[features].to_numpy(np.float64),
                df[target].to_numpy(),
                df[task].to_numpy(),
            )


def chunk_statistics(X, y, task_ids, x_unit: float = 1.0, y_unit: float = 1.0):
    """Per-task statistics of one chunk: ``(labels, n, x_mean, y_mean, Sxx, sxy,
    syy)`` with the scatters centred at the chunk's own task means."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    t = np.asarray(task_ids).reshape(-1)
    if X.ndim != 2 or not len(X) == len(y) == len(t):
        raise DataError(
            "A chunk must be X of shape (rows, n_features) with y and task_ids of "
            f"shape (rows,); got X {X.shape}, y {y.shape}, task_ids {t.shape}."
        )
    bad = ~np.isfinite(X).all(axis=1) | ~np.isfinite(y)
    if bad.any():
        raise DataError(
            f"A chunk of X or y contains non-finite values ({int(bad.sum())} rows, "
            f"first at chunk row {int(np.argmax(bad))}); drop or impute them."
        )
    labels, inv, counts = np.unique(t, return_inverse=True, return_counts=True)
    return _coded_statistics(X, y, labels, inv.reshape(-1), counts, x_unit, y_unit)


def _coded_statistics(X, y, labels, inv, counts, x_unit, y_unit):
    """:func:`chunk_statistics` of a chunk whose rows carry codes ``inv`` into
    ``labels`` (``counts`` rows each).

    Each task's rows are reduced with the same operations, in the same order, as
    :func:`~identrep.models.multitask._stats.task_statistics` does, so a task whose
    rows all lie in one chunk gets bit-identical statistics on either path."""
    order = np.argsort(inv, kind="stable")  # within the chunk only
    Xs, ys = X[order] / x_unit, y[order, None] / y_unit
    T, p = len(labels), X.shape[1]
    mx, my = np.empty((T, p)), np.empty(T)
    Sxx, sxy, syy = np.empty((T, p, p)), np.empty((T, p)), np.empty(T)
    a = 0
    for k, n in enumerate(counts.tolist()):
        Xk, yk = Xs[a : a + n], ys[a : a + n]
        a += n
        mxk, myk = Xk.mean(axis=0), yk.mean(axis=0)
        Xk, yk = Xk - mxk, yk - myk
        mx[k], my[k] = mxk, myk[0]
        Sxx[k], sxy[k] = Xk.T @ Xk, (Xk.T @ yk)[:, 0]
        syy[k] = np.einsum("ij,ij->j", yk, yk)[0]
    return labels, counts.astype(np.float64), mx, my, Sxx, sxy, syy


class StatisticsAccumulator:
    """Per-task MTLCM statistics built chunk by chunk (long layout).

    Parameters
    ----------
    x_unit, y_unit : float or None
        Units of the statistics (see :class:`TaskStats`); None: the power of two
        above the first chunk's largest magnitude.
    """

    def __init__(self, x_unit: float | None = None, y_unit: float | None = None):
        self.x_unit, self.y_unit = x_unit, y_unit
        self._index: dict = {}
        self._labels: list = []
        self._arrays: list | None = None  # n, x_mean, y_mean, Sxx, sxy, syy
        self.n_rows = 0

    def update(self, X, y, task_ids) -> StatisticsAccumulator:
        """Add one chunk of rows."""
        X = np.asarray(X, dtype=np.float64)
        if self.x_unit is None:
            self.x_unit = power_of_two_unit(X)
        if self.y_unit is None:
            self.y_unit = power_of_two_unit(np.asarray(y, dtype=np.float64).ravel())
        part = chunk_statistics(X, y, task_ids, self.x_unit, self.y_unit)
        self._merge_part(*part)
        self.n_rows += len(X)
        return self

    def merge(self, other: StatisticsAccumulator) -> StatisticsAccumulator:
        """Fold another accumulator (same units) into this one, exactly."""
        if other._arrays is None:
            return self
        if self._arrays is None:
            self.x_unit, self.y_unit = other.x_unit, other.y_unit
        elif (other.x_unit, other.y_unit) != (self.x_unit, self.y_unit):
            other = other._in_units(self.x_unit, self.y_unit)
        n, mx, my, Sxx, sxy, syy = other._arrays
        self._merge_part(
            np.asarray(other._labels, dtype=object), n, mx, my, Sxx, sxy, syy
        )
        self.n_rows += other.n_rows
        return self

    def _in_units(self, x_unit, y_unit):
        out = StatisticsAccumulator(x_unit, y_unit)
        fx, fy = self.x_unit / x_unit, self.y_unit / y_unit
        n, mx, my, Sxx, sxy, syy = self._arrays
        out._arrays = [n, mx * fx, my * fy, Sxx * fx**2, sxy * fx * fy, syy * fy**2]
        out._labels, out._index, out.n_rows = (
            list(self._labels),
            dict(self._index),
            self.n_rows,
        )
        return out

    def _merge_part(self, labels, nb, mx, my, Sxx, sxy, syy):
        idx = np.empty(len(labels), dtype=np.intp)
        for k, lab in enumerate(labels.tolist()):
            j = self._index.get(lab)
            if j is None:
                j = self._index[lab] = len(self._labels)
                self._labels.append(lab)
            idx[k] = j
        T, p = len(self._labels), mx.shape[1]
        if self._arrays is None:
            shapes = [(T,), (T, p), (T,), (T, p, p), (T, p), (T,)]
            self._arrays = [np.zeros(s) for s in shapes]
        elif len(self._arrays[0]) < T:  # new tasks: grow (doubling)
            grow = max(T, 2 * len(self._arrays[0]))
            self._arrays = [
                np.concatenate([a, np.zeros((grow - len(a), *a.shape[1:]))])
                for a in self._arrays
            ]
        n, ax, ay, aS, as_, ayy = self._arrays
        if ax.shape[1] != p:
            raise DataError(
                f"Every chunk must have the same number of features; got {p} after "
                f"{ax.shape[1]}."
            )
        na = n[idx]
        tot = na + nb
        dx, dy = mx - ax[idx], my - ay[idx]
        f = na * nb / tot
        aS[idx] += Sxx + f[:, None, None] * dx[:, :, None] * dx[:, None, :]
        as_[idx] += sxy + f[:, None] * dx * dy[:, None]
        ayy[idx] += syy + f * dy**2
        ax[idx] += dx * (nb / tot)[:, None]
        ay[idx] += dy * (nb / tot)
        n[idx] = tot

    def result(self) -> tuple[TaskStats, np.ndarray]:
        """``(TaskStats, task labels)`` with tasks in sorted label order."""
        if self._arrays is None:
            raise DataError("No rows were given: the statistics are empty.")
        T = len(self._labels)
        labels = np.asarray(self._labels)
        order = np.argsort(labels, kind="stable")
        n, mx, my, Sxx, sxy, syy = (a[:T][order] for a in self._arrays)
        Sxx = 0.5 * (Sxx + Sxx.transpose(0, 2, 1))
        units = {"x_unit": float(self.x_unit), "y_unit": float(self.y_unit)}
        stats = TaskStats(n=n, x_mean=mx, y_mean=my, Sxx=Sxx, sxy=sxy, syy=syy, **units)
        return stats, labels[order]


def array_statistics(X, y, task_ids, *, chunk_rows: int = 65536):
    """Per-task statistics of in-memory long-layout arrays, in one chunked pass.

    The checks of :func:`~identrep.utils.validation.check_multitask` for the long
    layout (shapes, finite values, label kinds) without its per-row arrays: task ids
    are encoded ``chunk_rows`` rows at a time (no int64 codes of all rows, no sort of
    all rows), so the memory beyond the input is O(T p^2 + chunk_rows p). The units
    are those of :func:`~identrep.models.multitask._stats.task_statistics` with
    ``x_unit=None, y_unit=None`` (powers of two above max |X|, max |y|).

    Returns
    -------
    (TaskStats, labels)
        Tasks in sorted label order, as :func:`encode_task_ids` orders them.
    """
    X = check_array(X, "X")
    n = X.shape[0]
    y = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    y = check_array(y, "y", ndim=1)
    if y.shape[0] != n:
        raise DataError(f"y must have shape ({n},) to match X; got {y.shape}.")
    t = task_ids.to_numpy() if hasattr(task_ids, "to_numpy") else np.asarray(task_ids)
    if t.ndim != 1 or t.shape[0] != n:
        raise DataError(f"task_ids must have shape ({n},) to match X; got {t.shape}.")
    units = power_of_two_unit(X, chunk_rows), power_of_two_unit(y, chunk_rows)
    acc = StatisticsAccumulator(*units)
    # a chunk's temporaries are (tasks in it, p, p): at most _CHUNK_ENTRIES entries
    rows = max(1, min(int(chunk_rows), _CHUNK_ENTRIES // X.shape[1] ** 2))
    kinds, dtypes = set(), []
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        codes, labels = encode_task_ids(t[start:stop], stop - start)
        kinds.add(isinstance(labels[0], (str, bytes)))  # one kind within a chunk
        if len(kinds) > 1:
            raise TypeError(
                "task_ids must hold labels of one kind (all integers or all "
                "strings); got a mix across rows."
            )
        dtypes.append(labels.dtype)
        counts = np.bincount(codes, minlength=len(labels))
        part = _coded_statistics(
            X[start:stop], y[start:stop], labels, codes, counts, acc.x_unit, acc.y_unit
        )
        acc._merge_part(*part)
        acc.n_rows += stop - start
    stats, labels = acc.result()
    return stats, np.asarray(labels, dtype=np.result_type(*dtypes))


def wide_statistics(X, Y, *, chunk_rows: int = 65536):
    """Per-task statistics of the wide layout (``Y`` of shape (n, T), NaN =
    unobserved) in one chunked pass.

    The checks of :func:`~identrep.utils.validation.check_multitask` for the wide
    layout (shapes, finite ``X``, no infinite ``Y``, one column per task) without
    its per-observation arrays (int64 row and task indices of every observed entry,
    a sort of all of them): each chunk of rows is turned into its own observations,
    task by task, and merged into a :class:`StatisticsAccumulator`, so the memory
    beyond the input is O(T p^2) plus one chunk. Units as in
    :func:`array_statistics` (powers of two above max |X| and max |Y| over the
    observed entries).

    Returns
    -------
    (TaskStats, tasks)
        Tasks in column order: ``Y``'s column names (a DataFrame) or 0..T-1.
    """
    columns = getattr(Y, "columns", None)
    X = check_array(X, "X")
    n, p = X.shape
    Y = check_array(np.asarray(Y.to_numpy() if hasattr(Y, "to_numpy") else Y), "Y",
                    allow_nan=True)  # fmt: skip
    if Y.shape[0] != n:
        raise DataError(f"Y must have one row per row of X ({n}); got shape {Y.shape}.")
    T = Y.shape[1]
    tasks = np.asarray(columns) if columns is not None else np.arange(T)
    names, counts = np.unique(tasks.astype(str), return_counts=True)
    if (counts > 1).any():
        raise DataError(
            f"Y has duplicate column names {[str(c) for c in names[counts > 1][:5]]}: "
            "every task needs a column of its own. Rename or merge the duplicated "
            "columns."
        )
    # a chunk's observations (rows x T, each with p features) and scatters bounded
    rows = max(1, min(int(chunk_rows), _CHUNK_ENTRIES // (p * max(T, p))))
    peak = 0.0  # max |Y| over the observed entries
    for start in range(0, n, rows):
        part = np.abs(Y[start : start + rows])
        if not np.isnan(part).all():
            peak = max(peak, float(np.nanmax(part)))
    acc = StatisticsAccumulator(
        power_of_two_unit(X, chunk_rows), power_of_two_unit(np.array([peak]))
    )
    for start in range(0, n, rows):
        Yc = Y[start : start + rows]
        tid, r = np.nonzero(~np.isnan(Yc.T))  # task-major, rows ascending
        if not len(r):
            continue
        labels, codes, counts = np.unique(tid, return_inverse=True, return_counts=True)
        part = _coded_statistics(
            X[start : start + rows][r], Yc[r, tid], labels, codes.reshape(-1),
            counts, acc.x_unit, acc.y_unit,
        )  # fmt: skip
        acc._merge_part(*part)
        acc.n_rows += len(Yc)
    if not acc._labels:
        raise DataError("Y has no observed entry: every value is NaN.")
    stats, present = acc.result()
    if len(present) < T:  # a task with no observation at all
        missing = np.setdiff1d(np.arange(T), present)[0]
        raise DataError(
            f"Every task needs at least 2 observed samples; task "
            f"{_plain(tasks[missing])} has 0. Drop such tasks or gather more samples."
        )
    return stats, tasks


def _partition_accumulator(X, y, t, x_unit, y_unit):
    return StatisticsAccumulator(x_unit, y_unit).update(X, y, t)


def _merged(accs):
    out = StatisticsAccumulator(accs[0].x_unit, accs[0].y_unit)
    for a in accs:
        out.merge(a)
    return out


def dask_task_statistics(X, y, task_ids, *, split_every: int = 8):
    """Statistics of Dask collections (arrays or DataFrame columns with the same
    partitions), computed on the active scheduler and tree-reduced by exact merges.

    Units: the power of two above max |X| (and max |y|), computed first on the
    cluster, so every partition uses the same units and the result equals the
    in-memory statistics to rounding.

    Returns
    -------
    (TaskStats, labels)
    """
    import dask
    import dask.array as da

    def blocks(a):
        if hasattr(a, "divisions"):  # a Dask DataFrame or Series
            return [dask.delayed(np.asarray)(b) for b in a.to_delayed()]
        a = da.asarray(a)
        if a.ndim == 2:
            a = a.rechunk({1: -1})
        return list(a.to_delayed().ravel())

    bx, by, bt = blocks(X), blocks(y), blocks(task_ids)
    if not len(bx) == len(by) == len(bt):
        raise DataError(
            "X, y and task_ids must be partitioned alike (same row chunks); got "
            f"{len(bx)}, {len(by)} and {len(bt)} partitions."
        )
    peak = [dask.delayed(lambda a: float(np.abs(np.asarray(a)).max(initial=0.0)))(b)
            for b in bx]  # fmt: skip
    peak_y = [dask.delayed(lambda a: float(np.abs(np.asarray(a)).max(initial=0.0)))(b)
              for b in by]  # fmt: skip
    px, py = dask.compute(peak, peak_y)
    xu = power_of_two_unit(np.array([max(px)]))
    yu = power_of_two_unit(np.array([max(py)]))
    parts = [dask.delayed(_partition_accumulator)(a, b, c, xu, yu)
             for a, b, c in zip(bx, by, bt, strict=True)]  # fmt: skip
    while len(parts) > 1:
        parts = [dask.delayed(_merged)(parts[i : i + split_every])
                 for i in range(0, len(parts), split_every)]  # fmt: skip
    (acc,) = dask.compute(parts[0])
    return acc.result()
