"""The estimator contract shared by the VAE family (models/vae/_base.py,
_conditional.py): the class hierarchy, device and dtype, fit_transform with the
conditioning, feature names, and what a new VAE-type model has to write."""

from __future__ import annotations

from functools import partial
from numbers import Real

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from torch import nn

from identrep.datasets import make_segment_sources
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models.nn.vae import ConditionalPrior
from identrep.models.vae import IVAE, MTIVAE, VAE, ICaRL, MTICaRL
from identrep.models.vae._base import (
    ARCHITECTURE_CONSTRAINTS,
    TRAINING_CONSTRAINTS,
    BaseVAE,
)
from identrep.models.vae._conditional import ConditionalVAEEstimator
from identrep.models.vae._elbo import gaussian_log_prob, kl_diag_gaussians, vae_pass
from identrep.utils._param_validation import Interval

FAST = dict(n_latents=2, max_epochs=2, batch_size=64, random_state=0)
SMALL = {ICaRL: dict(tnn_hidden=4, lambda_hidden=8), MTICaRL: dict(tnn_hidden=4)}
ALL = [VAE, IVAE, MTIVAE, ICaRL, MTICaRL]


@pytest.fixture(scope="module")
def data():
    return make_segment_sources(
        n_segments=4, n_per_segment=30, n_latents=2, n_observed=3, random_state=0
    )


def _make(cls, **kwargs):
    return cls(**{**FAST, **SMALL.get(cls, {}), **kwargs})


def _cond(est, data):
    """The (y, task_ids) the encoder of ``est`` needs at transform."""
    y = data.y if est._uses_target() and est._condition_encoder() else None
    needs_task = est._task_mode() is not None and est._condition_encoder()
    return y, (data.task_ids if needs_task else None)


def test_the_hierarchy_is_upright():
    assert issubclass(VAE, BaseVAE) and not issubclass(VAE, ConditionalVAEEstimator)
    for cls in (IVAE, ICaRL):
        assert issubclass(cls, ConditionalVAEEstimator)
    assert issubclass(MTIVAE, IVAE) and issubclass(MTICaRL, ICaRL)
    assert not issubclass(VAE, IVAE) and not issubclass(ICaRL, IVAE)
    # iCaRL sets no class attributes for a base class's checks
    for name in ("prior", "learn_prior_mean", "conditioning", "condition_encoder"):
        assert name not in vars(ICaRL) and name not in vars(VAE)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_fit_and_transform_on_the_device(cls, data, device):
    est = _make(cls, device=device).fit(data.X, data.y, task_ids=data.task_ids)
    assert est.device_.type == device.type and est.dtype_ == torch.float32
    assert {p.device.type for p in est.module_.parameters()} == {device.type}
    y, t = _cond(est, data)
    Z = est.transform(data.X, y, task_ids=t)
    assert isinstance(Z, np.ndarray) and Z.dtype == np.float64
    assert Z.shape == (len(data.X), 2) and np.isfinite(Z).all()
    assert est.n_latents_ == 2
    np.testing.assert_array_equal(
        est.get_feature_names_out(), [f"{cls.__name__.lower()}{i}" for i in (0, 1)]
    )


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_fit_transform_passes_the_conditioning_to_the_encoder(cls, data):
    Z = _make(cls).fit_transform(data.X, data.y, task_ids=data.task_ids)
    est = _make(cls).fit(data.X, data.y, task_ids=data.task_ids)
    y, t = _cond(est, data)
    np.testing.assert_array_equal(Z, est.transform(data.X, y, task_ids=t))


def test_fit_transform_refuses_a_wide_Y_for_a_conditioned_encoder(data):
    X, Y = data.to_wide()
    est = IVAE(conditioning="target+task", **FAST)
    with pytest.raises(DataError, match=r"cannot encode a wide Y of shape \(120, 4\)"):
        est.fit_transform(X, Y)
    assert not hasattr(est, "module_")  # refused before fitting
    free = IVAE(conditioning="target+task", condition_encoder=False, **FAST)
    assert free.fit_transform(X, Y).shape == (120, 2)


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_feature_names_are_recorded_and_checked(cls, data):
    cols = ["a", "b", "c"]
    df = pd.DataFrame(data.X, columns=cols)
    est = _make(cls).fit(df, data.y, task_ids=data.task_ids)
    np.testing.assert_array_equal(est.feature_names_in_, cols)
    y, t = _cond(est, data)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        Z = est.transform(data.X, y, task_ids=t)
    np.testing.assert_array_equal(est.transform(df, y, task_ids=t), Z)
    msg = r"unseen at fit time:\n- z\n.*yet now missing:\n- c\n"
    with pytest.raises(DataError, match=msg):
        est.transform(df.rename(columns={"c": "z"}), y, task_ids=t)
    est.fit(data.X, data.y, task_ids=data.task_ids)  # refit without names
    assert not hasattr(est, "feature_names_in_")


def test_input_errors_in_scikit_learns_words(data):
    est = VAE(**FAST)
    with pytest.raises(TypeError, match="VAE does not accept sparse input"):
        est.fit(sp.csr_matrix(data.X))
    with pytest.raises(DataError, match="^Complex data not supported"):
        est.fit(data.X.astype(complex))
    with pytest.raises(DataError, match=r"shape \(120,\)\. Reshape your data"):
        est.fit(data.X[:, 0])
    with pytest.raises(DataError, match=r"0 feature\(s\) \(shape=\(120, 0\)\)"):
        est.fit(data.X[:, :0])
    est.fit(data.X)
    with pytest.raises(DataError, match="Reshape your data"):
        est.transform(data.X[0])


def beta_vae_loss(module, batch, *, beta: float):
    """The loss of a beta-VAE: reconstruction plus beta times the KL."""
    out = vae_pass(module, batch)
    rec = gaussian_log_prob(out.x, out.x_mean, out.x_log_var)
    kl = kl_diag_gaussians(out.z_mean, out.z_log_var, out.prior_mean, out.prior_log_var)
    return (beta * kl - rec).mean(), batch.x.shape[0]


class BetaVAE(BaseVAE):
    """A beta-VAE written on the base: hyperparameters, a prior, a loss."""

    _parameter_constraints = {
        **ARCHITECTURE_CONSTRAINTS,
        **TRAINING_CONSTRAINTS,
        "beta": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        n_latents=10,
        *,
        beta=4.0,
        encoder="mlp",
        decoder=None,
        hidden_sizes=None,
        activation="leaky_relu",
        decoder_var=0.01,
        lr=1e-3,
        lr_schedule=None,
        batch_size=512,
        max_epochs=100,
        patience=10,
        val_fraction=0.1,
        grad_clip=None,
        device="cpu",
        dtype="float32",
        random_state=None,
        verbose=False,
    ):
        self.n_latents = n_latents
        self.beta = beta
        self.encoder = encoder
        self.decoder = decoder
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.decoder_var = decoder_var
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.val_fraction = val_fraction
        self.grad_clip = grad_clip
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def _build_prior(self, cond_features: int, n_features: int) -> nn.Module:
        return ConditionalPrior(0, int(self.n_latents))  # N(0, I)

    def _make_loss(self, n_train: int):
        return partial(beta_vae_loss, beta=float(self.beta)), None


def test_a_new_vae_type_model_is_hyperparameters_module_and_loss(data):
    """fit, transform, the declared-constraint errors and the seeds come from the
    base; with beta = 1 the beta-VAE is the VAE, draw for draw."""
    Z = BetaVAE(**FAST).fit(data.X).transform(data.X)
    assert Z.shape == (120, 2) and np.isfinite(Z).all()
    one = BetaVAE(beta=1.0, **FAST).fit(data.X)
    ref = VAE(**FAST).fit(data.X)
    assert one.history_["train_loss"] == ref.history_["train_loss"]
    np.testing.assert_array_equal(one.transform(data.X), ref.transform(data.X))
    msg = r"^The 'beta' parameter of BetaVAE must be a float in the range \(0, inf\)"
    with pytest.raises(InvalidParameterError, match=msg):
        BetaVAE(beta=-1.0).fit(data.X)
