"""MTLCM: the multi-task linear causal model (stage 2 of Chen et al., 2024)."""

from __future__ import annotations

import time
import warnings
from numbers import Integral, Real

import numpy as np
import torch

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import ConvergenceWarning, DataError, InvalidParameterError
from identrep.models._base import IdentrepEstimator, TaskTargetsMixin
from identrep.models.multitask._likelihoods import mtlcm_nll
from identrep.models.multitask._mtlcm_select import base_seed, select_sigma_s
from identrep.models.multitask._mtlcm_solver import (
    jd_init,
    preconditioner,
    random_init,
    refine,
    stats_to_torch,
)
from identrep.models.multitask._stats import data_units, task_statistics
from identrep.models.multitask._stream_stats import (
    StatisticsAccumulator,
    array_statistics,
    dask_task_statistics,
    is_dask_collection,
    wide_statistics,
)
from identrep.utils._param_validation import (
    Interval,
    SequenceOf,
    StrOptions,
)
from identrep.utils.numerics import CAUSAL_THRESHOLD, causal_mask
from identrep.utils.seeding import check_random_state
from identrep.utils.threads import fit_threads
from identrep.utils.torch import resolve_device
from identrep.utils.validation import check_multitask, check_task_ids

__all__ = ["MTLCM", "causal_sets_of"]

_GAMMA_FLOOR = 1e-6  # 1 - c floor when reporting gamma = m / (1 - c)


def _plain(label):
    """A task label as a plain Python value (numpy scalars -> int/str/float)."""
    return label.item() if isinstance(label, np.generic) else label


def _check_streamed(stats, tasks) -> None:
    """Tasks with fewer than 2 samples or a constant target, from the statistics."""
    few = np.flatnonzero(stats.n < 2)
    if few.size:
        lab, k = _plain(tasks[few[0]]), int(stats.n[few[0]])
        raise DataError(
            f"Every task needs at least 2 observed samples; task {lab!r} has {k}. "
            "Drop such tasks or gather more samples."
        )
    const = np.flatnonzero(stats.syy <= 1e-24 * stats.n * (stats.y_mean**2 + 1e-300))
    if const.size:
        k = const[0]
        raise DataError(
            f"The target of task {_plain(tasks[k])} is constant (value "
            f"{stats.y_mean[k] * stats.y_unit:.6g}"
            + (f"; {const.size} such tasks" if const.size > 1 else "")
            + "); a constant target carries no information about the latents. "
            "Drop the task."
        )


def causal_sets_of(
    tasks: np.ndarray, indicators: np.ndarray, threshold: float = CAUSAL_THRESHOLD
) -> dict:
    """``{task label: [latent indices]}`` with ``indicators >= threshold``, in plain
    Python types (labels as int/str, indices as int)."""
    mask = causal_mask(indicators, threshold)
    return {
        _plain(lab): [int(j) for j in np.flatnonzero(row)]
        for lab, row in zip(tasks, mask, strict=True)
    }


class MTLCM(TaskTargetsMixin, IdentrepEstimator):
    """Multi-task linear causal model fitted by exact maximum marginal likelihood.

    Each task t has causal indicators c_t in [0, 1]^d and spurious coefficients
    gamma_t. Given the target y of task t the latents are independent,

        z_j | y, t ~ N( y (1 - c_tj) gamma_tj,  c_tj + (1 - c_tj) sigma_s^2 ),

    (causal factors N(0, 1), spurious factors gamma y plus small noise) and the
    observation is x = A z + a_t + N(0, (sigma_obs x_scale)^2 I), with x_scale the
    pooled within-task residual RMS of X learned from the data (``x_scale_``).
    Marginalising z gives x | y, t ~ N(a_t + A m_t y, A V_t A^T + s^2 I) with
    s = sigma_obs x_scale, whose likelihood depends on the data only through
    per-task sufficient statistics. The task intercepts a_t are profiled out by
    centring x and y within each task.

    Fitting: one streaming pass builds the statistics; each restart initialises A by
    approximate joint diagonalisation of the per-task residual covariances (Pham's
    criterion), then L-BFGS-B refines (A, c) on the exact likelihood in float64 with
    c boxed in [0, 1] (the closure of the paper's sigmoid parameterisation, so
    indicators can reach 0 and 1 exactly) and the slopes m_t = (1 - c_t) gamma_t
    profiled out in closed form (generalised least squares). The restart with the
    highest likelihood is kept (never chosen by ground truth).

    Units: the fit runs on X / x_scale and y / y_scale (``y_scale_``, the pooled
    within-task RMS of y), so rescaling or shifting X and y by any factor a float64
    holds changes only the returned scales (``mixing_``, ``target_slopes_``,
    ``x_mean_``, ``noise_std_``, the log-likelihood's log-Jacobian), not the latents,
    the indicators or the causal sets.

    Parameters
    ----------
    n_latents : int, optional
        Latent dimension d; defaults to the number of features p (must be <= p).
    sigma_s : float in (0, 1) or "auto", default=0.1
        Standard deviation of spurious latents around gamma y (paper: 0.1).
        "auto": chosen from ``sigma_s_grid`` by held-out likelihood. Each candidate
        is fitted on a seeded 80 % of every task's observations (every task needs
        at least 3) and scored by :meth:`score` on the other 20 %. The best is
        refitted on all rows (``sigma_s_``, ``sigma_s_scores_``). It costs one fit
        per candidate on 80 % of the data plus the refit; with an int
        ``random_state`` the refit equals ``MTLCM(sigma_s=sigma_s_)`` with that
        seed. At the paper's 0.1 the likelihood stretches the recovered latents
        (1.4-1.9x the true scale at d >= 10 on Chen et al.'s Table 1), so spurious
        latents are called causal; see docs/results/chen2024_indicators.md for
        what "auto" chose there. Long and wide layouts; not with ``fit_chunks``
        or Dask input (pass a number there).
    sigma_s_grid : sequence of float in (0, 1), default=(0.1, 0.03, 0.01)
        The candidates of ``sigma_s="auto"`` (distinct values; ignored otherwise).
    sigma_obs : float, default=0.01
        Observation-noise standard deviation *relative to* ``x_scale_``, the pooled
        within-task residual RMS of X (after regressing each task's X on its y);
        the noise in X's own units is ``noise_std_``. Paper: 0.01 on observations,
        1e-4 on stage-1 features.
    gamma_bound : float or None, default=None
        None: the slopes m_t of E[z | y, t] are free (profiled in closed form), so
        a latent at c = 1 may still move with y. A number B: the paper's coupling
        m_t = (1 - c_t) gamma_t with |gamma_tj| <= B (in units of the pooled
        within-task RMS of y per latent unit), so a causal latent is independent
        of y within its task. Comparison: docs/results/chen2024_indicators.md.
    init : {"jd", "random"}, default="jd"
        Joint-diagonalisation start, or the reference code's random start (kept for
        comparisons; it reaches poorer local optima).
    n_init : int, default=1
        Number of restarts; restart 0 of "jd" starts the diagonaliser at the
        identity, later ones at random orthogonal matrices.
    max_iter : int, default=3000
        L-BFGS iterations per restart.
    tol : float, default=1e-10
        Relative tolerance on the mean negative log-likelihood.
    chunk_size : int, default=65536
        Rows per chunk when building the sufficient statistics.
    device : str, default="cpu"
        Torch device for the likelihood ("cuda", or "auto" for CUDA when present).
    random_state : int, Generator or None
        Seed for restarts and random initialisation.
    verbose : bool, default=False
        Print one line per restart.

    Attributes
    ----------
    mixing_ : ndarray of shape (n_features, n_latents)
        Estimated mixing matrix A (columns canonicalised to a positive largest entry).
    unmixing_ : ndarray of shape (n_latents, n_features)
        Pseudo-inverse of ``mixing_``; ``transform(X) = X @ unmixing_.T``.
    causal_indicators_ : ndarray of shape (n_tasks, n_latents)
        c_t in [0, 1]: probability-like weight that latent j causes task t's target.
    causal_mask_ : ndarray of shape (n_tasks, n_latents), bool
        ``causal_indicators_ >= 0.5`` (:func:`identrep.utils.numerics.causal_mask`).
    spurious_coefs_ : ndarray of shape (n_tasks, n_latents)
        gamma_t = m_t / (1 - c_t) (with 1 - c floored at 1e-6); meaningful where the
        indicator is small.
    target_slopes_ : ndarray of shape (n_tasks, n_latents)
        m_t = (1 - c_t) gamma_t, the slope of E[z | y, t] on y.
    log_likelihood_ : float
        Mean log-likelihood per observation at the optimum (intercepts profiled), a
        density of X in its own units.
    x_scale_ : float
        Pooled within-task residual RMS of X, sqrt(tr(R) / p) with R the
        sample-weighted mean over tasks of the covariance of x given y: the unit
        ``sigma_obs`` is relative to.
    y_scale_ : float
        Pooled within-task RMS of y (the unit of the internal slopes).
    noise_std_ : float
        ``sigma_obs * x_scale_``, the observation-noise standard deviation in the
        units of X.
    sigma_s_ : float
        The sigma_s of the fit: ``sigma_s`` itself, or the candidate "auto" chose.
    sigma_s_scores_ : ndarray of shape (len(sigma_s_grid),) or None
        With ``sigma_s="auto"``: the held-out mean log-likelihood per observation
        of each candidate, in the order of ``sigma_s_grid`` (``sigma_s_`` has the
        highest; ties go to the earlier candidate). None otherwise.
    restart_log_likelihoods_ : list of float
        Final mean log-likelihood of each restart.
    n_iter_ : int
        L-BFGS iterations of the kept restart.
    converged_ : bool
        Whether the kept restart met the tolerance.
    tasks_ : ndarray of shape (n_tasks,)
        Task labels seen in fit (sorted ids, or wide-format column names).
    x_mean_ : ndarray of shape (n_tasks, n_features)
    y_mean_ : ndarray of shape (n_tasks,)
        Per-task means used for centring (they define the intercepts).
    n_latents_ : int
        Output width of ``transform``.
    n_tasks_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of ``X`` in fit, when it was a DataFrame with string names.
    fit_seconds_ : float
        Wall time of the last fit.

    References
    ----------
    W. Chen, J. Horwood, J. Heo, J. M. Hernandez-Lobato (2024). Leveraging task
    structures for improved identifiability in neural network representations. TMLR.

    Examples
    --------
    >>> import identrep as ir
    >>> data = ir.datasets.make_linear_tasks(n_tasks=50, n_samples=100, n_latents=4,
    ...                                      random_state=0)
    >>> m = ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    >>> round(ir.metrics.mcc(data.Z, m.transform(data.X)), 2)
    1.0
    """

    _fitted_attr = "mixing_"
    _parameter_constraints: dict = {
        "n_latents": [Interval(Integral, 1, None, closed="left"), None],
        "sigma_s": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
        "sigma_s_grid": [SequenceOf(Interval(Real, 0, 1, closed="neither"))],
        "sigma_obs": [Interval(Real, 0, None, closed="neither")],
        "gamma_bound": [Interval(Real, 0, None, closed="neither"), None],
        "init": [StrOptions({"jd", "random"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "chunk_size": [Interval(Integral, 1, None, closed="left")],
        "device": ["device"],
        "random_state": ["random_state"],
        "verbose": ["boolean"],
    }

    def _check_param_combinations(self) -> None:
        grid = [float(s) for s in self.sigma_s_grid]
        if len(set(grid)) != len(grid):
            raise InvalidParameterError(
                "The 'sigma_s_grid' parameter of MTLCM must hold distinct values; "
                f"got {tuple(self.sigma_s_grid)!r}."
            )

    def __init__(
        self,
        n_latents: int | None = None,
        *,
        sigma_s: float | str = 0.1,
        sigma_s_grid: tuple = (0.1, 0.03, 0.01),
        sigma_obs: float = 0.01,
        gamma_bound: float | None = None,
        init: str = "jd",
        n_init: int = 1,
        max_iter: int = 3000,
        tol: float = 1e-10,
        chunk_size: int = 65536,
        device: str = "cpu",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.sigma_s = sigma_s
        self.sigma_s_grid = sigma_s_grid
        self.sigma_obs = sigma_obs
        self.gamma_bound = gamma_bound
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.chunk_size = chunk_size
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # --------------------------------------------------------------------- fit
    def fit(self, X: ArrayLike, y: ArrayLike, *, task_ids: ArrayLike | None = None):
        """Fit by maximum marginal likelihood.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Observations (or standardised stage-1 features).
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Targets: long layout with ``task_ids``, or wide layout (NaN = unobserved).
        task_ids : array-like of shape (n_samples,), optional
            Task label of each sample (long layout).

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A hyperparameter outside its declared constraints (before any data is
            read).
        DataError
            Non-finite values, shape mismatches, a task with fewer than 2 samples, a
            constant target, fewer features than ``n_latents``, or features so
            collinear that the residual covariance is singular.
        """
        # many tiny batched factorisations: one thread unless the user chose
        with fit_threads():
            if is_dask_collection(X):  # statistics on the cluster, the fit here
                t_start = time.perf_counter()
                self._validate_params()
                self._refuse_auto("Dask input")
                stats, tasks = dask_task_statistics(X, y, task_ids)
                return self._fit_statistics(stats, tasks, None, t_start)
            return self._fit(X, y, task_ids)

    def fit_chunks(self, chunks):
        """Fit from long-layout chunks of rows, in one streaming pass.

        Memory is that of one chunk plus O(n_tasks n_features^2): the per-task
        statistics are merged chunk by chunk (rows of a task may be spread over
        any chunks), so a table larger than memory can be fitted, e.g. Parquet row
        groups or CSV chunks through
        :func:`identrep.models.multitask._stream_stats.table_chunks`.

        Parameters
        ----------
        chunks : iterable of (X, y, task_ids)
            Arrays of shapes (rows, n_features), (rows,), (rows,).

        Returns
        -------
        self
        """
        with fit_threads():
            t_start = time.perf_counter()
            self._validate_params()
            self._refuse_auto("fit_chunks")
            acc = StatisticsAccumulator()
            for X, y, t in chunks:
                acc.update(X, y, t)
            stats, tasks = acc.result()
            return self._fit_statistics(stats, tasks, None, t_start)

    def _fit(self, X, y, task_ids):
        t_start = time.perf_counter()
        self._validate_params()
        self._check_fit_input(X, min_samples=2)
        self._check_y_given(y)
        sigma_s, scores, seed = self._choose_sigma_s(X, y, task_ids)
        if task_ids is not None:  # long layout: chunked, no per-row task codes
            stats, tasks = array_statistics(
                X, y, task_ids, chunk_rows=int(self.chunk_size)
            )
            _check_streamed(stats, tasks)
            return self._fit_statistics(stats, tasks, X, t_start, sigma_s, scores, seed)
        if np.ndim(y) != 2:  # the long layout's message: task_ids is required
            check_multitask(X, y, task_ids, min_samples=2)
        # wide layout: chunked, no per-observation indices
        stats, tasks = wide_statistics(X, y, chunk_rows=int(self.chunk_size))
        _check_streamed(stats, tasks)
        return self._fit_statistics(stats, tasks, X, t_start, sigma_s, scores, seed)

    def _refuse_auto(self, where: str) -> None:
        if isinstance(self.sigma_s, str):
            raise InvalidParameterError(
                f"MTLCM(sigma_s='auto') needs the rows in memory to hold some out "
                f"(long or wide arrays); {where} builds statistics only. Pass a "
                "number for sigma_s, e.g. one chosen by sigma_s='auto' on a sample."
            )

    def _choose_sigma_s(self, X, y, task_ids):
        """(sigma_s, held-out scores or None, seed of the fit): ``sigma_s`` as
        given, or the held-out choice of ``sigma_s="auto"``."""
        if not isinstance(self.sigma_s, str):
            return float(self.sigma_s), None, self.random_state
        seed = base_seed(self.random_state)
        params = dict(self.get_params(deep=False), random_state=seed, verbose=False)
        grid = tuple(self.sigma_s_grid)

        def candidate(s):
            return type(self)(**dict(params, sigma_s=s))

        chosen, scores = select_sigma_s(candidate, X, y, task_ids, grid, seed)
        if self.verbose:
            pairs = zip(grid, scores, strict=True)
            shown = ", ".join(f"{s:g}: {v:.4f}" for s, v in pairs)
            print(f"[MTLCM] sigma_s='auto': held-out log-lik {shown}; chose {chosen:g}")
        return chosen, scores, seed

    def _fit_statistics(
        self, stats, tasks, X_raw, t_start, sigma_s=None, scores=None, seed=None
    ):
        """Everything after the statistics (shared by fit, fit_chunks and Dask)."""
        if sigma_s is None:  # fit_chunks and Dask (sigma_s="auto" refused there)
            sigma_s, seed = float(self.sigma_s), self.random_state
        if X_raw is None:  # chunked input: the checks check_multitask does on arrays
            _check_streamed(stats, tasks)
        p = stats.Sxx.shape[1]
        d = p if self.n_latents is None else int(self.n_latents)
        if p < d:
            raise DataError(
                f"MTLCM needs at least n_latents features: the latents are a linear "
                f"map of X. Got X with {p} feature(s) and n_latents={d}; lower "
                "n_latents or supply more features."
            )
        stats = data_units(stats)  # unit-free: see x_scale_, y_scale_
        _, R = stats.residual_covariances()  # shared by every restart's start
        Rbar = np.einsum("t,tij->ij", stats.n / stats.n.sum(), R)
        rng = check_random_state(seed)
        dev = resolve_device(self.device)
        tens = stats_to_torch(stats, dev)
        n_total = float(stats.n.sum())
        # log-density of x in the caller's units: x = x_scale * (unit-free x)
        ll_shift = p * np.log(stats.x_unit)

        best = None
        self.restart_log_likelihoods_ = []
        for r in range(int(self.n_init)):
            if self.init == "jd":
                A0 = jd_init(R, Rbar, stats.n, d, sigma_s, rng, restart=r)
            else:
                A0 = random_init(p, d, rng)
            res = refine(
                A0,
                tens,
                n_total,
                sigma_s,
                self.sigma_obs,
                self.max_iter,
                self.tol,
                dev,
                T=preconditioner(A0, Rbar),
                gamma_bound=self.gamma_bound,
            )
            ll = -res["nll"] - ll_shift
            self.restart_log_likelihoods_.append(ll)
            if self.verbose:
                print(
                    f"[MTLCM] restart {r}: log-likelihood/sample {ll:.6f}, "
                    f"{res['n_iter']} L-BFGS iterations, "
                    f"converged={res['converged']}"
                )
            if best is None or res["nll"] < best["nll"]:
                best = res
        if not best["converged"]:
            warnings.warn(
                f"MTLCM: L-BFGS stopped after {best['n_iter']} iterations without "
                f"meeting tol={self.tol:g} ({best['message']}; largest gradient "
                f"entry {best['grad_max']:.2g}); increase max_iter or n_init "
                "(identrep fit: --max-iter, --n-init).",
                ConvergenceWarning,
                stacklevel=3,  # the caller of fit
            )
        A, c, m = best["A"], best["c"], best["m"]  # unit-free
        # canonical signs: the largest-magnitude entry of each column of A positive
        s = np.sign(A[np.abs(A).argmax(axis=0), np.arange(d)])
        s[s == 0] = 1.0
        A, m = A * s, m * s
        xs, ys = stats.x_unit, stats.y_unit

        self.sigma_s_, self.sigma_s_scores_ = sigma_s, scores
        self.x_scale_, self.y_scale_ = xs, ys
        self.noise_std_ = float(self.sigma_obs) * xs
        self.mixing_ = A * xs
        self.unmixing_ = np.linalg.pinv(A) / xs
        self.causal_indicators_ = c
        self.causal_mask_ = causal_mask(c)
        self.target_slopes_ = m / ys
        self.spurious_coefs_ = self.target_slopes_ / np.maximum(1.0 - c, _GAMMA_FLOOR)
        self.log_likelihood_ = -best["nll"] - ll_shift
        self.n_iter_ = best["n_iter"]
        self.converged_ = best["converged"]
        self.tasks_ = tasks
        self.n_tasks_ = len(tasks)
        self.x_mean_ = stats.x_mean * xs
        self.y_mean_ = stats.y_mean * ys
        self.n_latents_ = d
        self._record_features(X_raw, p)
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    # --------------------------------------------------------------- outputs
    def transform(self, X: ArrayLike) -> np.ndarray:
        """Recovered latents z_hat = A^+ x.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_latents)
        """
        X = self._check_X(X)
        return X @ self.unmixing_.T

    def causal_sets(self, threshold: float = CAUSAL_THRESHOLD) -> dict:
        """Binarised causal set of every task.

        Parameters
        ----------
        threshold : float, default=0.5
            A latent causes a task when its indicator is ``>= threshold``
            (:func:`identrep.utils.numerics.causal_mask`).

        Returns
        -------
        dict
            ``{task label: [latent indices]}`` in the order of ``tasks_``, in plain
            Python types (labels int or str, indices int).
        """
        self._check_fitted()
        return causal_sets_of(self.tasks_, self.causal_indicators_, threshold)

    def task_log_likelihood(self, X, y, *, task_ids=None) -> np.ndarray:
        """Log-likelihood of each task's observations under the fitted model.

        New data are centred at the intercepts learned in fit, so this is a proper
        held-out likelihood. Tasks are matched by label.

        Returns
        -------
        ndarray of shape (n_tasks_in_data,)
            Summed log-likelihood per task, in the order of the data's task labels.
        """
        self._check_fitted()
        self._check_feature_names(X)
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        self._check_X(data.X, check_names=False)
        codes = check_task_ids(data.tasks, data.n_tasks, self.tasks_)
        # in the fit's unit-free coordinates (models saved before x_scale_: units 1)
        xs, ys = getattr(self, "x_scale_", 1.0), getattr(self, "y_scale_", 1.0)
        stats = task_statistics(
            data, chunk_size=int(self.chunk_size), x_unit=xs, y_unit=ys
        ).recentre(self.x_mean_[codes] / xs, self.y_mean_[codes] / ys)
        tens = stats_to_torch(stats, torch.device("cpu"))
        with torch.no_grad():
            nll = mtlcm_nll(
                torch.from_numpy(self.mixing_ / xs),
                torch.from_numpy(self.causal_indicators_[codes]),
                torch.from_numpy(self.target_slopes_[codes] * ys),
                *tens,
                # models saved before sigma_s_ had a numeric sigma_s
                sigma_s=getattr(self, "sigma_s_", self.sigma_s),
                sigma_obs=self.sigma_obs,
            )
        p = self.mixing_.shape[0]
        return -nll.numpy() - stats.n * p * np.log(xs)

    def score(self, X, y, *, task_ids=None) -> float:
        """Mean log-likelihood per observation (exact marginal likelihood).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
        task_ids : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        data = check_multitask(X, y, task_ids, min_samples=1, check_constant=False)
        return float(
            self.task_log_likelihood(X, y, task_ids=task_ids).sum() / data.n_obs
        )
