"""Non-negative matrix factorisation (scikit-learn's) behind the estimator contract.

``X ~ W H`` with ``W >= 0`` (n_samples, n_latents) the representation and ``H >= 0``
(n_latents, n_features) the loadings. A held-out likelihood needs a noise model,
which NMF does not have; two are offered (``likelihood``):

* ``"gaussian"``: ``x_j ~ N((w H)_j, s_j^2)`` with ``s_j^2`` the per-feature mean
  squared residual on the training data (the maximum-likelihood noise variance);
* ``"multinomial"``: each row of ``W H`` normalised to probabilities over the
  features (bag of words, ratings as counts); the NLL of the counts under them.

``w`` of a held-out row is ``transform(x)`` (NMF's own fit of W with H fixed), so
the held-out NLL is a reconstruction NLL, as the VAEs' (the model sees the row).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from identrep._typing import Seed
from identrep.exceptions import InvalidParameterError
from identrep.metrics import reconstruction_nll
from identrep.models.decomposition._base import NonNegativeDecomposition
from identrep.utils._param_validation import Interval, StrOptions

__all__ = ["NMF"]

_VAR_FLOOR = 1e-8  # relative to the mean square of X


class NMF(NonNegativeDecomposition):
    """Non-negative matrix factorisation ``X ~ W H`` (``sklearn.decomposition.NMF``).

    Parameters
    ----------
    n_latents : int, default=10
        Rank (``n_components``).
    likelihood : {"gaussian", "multinomial"}, default="gaussian"
        Noise model of :meth:`heldout_nll` (see the module docstring); does not
        change the fit.
    init : {"random", "nndsvd", "nndsvda", "nndsvdar"} or None, default=None
        As scikit-learn (None: "nndsvda" when ``n_latents <= min(X.shape)``, else
        "random").
    solver : {"cd", "mu"}, default="cd"
    beta_loss : {"frobenius", "kullback-leibler"}, default="frobenius"
        ("kullback-leibler" needs ``solver="mu"``.)
    alpha_W : float, default=0.0
        Regularisation of W (scaled by n_features in scikit-learn >= 1.0). The
        Sparse VAE paper used scikit-learn's former ``alpha=1.0`` (unscaled, on
        both factors).
    alpha_H : float or "same", default="same"
    l1_ratio : float in [0, 1], default=0.0
        0: L2 penalty, 1: L1.
    max_iter : int, default=200
    tol : float, default=1e-4
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    model_ : sklearn.decomposition.NMF
    components_ : ndarray of shape (n_latents, n_features_in_)
        H.
    noise_var_ : ndarray of shape (n_features_in_,)
        Mean squared training residual per feature (floored).
    reconstruction_err_ : float
        Frobenius norm of the training residual (scikit-learn's).
    n_iter_ : int
    n_latents_, n_features_in_, feature_names_in_

    Examples
    --------
    >>> X = np.random.default_rng(0).uniform(size=(50, 6))
    >>> m = NMF(n_latents=2, random_state=0).fit(X)
    >>> m.transform(X).shape, m.components_.shape
    ((50, 2), (2, 6))
    """

    _parameter_constraints: dict[str, list] = {
        "n_latents": [Interval(Integral, 1, None, closed="left")],
        "likelihood": [StrOptions({"gaussian", "multinomial"})],
        "init": [StrOptions({"random", "nndsvd", "nndsvda", "nndsvdar"}), None],
        "solver": [StrOptions({"cd", "mu"})],
        "beta_loss": [StrOptions({"frobenius", "kullback-leibler"})],
        "alpha_W": [Interval(Real, 0, None, closed="left")],
        "alpha_H": [Interval(Real, 0, None, closed="left"), StrOptions({"same"})],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        likelihood: str = "gaussian",
        init: str | None = None,
        solver: str = "cd",
        beta_loss: str = "frobenius",
        alpha_W: float = 0.0,
        alpha_H: float | str = "same",
        l1_ratio: float = 0.0,
        max_iter: int = 200,
        tol: float = 1e-4,
        random_state: Seed = None,
    ):
        self.n_latents = n_latents
        self.likelihood = likelihood
        self.init = init
        self.solver = solver
        self.beta_loss = beta_loss
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.l1_ratio = l1_ratio
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_param_combinations(self) -> None:
        if self.beta_loss == "kullback-leibler" and self.solver != "mu":
            raise InvalidParameterError(
                "The 'beta_loss' parameter of NMF can be 'kullback-leibler' only "
                f"with solver='mu'; got solver={self.solver!r}."
            )

    def fit(self, X, y=None, *, task_ids=None):
        """Factorise ``X``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features), >= 0
        y, task_ids : ignored
            Accepted for the shared contract (``fit(X, y, task_ids=...)``).

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A hyperparameter outside its declared constraints.
        DataError
            Negative or non-finite values.
        """
        from sklearn.decomposition import NMF as _SkNMF

        self._validate_params()
        Xs = self._check_fit_X(X)
        seed = self._sklearn_seed()
        model = _SkNMF(
            n_components=int(self.n_latents),
            init=self.init,
            solver=self.solver,
            beta_loss=self.beta_loss,
            alpha_W=float(self.alpha_W),
            alpha_H=self.alpha_H,
            l1_ratio=float(self.l1_ratio),
            max_iter=int(self.max_iter),
            tol=float(self.tol),
            random_state=seed,
        )
        W = model.fit_transform(Xs)
        self.model_ = model
        self.components_ = model.components_.astype(np.float64)
        Xd = Xs.toarray() if sp.issparse(Xs) else Xs
        floor = _VAR_FLOOR * float(np.mean(Xd**2)) + 1e-300
        self.noise_var_ = np.maximum(((Xd - W @ self.components_) ** 2).mean(0), floor)
        self.reconstruction_err_ = float(model.reconstruction_err_)
        self.n_iter_ = int(model.n_iter_)
        self.n_latents_ = int(self.n_latents)
        self._record_features(X, Xs.shape[1])
        return self

    def transform(self, X) -> np.ndarray:
        """W of ``X`` with the loadings H fixed: ndarray of shape (n_samples,
        n_latents)."""
        return super().transform(X)

    def reconstruct(self, X) -> np.ndarray:
        """``transform(X) @ components_``: ndarray of shape (n_samples,
        n_features)."""
        return self.transform(X) @ self.components_

    def heldout_nll(self, X, *, per_row: bool = False) -> float | np.ndarray:
        """Reconstruction NLL of ``X`` in nats per row under ``likelihood``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features_in_)
        per_row : bool, default=False

        Returns
        -------
        float, or ndarray of shape (n_samples,)
        """
        Xs = self._check_transform_X(X)
        Xd = Xs.toarray() if sp.issparse(Xs) else Xs
        R = np.asarray(self.model_.transform(Xs), dtype=np.float64) @ self.components_
        if self.likelihood == "gaussian":
            return reconstruction_nll(Xd, R, var=self.noise_var_, per_row=per_row)
        R = np.maximum(R, 0.0) + 1e-10
        P = R / R.sum(axis=1, keepdims=True)
        return reconstruction_nll(Xd, P, likelihood="multinomial", per_row=per_row)
