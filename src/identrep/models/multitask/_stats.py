"""Per-task sufficient statistics of the MTLCM likelihood (numpy, one streaming pass).

For task t with observations (x_i, y_i) the MTLCM log-likelihood depends on the data
only through the count n_t, the means, and the *centred* scatters

    S_xx = sum (x - xbar)(x - xbar)^T,  s_xy = sum (x - xbar)(y - ybar),
    s_yy = sum (y - ybar)^2.

They are accumulated chunk by chunk with Chan et al.'s pairwise update, which is
exact and numerically stable, so memory is O(T p^2) whatever the number of samples.
Tasks observed on the same rows of ``X`` (wide data without missing values) share
their x-statistics, which are then computed once.

Units: the statistics are those of ``X / x_unit`` and ``y / y_unit``. By default the
units are the powers of two at or above the largest magnitude of ``X`` and ``y``, an
exact rescaling that keeps the scatters finite and away from underflow for any
magnitude a float64 holds (``X * 1e300`` would overflow ``X^T X``; ``X * 1e-300``
would underflow it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from identrep.utils.validation import MultiTaskArrays


@dataclass(frozen=True)
class TaskStats:
    """Centred sufficient statistics of every task.

    The scatters are taken around the sample means unless ``x_centre``/``y_centre``
    are set (see :meth:`recentre`).

    Attributes
    ----------
    n : ndarray of shape (n_tasks,)
    x_mean : ndarray of shape (n_tasks, n_features)
        Sample means of x.
    y_mean : ndarray of shape (n_tasks,)
        Sample means of y.
    Sxx : ndarray of shape (n_tasks, n_features, n_features)
    sxy : ndarray of shape (n_tasks, n_features)
    syy : ndarray of shape (n_tasks,)
    x_centre, y_centre : ndarray or None
        The points the scatters are taken around (None: the sample means).
    x_unit, y_unit : float
        Every statistic is that of ``X / x_unit`` and ``y / y_unit``.
    """

    n: np.ndarray
    x_mean: np.ndarray
    y_mean: np.ndarray
    Sxx: np.ndarray
    sxy: np.ndarray
    syy: np.ndarray
    x_centre: np.ndarray | None = None
    y_centre: np.ndarray | None = None
    x_unit: float = 1.0
    y_unit: float = 1.0

    @property
    def n_tasks(self) -> int:
        return len(self.n)

    def recentre(self, x_centre: np.ndarray, y_centre: np.ndarray) -> TaskStats:
        """Statistics of the same data with scatters around given per-task points.

        Uses S_c = S_mean + n (xbar - c)(xbar - c)^T (and likewise for the cross and
        y terms), starting from the scatter around the sample means, so recentring
        an already recentred object is exact.
        """
        n = self.n
        S, s, syy = self.Sxx, self.sxy, self.syy
        if self.x_centre is not None:  # back to the scatter around the means
            ex, ey = self.x_mean - self.x_centre, self.y_mean - self.y_centre
            S = S - n[:, None, None] * ex[:, :, None] * ex[:, None, :]
            s = s - n[:, None] * ex * ey[:, None]
            syy = syy - n * ey**2
        x_centre = np.asarray(x_centre, dtype=float).copy()
        y_centre = np.asarray(y_centre, dtype=float).copy()
        dx = self.x_mean - x_centre
        dy = self.y_mean - y_centre
        return TaskStats(
            n=n,
            x_mean=self.x_mean,
            y_mean=self.y_mean,
            Sxx=S + n[:, None, None] * dx[:, :, None] * dx[:, None, :],
            sxy=s + n[:, None] * dx * dy[:, None],
            syy=syy + n * dy**2,
            x_centre=x_centre,
            y_centre=y_centre,
            x_unit=self.x_unit,
            y_unit=self.y_unit,
        )

    def in_units(self, x_unit: float, y_unit: float) -> TaskStats:
        """The same statistics expressed for ``X / x_unit`` and ``y / y_unit``."""
        fx, fy = self.x_unit / x_unit, self.y_unit / y_unit
        opt = lambda a, f: None if a is None else a * f
        return TaskStats(
            n=self.n,
            x_mean=self.x_mean * fx,
            y_mean=self.y_mean * fy,
            Sxx=self.Sxx * fx**2,
            sxy=self.sxy * (fx * fy),
            syy=self.syy * fy**2,
            x_centre=opt(self.x_centre, fx),
            y_centre=opt(self.y_centre, fy),
            x_unit=float(x_unit),
            y_unit=float(y_unit),
        )

    def pooled_residual_covariance(self) -> np.ndarray:
        """Sample-weighted mean of the residual covariances, shape (p, p)."""
        _, R = self.residual_covariances()
        return np.einsum("t,tij->ij", self.n / self.n.sum(), R)

    def residual_covariances(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-task regression of x on y: slopes b_t (T, p) and residual covariances
        R_t = (S_xx - s_xy s_xy^T / s_yy) / n_t, shape (T, p, p)."""
        b = self.sxy / self.syy[:, None]
        R = (self.Sxx - b[:, :, None] * self.sxy[:, None, :]) / self.n[:, None, None]
        return b, 0.5 * (R + R.transpose(0, 2, 1))


def _merge(acc, n_b, mx_b, my_b, Mxx_b, Mxy_b, myy_b):
    """Chan et al. merge of a chunk's centred statistics into the accumulator."""
    if acc is None:
        return [n_b, mx_b, my_b, Mxx_b, Mxy_b, myy_b]
    n_a, mx_a, my_a, Mxx_a, Mxy_a, myy_a = acc
    n = n_a + n_b
    dx = mx_b - mx_a
    dy = my_b - my_a
    f = n_a * n_b / n
    return [
        n,
        mx_a + dx * (n_b / n),
        my_a + dy * (n_b / n),
        Mxx_a + Mxx_b + f * np.outer(dx, dx),
        Mxy_a + Mxy_b + f * np.outer(dx, dy),
        myy_a + myy_b + f * dy**2,
    ]


def power_of_two_unit(a: np.ndarray, chunk_size: int = 65536) -> float:
    """The power of two at or above ``max |a|`` (1.0 for an all-zero array), found
    chunk by chunk; dividing by it is exact and leaves magnitudes in (1/2, 1]."""
    peak = 0.0
    flat = a.reshape(len(a), -1) if a.ndim > 1 else a[:, None]
    for start in range(0, len(flat), chunk_size):
        peak = max(peak, float(np.abs(flat[start : start + chunk_size]).max()))
    if not peak > 0.0 or not np.isfinite(peak):
        return 1.0
    return float(np.ldexp(1.0, min(int(np.frexp(peak)[1]), 1023)))


def _group_stats(
    X: np.ndarray,
    rows: np.ndarray,
    Yg: np.ndarray,
    chunk_size: int,
    x_unit: float = 1.0,
    y_unit: float = 1.0,
):
    """Statistics of one group of tasks sharing ``rows``; ``Yg`` is (len(rows), g)."""
    acc = None
    for start in range(0, len(rows), chunk_size):
        r = rows[start : start + chunk_size]
        Xc = X[r] / x_unit
        Yc = Yg[start : start + chunk_size] / y_unit
        mx = Xc.mean(axis=0)
        my = Yc.mean(axis=0)
        Xc = Xc - mx
        Yc = Yc - my
        acc = _merge(
            acc,
            float(len(r)),
            mx,
            my,
            Xc.T @ Xc,
            Xc.T @ Yc,
            np.einsum("ij,ij->j", Yc, Yc),
        )
    return acc


def task_statistics(
    data: MultiTaskArrays,
    *,
    chunk_size: int = 65536,
    x_unit: float | None = 1.0,
    y_unit: float | None = 1.0,
) -> TaskStats:
    """Build :class:`TaskStats` from validated multi-task data in one pass.

    Parameters
    ----------
    data : MultiTaskArrays
        Output of :func:`identrep.utils.validation.check_multitask`.
    chunk_size : int
        Rows of ``X`` held in memory at once per task group.
    x_unit, y_unit : float, optional
        Units of the statistics; None: :func:`power_of_two_unit` of X and y (exact,
        finite for any float64 magnitude).

    Returns
    -------
    TaskStats
    """
    T, p = data.n_tasks, data.X.shape[1]
    if x_unit is None:
        x_unit = power_of_two_unit(data.X, chunk_size)
    if y_unit is None:
        y_unit = power_of_two_unit(data.y, chunk_size)
    order = np.argsort(data.task_ids, kind="stable")
    counts = data.counts()
    bounds = np.concatenate([[0], np.cumsum(counts)])
    n = counts.astype(float)
    x_mean = np.empty((T, p))
    y_mean = np.empty(T)
    Sxx = np.empty((T, p, p))
    sxy = np.empty((T, p))
    syy = np.empty(T)

    # group tasks observed on identical rows (wide data): x-statistics computed once
    groups: dict[bytes, list[int]] = {}
    task_rows = []
    for t in range(T):
        idx = order[bounds[t] : bounds[t + 1]]
        r = data.rows[idx]
        # long rows are distinct per task; wide tasks may share their rows
        key = t.to_bytes(8, "little") if data.layout == "long" else r.tobytes()
        groups.setdefault(key, []).append(t)
        task_rows.append((idx, r))
    for tasks in groups.values():
        idx0, r0 = task_rows[tasks[0]]
        if len(tasks) == 1:
            Yg = data.y[idx0][:, None]
        else:
            Yg = np.stack([data.y[task_rows[t][0]] for t in tasks], axis=1)
        _, mx, my, Mxx, Mxy, myy = _group_stats(
            data.X, r0, Yg, chunk_size, x_unit, y_unit
        )
        for j, t in enumerate(tasks):
            x_mean[t], y_mean[t] = mx, my[j]
            Sxx[t], sxy[t], syy[t] = Mxx, Mxy[:, j], myy[j]
    Sxx = 0.5 * (Sxx + Sxx.transpose(0, 2, 1))
    return TaskStats(
        n=n,
        x_mean=x_mean,
        y_mean=y_mean,
        Sxx=Sxx,
        sxy=sxy,
        syy=syy,
        x_unit=float(x_unit),
        y_unit=float(y_unit),
    )


def data_units(stats: TaskStats) -> TaskStats:
    """``stats`` in units learned from the data: x in its pooled within-task
    residual RMS, sqrt(tr(R) / p) with R the sample-weighted mean over tasks of the
    covariance of x given y, and y in its pooled within-task RMS.

    Rescaling or shifting X or y by any factor changes these units by the same
    factor, so statistics in them (and everything fitted from them) are unit-free.
    """
    p = stats.Sxx.shape[1]
    sx = np.sqrt(max(float(np.trace(stats.pooled_residual_covariance())) / p, 0.0))
    sy = np.sqrt(float(stats.syy.sum() / stats.n.sum()))
    sx = sx if sx > 0 else 1.0  # X constant within tasks: reported by the fit
    sy = sy if sy > 0 else 1.0
    return stats.in_units(stats.x_unit * sx, stats.y_unit * sy)
