"""TaskIdentifiable: the two-stage method of Chen et al. (2024), MTRN then MTLCM."""

from __future__ import annotations

import time
from numbers import Integral, Real

import numpy as np

from identrep._typing import ArrayLike, Seed
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models._base import IdentrepEstimator, TaskTargetsMixin
from identrep.models.multitask.mtlcm import MTLCM, causal_sets_of
from identrep.models.multitask.mtrn import MTRN
from identrep.training.progress import Progress
from identrep.utils._param_validation import Interval
from identrep.utils.numerics import CAUSAL_THRESHOLD, safe_scale
from identrep.utils.seeding import check_random_state
from identrep.utils.validation import check_multitask, check_n_latents

__all__ = ["TaskIdentifiable"]

# relative singular-value floor of the standardised features: MTLCM's start needs
# eigenvalues of their covariance above 1e-12 of the largest (``jd_init``)
_RANK_RTOL = 1e-6


def _check_feature_rank(F: np.ndarray, n_latents: int) -> None:
    """Stage-1 features of rank below n_latents: say so, and why, before stage 2.

    The features are a linear map of MTRN's last hidden layer, so their rank is at
    most its number of live units; ReLU units that are zero on every sample (dead)
    do not count. Stage 2 cannot recover n_latents latents from fewer dimensions.
    """
    Fc = F - F.mean(axis=0)
    ev = np.linalg.eigvalsh(Fc.T @ Fc)
    s = np.sqrt(np.clip(ev, 0.0, None))[::-1]
    rank = int((s > _RANK_RTOL * s[0]).sum()) if s[0] > 0 else 0
    if rank < n_latents:
        raise DataError(
            f"TaskIdentifiable: the stage-1 (MTRN) features have rank {rank}, fewer "
            f"than n_latents={n_latents}, so stage 2 (MTLCM) would be singular. The "
            "features are a linear map of MTRN's last hidden layer, whose dead "
            "ReLU units (zero on every sample) add no dimension: widen "
            "mtrn_params['hidden_sizes'] (e.g. to 2 n_latents) or lower n_latents."
        )


def stage_seeds(random_state) -> tuple[int, int]:
    """The seeds :class:`TaskIdentifiable` gives its MTRN and its MTLCM, drawn
    from ``random_state`` (so a fit's stages can be refitted on their own)."""
    rng = check_random_state(random_state)
    seed1, seed2 = (int(s) for s in rng.integers(0, 2**32 - 1, size=2))
    return seed1, seed2


# set by TaskIdentifiable itself, never through the stage parameter dicts
_RESERVED = {
    "mtrn_params": ("n_latents", "random_state"),
    "mtlcm_params": ("n_latents", "sigma_obs", "random_state"),
}


def _sub_params(params, name: str, cls: type) -> dict:
    """The keyword arguments of one stage, checked: no reserved or unknown names."""
    params = dict(params or {})
    clash = sorted(set(params) & set(_RESERVED[name]))
    if clash:
        raise InvalidParameterError(
            f"{name} must not set {clash}: pass "
            + ", ".join(f"{k}=..." for k in clash)
            + " to TaskIdentifiable itself."
        )
    unknown = sorted(set(params) - set(cls().get_params(deep=False)))
    if unknown:
        raise InvalidParameterError(
            f"{name} has unknown {cls.__name__} parameter(s) {unknown}; valid: "
            f"{sorted(set(cls().get_params(deep=False)) - set(_RESERVED[name]))}."
        )
    return params


class TaskIdentifiable(TaskTargetsMixin, IdentrepEstimator):
    """Identifiable latents from multi-task data: MTRN features, then MTLCM.

    Stage 1 fits an :class:`~identrep.MTRN`, whose features h(x) equal
    the true latents up to an invertible linear map (Chen et al., 2024, Corollary
    3.3). The features are standardised (pooled mean and std of every coordinate
    over the training rows). Stage 2 fits an :class:`~identrep.MTLCM`
    with ``sigma_obs=1e-4`` on the standardised features with the same targets and
    task layout; its causal/spurious structure resolves the linear map up to
    permutation and scaling. ``transform`` composes the two.

    Parameters
    ----------
    n_latents : int, default=10
        Latent dimension d (the MTRN feature dimension and the MTLCM latent dim).
    mtrn_params : dict, optional
        Keyword arguments of :class:`MTRN` (not ``n_latents``/``random_state``).
    mtlcm_params : dict, optional
        Keyword arguments of :class:`MTLCM` (not ``n_latents``, ``sigma_obs`` or
        ``random_state``).
    sigma_obs : float, default=1e-4
        MTLCM observation-noise std on the standardised features (the paper's value
        for stage-1 features).
    random_state : int, Generator or None
        Seeds both stages (two derived seeds).
    verbose : bool, default=False
        Progress output of both stages.

    Attributes
    ----------
    mtrn_ : MTRN
        Fitted stage 1.
    mtlcm_ : MTLCM
        Fitted stage 2 (on standardised stage-1 features).
    feature_mean_, feature_scale_ : ndarray of shape (n_latents,)
        Standardisation of the stage-1 features.
    causal_indicators_ : ndarray of shape (n_tasks, n_latents)
        ``mtlcm_.causal_indicators_``.
    causal_mask_ : ndarray of shape (n_tasks, n_latents), bool
    spurious_coefs_ : ndarray of shape (n_tasks, n_latents)
    tasks_ : ndarray of shape (n_tasks,)
    n_latents_ : int
        Output width of ``transform``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of ``X`` in fit, when it was a DataFrame with string names.
    fit_seconds_ : float

    Examples
    --------
    >>> import identrep as ir
    >>> data = ir.datasets.make_nonlinear_tasks(n_tasks=30, n_samples=50,
    ...     n_latents=3, n_causal=1, n_observed=8, random_state=0)
    >>> pipe = ir.TaskIdentifiable(n_latents=3, mtrn_params={"max_epochs": 5},
    ...                            random_state=0)
    >>> pipe.fit(data.X, data.y, task_ids=data.task_ids).transform(data.X).shape
    (1500, 3)
    """

    _parameter_constraints: dict = {
        "n_latents": [Interval(Integral, 1, None, closed="left")],
        "mtrn_params": [dict, None],
        "mtlcm_params": [dict, None],
        "sigma_obs": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "verbose": ["boolean"],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        mtrn_params: dict | None = None,
        mtlcm_params: dict | None = None,
        sigma_obs: float = 1e-4,
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.mtrn_params = mtrn_params
        self.mtlcm_params = mtlcm_params
        self.sigma_obs = sigma_obs
        self.random_state = random_state
        self.verbose = verbose

    def _check_param_combinations(self) -> None:
        """The stage dicts set no reserved or unknown parameter, and each stage's
        hyperparameters meet its own constraints (checked before any data)."""
        for name, cls, own in (
            ("mtrn_params", MTRN, {"n_latents": self.n_latents}),
            ("mtlcm_params", MTLCM, {"sigma_obs": self.sigma_obs}),
        ):
            kw = _sub_params(getattr(self, name), name, cls)
            cls(**own, **kw)._validate_params()

    def fit(self, X: ArrayLike, y: ArrayLike, *, task_ids: ArrayLike | None = None):
        """Fit MTRN, standardise its features, fit MTLCM on them.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Long layout with ``task_ids``, or wide layout (NaN = unobserved).
        task_ids : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        t_start = time.perf_counter()
        self._validate_params()
        self._check_fit_input(X, min_samples=2)
        self._check_y_given(y)
        # before stage 1: every task has 2 observations and a varying target,
        # and n_latents fits the inputs, the tasks and stage 2's rank
        data = check_multitask(X, y, task_ids, min_samples=2, check_constant=True)
        check_n_latents(
            self.n_latents,
            n_features=data.X.shape[1],
            n_tasks=data.n_tasks,
            n_obs=data.n_obs,
            owner="TaskIdentifiable",
            warn=False,  # MTRN warns about the tasks
        )
        mtrn_kw = _sub_params(self.mtrn_params, "mtrn_params", MTRN)
        mtlcm_kw = _sub_params(self.mtlcm_params, "mtlcm_params", MTLCM)
        mtrn_kw.setdefault("verbose", self.verbose)
        mtlcm_kw.setdefault("verbose", self.verbose)
        seed1, seed2 = stage_seeds(self.random_state)

        stages = Progress(2, "TaskIdentifiable", enabled=self.verbose, unit="stage")
        stages.write("TaskIdentifiable: stage 1 of 2, MTRN (the representation)")
        mtrn = MTRN(n_latents=self.n_latents, random_state=seed1, **mtrn_kw)
        mtrn.fit(X, y, task_ids=task_ids)
        stages.update(MTRN=f"{mtrn.fit_seconds_:.1f} s")
        stages.write("TaskIdentifiable: stage 2 of 2, MTLCM (latents, causal maps)")
        F = mtrn.transform(X)
        mean = F.mean(axis=0)
        scale = safe_scale(F.std(axis=0), mean)
        _check_feature_rank((F - mean) / scale, F.shape[1])
        mtlcm = MTLCM(
            n_latents=self.n_latents,
            sigma_obs=self.sigma_obs,
            random_state=seed2,
            **mtlcm_kw,
        )
        mtlcm.fit((F - mean) / scale, y, task_ids=task_ids)
        stages.update(
            MTRN=f"{mtrn.fit_seconds_:.1f} s", MTLCM=f"{mtlcm.fit_seconds_:.1f} s"
        )
        stages.close()

        self.mtrn_, self.mtlcm_ = mtrn, mtlcm
        self.feature_mean_, self.feature_scale_ = mean, scale
        self.causal_indicators_ = mtlcm.causal_indicators_
        self.causal_mask_ = mtlcm.causal_mask_
        self.spurious_coefs_ = mtlcm.spurious_coefs_
        self.tasks_ = mtlcm.tasks_
        self.n_latents_ = mtlcm.n_latents_
        self._record_features(X, mtrn.n_features_in_)
        self.fit_seconds_ = time.perf_counter() - t_start
        return self

    def features(self, X: ArrayLike) -> np.ndarray:
        """Standardised stage-1 (MTRN) features, the input of stage 2.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_latents)
        """
        X = self._check_X(X)
        return (self.mtrn_._features(X) - self.feature_mean_) / self.feature_scale_

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Recovered latents: MTLCM unmixing of the standardised MTRN features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_latents)
        """
        F = self.features(X)  # checks fitted state and X first
        return self.mtlcm_.transform(F)

    def predict(self, X: ArrayLike, task_ids: ArrayLike | None = None) -> np.ndarray:
        """Stage-1 predictions of the targets (see :meth:`MTRN.predict`)."""
        self._check_fitted()
        return self.mtrn_.predict(X, task_ids)

    def causal_sets(self, threshold: float = CAUSAL_THRESHOLD) -> dict:
        """Binarised causal set of every task (see :meth:`MTLCM.causal_sets`):
        ``{task label: [latent indices]}`` in plain Python types."""
        self._check_fitted()
        return causal_sets_of(self.tasks_, self.causal_indicators_, threshold)
