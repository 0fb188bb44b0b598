"""Inner-ridge multi-task learning followed by ICA (Ahuja et al., 2022).

The baseline of Lachapelle et al. (2023): learn a representation with per-task
ridge heads solved in closed form on each batch (:class:`~identrep.MTRN` with
``heads="ridge"``), which identifies the latents up to an invertible linear map,
then resolve the map with FastICA. ICA assumes independent non-Gaussian latents;
with correlated latents it cannot undo the linear map, which is the point of the
comparison.
"""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.decomposition import FastICA

from identrep._typing import ArrayLike, Seed
from identrep.models.multitask.mtrn import MTRN
from identrep.utils._param_validation import Interval, StrOptions
from identrep.utils.seeding import check_random_state

__all__ = ["RidgeICA"]

_SHARED = {
    k: v
    for k, v in MTRN._parameter_constraints.items()
    if k not in ("heads", "l1_reg", "refit_heads", "loss", "max_time", "checkpoint")
}


class RidgeICA(MTRN):
    """MTRN with inner-ridge heads, then FastICA on the learned features.

    Parameters
    ----------
    n_latents : int, default=10
    ridge_alpha : float, default=1e-3
        Ridge penalty of the heads, relative to the per-sample squared error.
    ica_fun : {"logcosh", "exp", "cube"}, default="logcosh"
        FastICA's contrast (the authors: logcosh, unit-variance whitening).
    ica_max_iter : int, default=1000
    ica_tol : float, default=1e-4
    hidden_sizes, activation, extractor, standardize_targets, standardize_inputs,
    lr, lr_schedule, batch_size, max_epochs, patience, val_fraction, grad_clip,
    weight_decay, device, dtype, random_state, verbose
        As in :class:`~identrep.MTRN` (defaults as :class:`~identrep.BilevelSparseMTL`
        so the two compare like for like).

    Attributes
    ----------
    ica_ : sklearn.decomposition.FastICA
        Fitted on the MTRN features of the training inputs.
    head_weights_, head_bias_, module_, history_, n_latents_, n_features_in_,
    feature_names_in_
        As in :class:`~identrep.MTRN` (heads on the features before ICA).

    References
    ----------
    K. Ahuja, D. Mahajan, V. Syrgkanis, I. Mitliagkas (2022). Towards efficient
    representation identification in supervised learning. CLeaR.
    """

    heads = "ridge"
    loss = "squared"  # regression only
    l1_reg = 0.3  # not used by ridge heads
    refit_heads = False

    _parameter_constraints: dict = {
        **_SHARED,
        "ica_fun": [StrOptions({"logcosh", "exp", "cube"})],
        "ica_max_iter": [Interval(Integral, 1, None, closed="left")],
        "ica_tol": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        n_latents: int = 10,
        *,
        hidden_sizes: tuple[int, ...] | None = None,
        activation: str = "leaky_relu",
        extractor=None,
        ridge_alpha: float = 1e-3,
        ica_fun: str = "logcosh",
        ica_max_iter: int = 1000,
        ica_tol: float = 1e-4,
        standardize_targets: bool | str = "pooled",
        standardize_inputs: bool | None = None,
        lr: float = 1e-3,
        lr_schedule: str | None = None,
        batch_size: int = 400,
        max_epochs: int = 100,
        patience: int | None = None,
        val_fraction: float = 0.0,
        grad_clip: float | None = None,
        weight_decay: float = 0.0,
        device: str = "cpu",
        dtype: str = "float32",
        random_state: Seed = None,
        verbose: bool = False,
    ):
        self.n_latents = n_latents
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.extractor = extractor
        self.ridge_alpha = ridge_alpha
        self.ica_fun = ica_fun
        self.ica_max_iter = ica_max_iter
        self.ica_tol = ica_tol
        self.standardize_targets = standardize_targets
        self.standardize_inputs = standardize_inputs
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.val_fraction = val_fraction
        self.grad_clip = grad_clip
        self.weight_decay = weight_decay
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X: ArrayLike, y: ArrayLike, *, task_ids: ArrayLike | None = None):
        """Fit MTRN with ridge heads, then FastICA on its training features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
        task_ids : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        super().fit(X, y, task_ids=task_ids)
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        F = super().transform(X)
        self.ica_ = FastICA(
            n_components=int(self.n_latents),
            fun=self.ica_fun,
            whiten="unit-variance",
            max_iter=int(self.ica_max_iter),
            tol=float(self.ica_tol),
            random_state=seed,
        ).fit(F)
        return self

    def transform(self, X: ArrayLike):
        """The ICA-unmixed learned features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_latents), float64
        """
        F = super().transform(X)  # checks fitted and X first
        return self.ica_.transform(F)
