"""Disentanglement + sparsity = generalisation: regression on frozen representations.

The first experiment of Lachapelle et al. (2023), section 3: a downstream task is
*sparse* when ``y = w^T z + eps`` uses a fraction ``l / m`` of the ``m`` true
factors ``z``. A representation is either *disentangled*, ``P D z`` (a permutation
and an invertible diagonal scaling of the factors), or *entangled*, ``L z`` with
``L`` a random invertible matrix. Either way the best linear predictor is exact
(``w^T L^{-1}`` for ``L z``), but on ``P D z`` it keeps the sparsity of ``w``, so a
lasso learns it from far fewer samples; ``L z`` spreads it over every feature.
Ridge and least squares do not exploit sparsity (and are blind to an orthogonal
``L``).

Everything here is numpy and scikit-learn; the factors are i.i.d. N(0, 1).
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Sequence

import numpy as np

from identrep._typing import Seed
from identrep.utils.seeding import check_random_state

__all__ = [
    "FROZEN_REGRESSORS",
    "FROZEN_REPRESENTATIONS",
    "frozen_representation_experiment",
    "frozen_representation_r2",
    "plot_frozen_representation",
]

FROZEN_REPRESENTATIONS = ("disentangled", "entangled")
FROZEN_REGRESSORS = ("lasso", "ridge", "least_squares")
_MIXINGS = ("random", "orthogonal")
_RIDGE_ALPHAS = np.logspace(-4, 4, 17)


def _representation_map(
    kind: str, m: int, mixing: str, rng: np.random.Generator
) -> np.ndarray:
    """The (m, m) matrix M of the representation ``M z``.

    "disentangled": a permutation times a diagonal with random signs and
    magnitudes in [0.5, 2]; "entangled": N(0, 1/m) entries ("random"), or the
    orthonormal factor of such a matrix ("orthogonal").
    """
    if kind == "disentangled":
        scale = rng.uniform(0.5, 2.0, m) * rng.choice([-1.0, 1.0], m)
        return np.eye(m)[rng.permutation(m)] * scale[:, None]
    G = rng.standard_normal((m, m)) / np.sqrt(m)
    if mixing == "orthogonal":
        U, _, Vt = np.linalg.svd(G)
        return U @ Vt
    return G


def _fit_predict(
    regressor: str, F: np.ndarray, y: np.ndarray, F_test: np.ndarray, cv: int
) -> np.ndarray:
    """Predictions on ``F_test`` of a regressor fitted on (F, y), with an intercept;
    the lasso's and ridge's penalties are chosen on the training samples only
    (K-fold CV for the lasso, efficient leave-one-out for ridge)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoCV, RidgeCV

    if regressor == "least_squares":  # minimum-norm solution when n < m
        mu_f, mu_y = F.mean(axis=0), y.mean()
        coef = np.linalg.lstsq(F - mu_f, y - mu_y, rcond=None)[0]
        return (F_test - mu_f) @ coef + mu_y
    if regressor == "ridge":
        return RidgeCV(alphas=_RIDGE_ALPHAS).fit(F, y).predict(F_test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LassoCV(cv=min(cv, F.shape[0]), alphas=30, max_iter=5000)
        return model.fit(F, y).predict(F_test)


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Out-of-sample R^2 = 1 - SSE / SST (negative when worse than the mean)."""
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def _check_choice(name: str, value: str, options: Sequence[str]) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}; got {value!r}.")


def frozen_representation_r2(
    representation: str,
    regressor: str,
    n_train: int,
    useful_fraction: float,
    *,
    n_features: int = 100,
    n_tasks: int = 20,
    n_test: int = 1000,
    noise_std: float = 0.2,
    mixing: str = "random",
    cv: int = 5,
    random_state: Seed = None,
) -> np.ndarray:
    """Test R^2 of a regressor on a frozen representation, one value per task.

    Each task draws ``round(useful_fraction * n_features)`` (at least 1) useful
    factors uniformly, weights N(0, 1) on them, and ``n_train`` training and
    ``n_test`` test samples ``z ~ N(0, I)``, ``y = w^T z + N(0, noise_std^2)``.
    The representation map (one per call) and the tasks depend on
    ``random_state`` only, never on ``representation`` or ``regressor``: two
    calls with the same seed are a paired comparison on the same tasks.

    Parameters
    ----------
    representation : {"disentangled", "entangled"}
    regressor : {"lasso", "ridge", "least_squares"}
    n_train : int
        Training samples per task (>= 2).
    useful_fraction : float in (0, 1]
        Fraction l / m of the factors a task uses.
    n_features : int, default=100
        Number of factors m (= representation width).
    n_tasks : int, default=20
    n_test : int, default=1000
    noise_std : float, default=0.2
        Target noise. The paper does not state it; 0.2 puts the 5% / n = 25
        lasso numbers nearest the authors' anchor (see the study note).
    mixing : {"random", "orthogonal"}, default="random"
        The entangling map: N(0, 1/m) entries, or a random rotation.
    cv : int, default=5
        Folds of the lasso's penalty selection (at most ``n_train``).
    random_state : int, Generator or None

    Returns
    -------
    ndarray of shape (n_tasks,)
        Test R^2 of every task.

    Raises
    ------
    ValueError
        For an unknown representation, regressor or mixing, or out-of-range sizes.
    """
    _check_choice("representation", representation, FROZEN_REPRESENTATIONS)
    _check_choice("regressor", regressor, FROZEN_REGRESSORS)
    _check_choice("mixing", mixing, _MIXINGS)
    if not 0.0 < useful_fraction <= 1.0:
        raise ValueError(f"useful_fraction must lie in (0, 1]; got {useful_fraction}.")
    if n_train < 2 or n_test < 2 or n_features < 1 or n_tasks < 1 or cv < 2:
        raise ValueError(
            "n_train, n_test and cv must be >= 2, n_features and n_tasks >= 1; got "
            f"n_train={n_train}, n_test={n_test}, cv={cv}, "
            f"n_features={n_features}, n_tasks={n_tasks}."
        )
    rng = check_random_state(random_state)
    m = int(n_features)
    maps = {k: _representation_map(k, m, mixing, rng) for k in FROZEN_REPRESENTATIONS}
    M = maps[representation]
    n_useful = max(1, round(useful_fraction * m))
    out = np.empty(int(n_tasks))
    for t in range(int(n_tasks)):
        w = np.zeros(m)
        w[rng.choice(m, n_useful, replace=False)] = rng.standard_normal(n_useful)
        Z = rng.standard_normal((int(n_train) + int(n_test), m))
        y = Z @ w + noise_std * rng.standard_normal(Z.shape[0])
        F = Z @ M.T
        tr, te = slice(0, int(n_train)), slice(int(n_train), None)
        out[t] = _r2(y[te], _fit_predict(regressor, F[tr], y[tr], F[te], int(cv)))
    return out


def frozen_representation_experiment(
    n_train: Sequence[int] = (10, 25, 50, 100, 200),
    useful_fractions: Sequence[float] = (0.05, 0.2, 0.8),
    *,
    representations: Sequence[str] = FROZEN_REPRESENTATIONS,
    regressors: Sequence[str] = FROZEN_REGRESSORS,
    n_features: int = 100,
    n_tasks: int = 20,
    n_test: int = 1000,
    noise_std: float = 0.2,
    mixing: str = "random",
    cv: int = 5,
    random_state: int = 0,
):
    """Test R^2 against the training-set size for every representation, regressor
    and fraction of useful features.

    Every (useful fraction, n_train) cell uses one seed derived from
    ``random_state`` and the cell, shared by all representations and
    regressors, so the comparison between them is paired.

    Parameters
    ----------
    n_train : sequence of int
    useful_fractions : sequence of float in (0, 1]
    representations, regressors : sequences of str
        Subsets of :data:`FROZEN_REPRESENTATIONS`, :data:`FROZEN_REGRESSORS`.
    n_features, n_tasks, n_test, noise_std, mixing, cv
        As in :func:`frozen_representation_r2`.
    random_state : int

    Returns
    -------
    pandas.DataFrame
        One row per task: ``representation``, ``regressor``, ``useful_fraction``,
        ``n_train``, ``task``, ``test_r2``. The mean test R^2 of each curve is
        ``df.groupby([...])["test_r2"].mean()``.
    """
    import pandas as pd

    from identrep.utils.seeding import derive_seed

    rows = []
    for frac, n in itertools.product(useful_fractions, n_train):
        seed = derive_seed("frozen", int(random_state), float(frac), int(n))
        for rep, reg in itertools.product(representations, regressors):
            r2 = frozen_representation_r2(
                rep,
                reg,
                int(n),
                float(frac),
                n_features=n_features,
                n_tasks=n_tasks,
                n_test=n_test,
                noise_std=noise_std,
                mixing=mixing,
                cv=cv,
                random_state=seed,
            )
            rows += [
                dict(
                    representation=rep,
                    regressor=reg,
                    useful_fraction=float(frac),
                    n_train=int(n),
                    task=t,
                    test_r2=v,
                )
                for t, v in enumerate(r2)
            ]
    return pd.DataFrame(rows)


def plot_frozen_representation(df, path: str | os.PathLike | None = None):
    """Mean test R^2 (with its standard error over tasks) against n_train: one
    panel per fraction of useful features, one colour per regressor, solid for
    the disentangled and dashed for the entangled representation.

    Parameters
    ----------
    df : pandas.DataFrame
        The output of :func:`frozen_representation_experiment`.
    path : str or path, optional
        Where to save the figure (PNG, PDF, ... by suffix).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from identrep.experiments.plots import _pyplot, save_figure

    plt = _pyplot()
    keys = ["useful_fraction", "representation", "regressor", "n_train"]
    g = df.groupby(keys)["test_r2"]
    summ = g.mean().to_frame("mean").join(g.sem(ddof=0).to_frame("sem")).reset_index()
    fracs = sorted(summ["useful_fraction"].unique())
    fig, axes = plt.subplots(
        1, len(fracs), figsize=(4 * len(fracs), 3.3), squeeze=False, sharey=True
    )
    colours = {r: f"C{i}" for i, r in enumerate(dict.fromkeys(summ["regressor"]))}
    for ax, frac in zip(axes[0], fracs, strict=True):
        part = summ[summ["useful_fraction"] == frac]
        for (rep, reg), rows in part.groupby(["representation", "regressor"]):
            rows = rows.sort_values("n_train")
            ax.errorbar(
                rows["n_train"],
                rows["mean"],
                yerr=rows["sem"],
                color=colours[reg],
                ls="-" if rep == "disentangled" else "--",
                marker="o",
                ms=3,
                capsize=2,
                label=f"{rep} + {reg}",
            )
        ax.set_xscale("log")
        ax.set_title(f"useful features l/m = {frac:.0%}")
        ax.set_xlabel("training samples per task n")
        ax.set_ylim(-0.5, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test R$^2$ (mean over tasks)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig
