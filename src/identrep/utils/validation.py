"""Input validation for every public entry point.

All checks raise :class:`~identrep.exceptions.DataError` (a ``ValueError``) for a bad
value or shape and ``TypeError`` for a bad type. Messages name the input, what was
expected, what came, and how to fix it.

Multi-task data are accepted in two layouts (DESIGN.md section 2):

* long: ``X`` (n_samples, n_features), ``y`` (n_samples,), ``task_ids`` (n_samples,);
* wide: ``X`` (n_samples, n_features), ``Y`` (n_samples, n_tasks) with NaN = unobserved.

Both are turned into a :class:`MultiTaskArrays` view that stores ``X`` once and
indexes it by ``rows``, so a wide data set with many tasks is never copied per task.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from identrep.exceptions import DataError

__all__ = [
    "MultiTaskArrays",
    "as_float64_csr",
    "check_array",
    "check_input_kind",
    "check_multitask",
    "check_n_latents",
    "check_task_ids",
    "encode_task_ids",
    "integral_labels",
    "long_to_wide",
    "wide_to_long",
    "within_task_rank",
]


def _plain(label) -> str:
    """A task label as users wrote it: 1 or 'b', not np.int64(1)."""
    return repr(label.item() if isinstance(label, np.generic) else label)


def _first_bad(mask: np.ndarray) -> str:
    idx = np.argwhere(mask)[0]
    if idx.size == 1:
        return f"index {int(idx[0])}"
    return f"row {int(idx[0])}, column {int(idx[1])}"


def _shape_and_dtype(X) -> tuple[tuple | None, np.dtype | None]:
    """Shape and dtype of an array-like without converting arrays or DataFrames
    (a DataFrame has no single dtype: None)."""
    if hasattr(X, "shape"):
        return tuple(X.shape), getattr(X, "dtype", None)
    try:
        a = np.asarray(X)
    except Exception:  # ragged lists etc.: the full check reports them
        return None, None
    return a.shape, a.dtype


def as_float64_csr(X) -> sp.csr_matrix:
    """A float64 CSR copy of the sparse matrix ``X``, sharing no array with it.

    A dtype conversion alone (``csr_matrix(X, dtype=float64)``) shares the
    caller's index arrays with the result; scikit-learn's estimators sort those
    in place, which left the caller's matrix with sorted indices over unsorted
    values (its counts moved to other columns of their rows).
    """
    return sp.csr_matrix(X, dtype=np.float64, copy=True)


def check_input_kind(X, name: str, cls: str, *, min_samples: int = 0) -> None:
    """Refuse sparse, complex and 1-D input, and (with ``min_samples``) too few rows
    or no columns, in scikit-learn's wording, before :func:`check_array`.

    ``cls`` names the estimator in the messages. Ragged input passes through for
    :func:`check_array` to report.
    """
    if sp.issparse(X):
        raise TypeError(
            f"{cls} does not accept sparse input: {name} is a "
            f"{type(X).__name__}. Convert it with {name}.toarray() (dense data is "
            "required)."
        )
    shape, dtype = _shape_and_dtype(X)
    if dtype is not None and np.dtype(dtype).kind == "c":
        raise DataError(
            f"Complex data not supported: {name} has dtype {dtype}; {cls} needs "
            "real-valued input (take the real part or split real and imaginary "
            "parts into columns)."
        )
    if shape is not None and len(shape) == 1:
        raise DataError(
            f"{name} must be a 2-D array of shape (n_samples, n_features); got a "
            f"1-D array of shape {shape}. Reshape your data with "
            f"{name}.reshape(-1, 1) for a single feature or {name}.reshape(1, -1) "
            "for a single sample."
        )
    if not min_samples or shape is None or len(shape) != 2:
        return
    if shape[0] < min_samples:
        raise DataError(
            f"Found array with {shape[0]} sample(s) (shape={shape}) while a minimum "
            f"of {min_samples} is required by {cls}."
        )
    if shape[1] < 1:
        raise DataError(
            f"Found array with 0 feature(s) (shape={shape}) while a minimum of 1 is "
            f"required by {cls}."
        )


def check_array(
    a,
    name: str = "X",
    *,
    ndim: int = 2,
    dtype=np.float64,
    allow_nan: bool = False,
    min_rows: int = 1,
) -> np.ndarray:
    """Convert ``a`` to a numeric array of ``ndim`` dimensions with finite values.

    Parameters
    ----------
    a : array-like or pandas object
    name : str
        Name of the input, used in error messages.
    ndim : int
        Required number of dimensions (1 or 2).
    dtype : numpy dtype
        Output dtype.
    allow_nan : bool
        If True NaN is allowed (meaning "missing"); infinities never are.
    min_rows : int
        Minimum number of rows.

    Returns
    -------
    ndarray of shape matching ``a``, dtype ``dtype``.
    """
    if hasattr(a, "to_numpy"):
        a = a.to_numpy()
    try:
        arr = np.asarray(a)
    except Exception as exc:  # ragged lists and the like
        raise DataError(f"{name} could not be converted to an array: {exc}") from exc
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real-valued; got complex dtype {arr.dtype}.")
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        try:
            arr = arr.astype(dtype)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{name} must be numeric; got dtype {arr.dtype} ({exc})."
            ) from exc
    # C order always: float32 network layers round differently on a Fortran-ordered
    # (e.g. DataFrame.to_numpy()) input, so the same data would give other latents
    arr = np.asarray(arr, dtype=dtype, order="C")
    if arr.ndim != ndim:
        want = "(n_samples,)" if ndim == 1 else "(n_samples, n_features)"
        raise DataError(
            f"{name} must be a {ndim}-D array of shape {want}; got shape {arr.shape}."
            + (
                " Reshape a single feature with X.reshape(-1, 1)."
                if arr.ndim == 1
                else ""
            )
        )
    if arr.shape[0] < min_rows:
        raise DataError(
            f"{name} must have at least {min_rows} row(s); got {arr.shape[0]}."
        )
    if ndim == 2 and arr.shape[1] == 0:
        raise DataError(f"{name} must have at least one column; got shape {arr.shape}.")
    if _all_finite(arr, allow_nan):
        return arr
    bad = ~np.isfinite(arr)
    if allow_nan:
        bad &= ~np.isnan(arr)
    if bad.any():
        what = "infinite" if allow_nan else "non-finite (NaN or inf)"
        raise DataError(
            f"{name} contains {int(bad.sum())} {what} value(s) (first at "
            f"{_first_bad(bad)}); drop or impute them before fitting."
        )
    return arr


def _all_finite(arr: np.ndarray, allow_nan: bool, chunk: int = 65536) -> bool:
    """No inf (and no NaN unless ``allow_nan``), checked ``chunk`` rows at a time so
    a large (e.g. memory-mapped) input needs no mask of its full size."""
    for s in range(0, max(arr.shape[0], 1), chunk):
        c = arr[s : s + chunk]
        if np.isinf(c).any() if allow_nan else not np.isfinite(c).all():
            return False
    return True


def integral_labels(v: np.ndarray) -> np.ndarray:
    """Integral float labels as integers, exactly: int64 where every value fits,
    else uint64 (non-negative), else Python ints in an object array. Integer arrays
    are returned as they are (a uint64 label stays positive)."""
    if v.dtype.kind in "iu":
        return v
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
    if lo >= -(2.0**63) and hi < 2.0**63:
        return v.astype(np.int64)
    if lo >= 0 and hi < 2.0**64:
        return v.astype(np.uint64)
    out = np.empty(v.shape, dtype=object)
    out[:] = [int(x) for x in v.ravel()]
    return out


def encode_task_ids(task_ids, n_samples: int, *, name: str = "task_ids"):
    """Map arbitrary task labels to codes 0..T-1.

    Returns
    -------
    codes : ndarray of shape (n_samples,), int64
    labels : ndarray of shape (n_tasks,)
        The sorted distinct labels; ``labels[codes] == task_ids``.
    """
    if hasattr(task_ids, "to_numpy"):
        task_ids = task_ids.to_numpy()
    t = np.asarray(task_ids)
    if t.ndim != 1 or t.shape[0] != n_samples:
        raise DataError(
            f"{name} must have shape ({n_samples},) to match X; got {t.shape}."
        )
    if t.dtype.kind == "f":
        if not np.all(np.isfinite(t)):
            raise DataError(f"{name} contains NaN or inf; every sample needs a task.")
        if not np.all(t == np.round(t)):
            raise TypeError(
                f"{name} must be integers or labels (str); got non-integral floats "
                f"such as {t[t != np.round(t)][0]!r}."
            )
        t = integral_labels(t)
    if t.dtype.kind not in "iuUSOb":
        raise TypeError(
            f"{name} must be integers or string labels; got dtype {t.dtype}."
        )
    try:
        labels, codes = np.unique(t, return_inverse=True)
    except TypeError as exc:
        raise TypeError(
            f"{name} must hold labels of one kind (all integers or all strings); "
            f"got a mix ({exc})."
        ) from exc
    return codes.astype(np.int64).reshape(-1), labels


def check_task_ids(task_ids, n_samples: int, known_tasks: np.ndarray) -> np.ndarray:
    """Codes of ``task_ids`` in a fitted model's ``known_tasks``; unknown ids raise.

    Returns
    -------
    ndarray of shape (n_samples,), int64 codes into ``known_tasks``.
    """
    if hasattr(task_ids, "to_numpy"):
        task_ids = task_ids.to_numpy()
    t = np.asarray(task_ids)
    if t.ndim != 1 or t.shape[0] != n_samples:
        raise DataError(
            f"task_ids must have shape ({n_samples},) to match X; got {t.shape}."
        )
    known = np.asarray(known_tasks)
    if t.dtype.kind == "f" and known.dtype.kind in "iu":
        bad = ~np.isfinite(t) | (t != np.round(np.where(np.isfinite(t), t, 0)))
        if bad.any():
            raise DataError(
                f"task_ids contains {int(bad.sum())} value(s) that are not integers "
                f"(first: {t[bad][0]!r}): ids unseen during fit, as no fitted "
                "task has them."
            )
        t = t.astype(np.int64)
    # known tasks are sorted ids (long layout) or column names in the order of a
    # wide matrix (any order): search a sorted view, map back to the codes
    order = np.argsort(known, kind="stable")
    pos = np.clip(np.searchsorted(known[order], t), 0, len(known) - 1)
    ok = known[order][pos] == t
    pos = order[pos]
    if not np.all(ok):
        bad = np.unique(t[~ok])
        raise DataError(
            f"task_ids contains {bad.size} task id(s) unseen during fit "
            f"(first: {bad[:5].tolist()}); the model knows {len(known)} tasks "
            f"({known[:5].tolist()}{', ...' if len(known) > 5 else ''})."
        )
    return pos.astype(np.int64)


@dataclass(frozen=True)
class MultiTaskArrays:
    """Validated multi-task data in long form without copying ``X`` per task.

    Attributes
    ----------
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_obs,)
        Targets of the observed (row, task) pairs.
    task_ids : ndarray of shape (n_obs,)
        Task codes in ``[0, n_tasks)``.
    rows : ndarray of shape (n_obs,)
        Row of ``X`` each observation belongs to.
    tasks : ndarray of shape (n_tasks,)
        Task labels (sorted distinct long-format ids, or wide-format column names).
    layout : {"long", "wide"}
    """

    X: np.ndarray
    y: np.ndarray
    task_ids: np.ndarray
    rows: np.ndarray
    tasks: np.ndarray
    layout: str

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_obs(self) -> int:
        return len(self.y)

    def counts(self) -> np.ndarray:
        """Number of observations per task, shape (n_tasks,)."""
        return np.bincount(self.task_ids, minlength=self.n_tasks)


def check_multitask(
    X,
    y,
    task_ids=None,
    *,
    min_samples: int = 2,
    check_constant: bool = True,
    allow_nan_X: bool = False,
) -> MultiTaskArrays:
    """Validate long (``y``, ``task_ids``) or wide (``Y``) multi-task data.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) with ``task_ids``, or (n_samples, n_tasks)
        without (wide layout, NaN = unobserved). A pandas DataFrame's column names
        become the task labels.
    task_ids : array-like of shape (n_samples,), optional
        Task label of every sample (ints or strings) for the long layout.
    min_samples : int
        Each task needs at least this many observations.
    check_constant : bool
        Raise if a task's target is constant (its spurious effects are then undefined).

    Returns
    -------
    MultiTaskArrays
    """
    columns = getattr(y, "columns", None)
    X = check_array(X, "X", allow_nan=allow_nan_X)
    n = X.shape[0]
    if y is None:
        raise DataError(
            "y is required: pass targets of shape (n_samples,) with task_ids=..., "
            "or a wide target matrix of shape (n_samples, n_tasks)."
        )
    y_arr = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if task_ids is None:
        if y_arr.ndim != 2:
            raise DataError(
                "task_ids is required when y is 1-D (long layout); got y of shape "
                f"{y_arr.shape} and task_ids=None. Pass task_ids=..., or pass a wide "
                "target matrix of shape (n_samples, n_tasks) with NaN for unobserved."
            )
        Y = check_array(y_arr, "Y", allow_nan=True)
        if Y.shape[0] != n:
            raise DataError(
                f"Y must have one row per row of X ({n}); got shape {Y.shape}."
            )
        obs = ~np.isnan(Y)
        rows, tids = np.nonzero(obs)
        # order observations task-major: contiguous per task, rows ascending
        order = np.lexsort((rows, tids))
        rows, tids = rows[order], tids[order]
        yv = Y[rows, tids]
        tasks = np.asarray(columns) if columns is not None else np.arange(Y.shape[1])
        names, counts_ = np.unique(tasks.astype(str), return_counts=True)
        if (counts_ > 1).any():
            raise DataError(
                "Y has duplicate column names "
                f"{[str(c) for c in names[counts_ > 1][:5]]}: every task needs a "
                "column of its own. Rename or merge the duplicated columns."
            )
        data = MultiTaskArrays(
            X, yv, tids.astype(np.int64), rows.astype(np.int64), tasks, "wide"
        )
    else:
        if y_arr.ndim == 2 and y_arr.shape[1] == 1:
            y_arr = y_arr[:, 0]
        yv = check_array(y_arr, "y", ndim=1)
        if yv.shape[0] != n:
            raise DataError(f"y must have shape ({n},) to match X; got {yv.shape}.")
        codes, labels = encode_task_ids(task_ids, n)
        data = MultiTaskArrays(
            X, yv, codes, np.arange(n, dtype=np.int64), labels, "long"
        )
    counts = data.counts()
    few = np.flatnonzero(counts < min_samples)
    if few.size:
        lab = data.tasks[few[0]]
        raise DataError(
            f"Every task needs at least {min_samples} observed samples; task "
            f"{_plain(lab)} has {int(counts[few[0]])}"
            + (f" ({few.size} tasks in all)" if few.size > 1 else "")
            + ". Drop such tasks or gather more samples."
        )
    if check_constant:
        # scale-free: each task's values relative to its largest magnitude, so a
        # target in units of 1e-20 or 1e300 is judged as the same target in units of 1
        t = data.task_ids
        peak = np.zeros(data.n_tasks)
        np.maximum.at(peak, t, np.abs(data.y))
        yn = data.y / np.where(peak > 0, peak, 1.0)[t]
        means = np.bincount(t, weights=yn, minlength=data.n_tasks) / counts
        dev = np.bincount(t, weights=(yn - means[t]) ** 2, minlength=data.n_tasks)
        const = np.flatnonzero(dev <= 1e-24 * counts)  # std <= 1e-12 of the peak
        if const.size:
            lab = data.tasks[const[0]]
            value = means[const[0]] * (peak[const[0]] or 1.0)
            raise DataError(
                f"The target of task {_plain(lab)} is constant "
                f"(value {value:.6g}"
                + (f"; {const.size} such tasks" if const.size > 1 else "")
                + "); a constant target carries no information about the latents. "
                "Drop the task."
            )
    return data


def long_to_wide(X, y, task_ids):
    """Long ``(X, y, task_ids)`` -> wide ``(X, Y)`` with NaN where a task is unobserved.

    Every long row becomes one wide row (rows are not merged), so ``X`` is returned
    unchanged and ``Y`` has shape (n_samples, n_tasks).
    """
    X = check_array(X, "X")
    yv = check_array(y, "y", ndim=1)
    codes, labels = encode_task_ids(task_ids, X.shape[0])
    Y = np.full((X.shape[0], len(labels)), np.nan)
    Y[np.arange(X.shape[0]), codes] = yv
    return X, Y


def wide_to_long(X, Y):
    """Wide ``(X, Y)`` -> long ``(X_long, y, task_ids)`` (rows of ``X`` repeated)."""
    d = check_multitask(X, Y, min_samples=1, check_constant=False)
    return d.X[d.rows], d.y, d.tasks[d.task_ids]


def within_task_rank(X: np.ndarray, task_ids: np.ndarray, max_rows: int = 20_000):
    """Numerical rank of ``X`` after centring within each task.

    What a linear model with a per-task mean can use: MTLCM's latents span at most
    this many directions. Computed on at most ``max_rows`` evenly spaced rows (the
    rank of generic data does not change).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    task_ids : ndarray of shape (n_samples,)
        Integer task codes.

    Returns
    -------
    int
    """
    t = np.asarray(task_ids)
    n_tasks = int(t.max()) + 1 if t.size else 0
    counts = np.maximum(np.bincount(t, minlength=n_tasks), 1)
    means = np.stack([np.bincount(t, X[:, j], n_tasks) for j in range(X.shape[1])], 1)
    Xc = X - means[t] / counts[t, None]
    if Xc.shape[0] > max_rows:
        Xc = Xc[np.linspace(0, Xc.shape[0] - 1, max_rows).astype(np.int64)]
    unit = np.abs(Xc).max(axis=0)
    return int(np.linalg.matrix_rank(Xc / np.where(unit > 0, unit, 1.0)))


def check_n_latents(
    n_latents: int,
    *,
    n_features: int,
    n_tasks: int | None = None,
    n_obs: int | None = None,
    rank: int | None = None,
    owner: str = "",
    warn: bool = True,
) -> None:
    """Refuse an ``n_latents`` the data cannot support, before any work.

    * more latents than input features: the latents are recovered as a function
      of X, so at most ``n_features`` of them can be told apart;
    * more latents than ``rank``, the within-task rank of the inputs of a linear
      model (:func:`within_task_rank`), or than ``n_obs - n_tasks`` (the largest
      rank of any features centred within tasks, what MTLCM sees);
    * more latents than tasks is allowed with a warning: identifiability needs at
      least ``n_latents`` tasks with linearly independent weights.

    Parameters
    ----------
    n_latents, n_features : int
    n_tasks, n_obs, rank : int, optional
        Checked when given.
    owner : str
        Who asks (the estimator's name), for the messages.
    warn : bool, default=True
        Warn when ``n_latents`` exceeds ``n_tasks``.

    Raises
    ------
    DataError
        Naming ``n_latents``, the limit and how to fix it.
    """
    who = f"{owner}: " if owner else ""
    d = int(n_latents)
    limits = [
        (int(n_features), f"the number of input features (n_features={n_features})")
    ]
    if rank is not None:
        limits.append(
            (int(rank), f"the rank of the inputs centred within tasks ({rank})")
        )
    if n_obs is not None and n_tasks is not None:
        limits.append(
            (
                int(n_obs) - int(n_tasks),
                f"the observations minus the tasks ({n_obs} - {n_tasks}), the rank "
                "of any features centred within tasks",
            )
        )
    for limit, what in limits:
        if d > limit:
            raise DataError(
                f"{who}n_latents={d} exceeds {what}: at most {max(limit, 0)} latents "
                f"can be told apart from these data. Set n_latents to at most "
                f"{max(limit, 1)} (identrep fit: --n-latents)."
            )
    if warn and n_tasks is not None and d > int(n_tasks):
        warnings.warn(
            f"{who}n_latents={d} exceeds the number of tasks ({n_tasks}): "
            "identifiability needs at least n_latents tasks with linearly "
            "independent weights, so some latents may not be identified.",
            UserWarning,
            stacklevel=3,
        )
