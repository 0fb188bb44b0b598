"""Unit tests of the VAE family's ELBO terms (models/vae/_elbo.py), modules
(models/nn/vae.py) and the VAE and iVAE estimators (models/vae/{vae,ivae}.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch.distributions import Laplace, Normal, kl_divergence

from identrep.datasets import make_segment_sources
from identrep.exceptions import DataError, InvalidParameterError, NotFittedError
from identrep.models.nn.vae import (
    ConditionalPrior,
    ConditionalVAE,
    Conditioner,
    GaussianDecoder,
    GaussianEncoder,
    soft_clamp,
)
from identrep.models.vae import IVAE, MTIVAE, VAE
from identrep.models.vae._elbo import (
    VAEBatch,
    aggregate_posterior_log_probs,
    gaussian_log_prob,
    kl_diag_gaussians,
    laplace_log_prob,
    neg_elbo_loss,
    prior_log_prob,
    reparameterize,
    vae_pass,
    weighted_elbo_loss,
)
from identrep.models.vae._objectives import WeightedObjective

FAST = dict(max_epochs=3, batch_size=64)


def _tol(dtype):
    return (
        dict(rtol=1e-5, atol=1e-6)
        if dtype == torch.float64
        else dict(rtol=1e-4, atol=1e-4)
    )


@pytest.fixture(scope="module")
def data():
    return make_segment_sources(
        n_segments=6, n_per_segment=40, n_latents=2, n_observed=4, random_state=0
    )


@pytest.fixture(scope="module")
def fitted(data):
    return IVAE(n_latents=2, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )


def _module(seed, *, p=4, d=2, T=3, dist="gaussian", dtype=torch.float64):
    torch.manual_seed(seed)
    cond = Conditioner(True, "onehot", n_tasks=T, y_mean=0.5, y_scale=2.0)
    c = cond.out_features
    net = ConditionalVAE(
        GaussianEncoder(p, c, d, [8]),
        GaussianDecoder(d, p, [8], obs_var=0.1),
        ConditionalPrior(c, d, [8], learn_mean=True, dist=dist),
        cond,
        torch.zeros(p),
        torch.ones(p),
    )
    return net.to(dtype)


def _batch(seed, n=16, p=4, T=3, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return VAEBatch(
        torch.randn(n, p, generator=g, dtype=dtype),
        torch.randn(n, generator=g, dtype=dtype),
        torch.randint(0, T, (n,), generator=g),
    )


# ------------------------------------------------------------ pure functions


def test_gaussian_log_prob_matches_torch_distributions(seed, dtype):
    g = torch.Generator().manual_seed(seed)
    x, mean, log_var = (torch.randn(7, 5, generator=g, dtype=dtype) for _ in range(3))
    expected = Normal(mean, torch.exp(0.5 * log_var)).log_prob(x).sum(-1)
    torch.testing.assert_close(
        gaussian_log_prob(x, mean, log_var), expected, **_tol(dtype)
    )


def test_laplace_log_prob_is_parameterised_by_its_variance(seed, dtype):
    g = torch.Generator().manual_seed(seed)
    x, loc, log_var = (torch.randn(7, 5, generator=g, dtype=dtype) for _ in range(3))
    b = torch.sqrt(torch.exp(log_var) / 2)  # Var(Laplace(loc, b)) = 2 b^2
    expected = Laplace(loc, b).log_prob(x).sum(-1)
    torch.testing.assert_close(
        laplace_log_prob(x, loc, log_var), expected, **_tol(dtype)
    )


def test_kl_of_diagonal_gaussians_matches_torch_distributions(seed, dtype):
    g = torch.Generator().manual_seed(seed)
    mq, lq, mp, lp = (torch.randn(6, 4, generator=g, dtype=dtype) for _ in range(4))
    expected = kl_divergence(
        Normal(mq, torch.exp(0.5 * lq)), Normal(mp, torch.exp(0.5 * lp))
    ).sum(-1)
    kl = kl_diag_gaussians(mq, lq, mp, lp)
    torch.testing.assert_close(kl, expected, **_tol(dtype))
    assert torch.all(kl >= 0)
    torch.testing.assert_close(
        kl_diag_gaussians(mq, lq, mq, lq), torch.zeros(6, dtype=dtype)
    )


def test_prior_log_prob_dispatches_on_the_family(seed):
    g = torch.Generator().manual_seed(seed)
    z, mean, log_var = (torch.randn(4, 3, generator=g) for _ in range(3))
    torch.testing.assert_close(
        prior_log_prob("gaussian", z, mean, log_var),
        gaussian_log_prob(z, mean, log_var),
    )
    torch.testing.assert_close(
        prior_log_prob("laplace", z, mean, log_var), laplace_log_prob(z, mean, log_var)
    )


def test_reparameterize(seed):
    g = torch.Generator().manual_seed(seed)
    mean, log_var, eps = (torch.randn(5, 3, generator=g) for _ in range(3))
    torch.testing.assert_close(
        reparameterize(mean, log_var, eps), mean + torch.exp(0.5 * log_var) * eps
    )
    torch.manual_seed(seed)
    z = reparameterize(
        torch.full((200_000, 1), 2.0), torch.full((200_000, 1), math.log(9.0))
    )
    assert abs(float(z.mean()) - 2.0) < 0.03 and abs(float(z.std()) - 3.0) < 0.03


def test_soft_clamp_is_bounded_smooth_and_near_identity_at_zero():
    x = torch.tensor([-1e6, -3.0, 0.0, 1e-3, 3.0, 1e6], requires_grad=True)
    y = soft_clamp(x, 5.0)
    assert torch.all(y.abs() <= 5.0)
    assert abs(y[3].item() - 1e-3) < 1e-8
    y.sum().backward()
    assert torch.all(x.grad >= 0) and float(x.grad[2]) == pytest.approx(1.0)


def test_aggregate_posterior_estimates_match_a_direct_loop(seed):
    g = torch.Generator().manual_seed(seed)
    B, d, N = 5, 3, 1000
    z, mean, log_var = (
        torch.randn(B, d, generator=g, dtype=torch.float64) for _ in range(3)
    )
    log_qz, log_qz_prod = aggregate_posterior_log_probs(z, mean, log_var, N)
    for i in range(B):
        dens = [
            Normal(mean[j], torch.exp(0.5 * log_var[j])).log_prob(z[i])
            for j in range(B)
        ]
        joint = torch.logsumexp(torch.stack([v.sum() for v in dens]), 0)
        marg = torch.logsumexp(torch.stack(dens), 0)  # (d,)
        torch.testing.assert_close(log_qz[i], joint - math.log(N * B))
        torch.testing.assert_close(log_qz_prod[i], (marg - math.log(N * B)).sum())


@pytest.mark.parametrize("dist", ["gaussian", "laplace"])
def test_unit_weights_reduce_the_weighted_objective_to_the_elbo(seed, dist):
    net, batch = _module(seed, dist=dist), _batch(seed)
    torch.manual_seed(seed)
    weighted, n = weighted_elbo_loss(net, batch, weights=(1, 1, 1, 1), n_data=500)
    torch.manual_seed(seed)  # the same reparameterisation noise
    plain, n2 = neg_elbo_loss(net, batch, analytic_kl=False)
    torch.testing.assert_close(weighted, plain)
    assert n == n2 == 16
    # another weighting really changes the objective
    torch.manual_seed(seed)
    other, _ = weighted_elbo_loss(net, batch, weights=(100, 1, 0, 10), n_data=500)
    assert not torch.isclose(other, plain)


def test_neg_elbo_by_hand(seed):
    net, batch = _module(seed), _batch(seed)
    torch.manual_seed(seed)
    loss, _ = neg_elbo_loss(net, batch)
    torch.manual_seed(seed)
    u = net.conditioner(batch.y, batch.task)
    m, lv = net.encoder(batch.x, u)
    z = m + torch.exp(0.5 * lv) * torch.randn_like(m)
    xm, xlv = net.decoder(z)
    pm, plv = net.prior(u)
    rec = Normal(xm, torch.exp(0.5 * xlv)).log_prob(batch.x).sum(-1)
    kl = kl_divergence(Normal(m, torch.exp(0.5 * lv)), Normal(pm, torch.exp(0.5 * plv)))
    torch.testing.assert_close(loss, (kl.sum(-1) - rec).mean())


def test_vae_pass_is_one_sample_through_the_module_parts(seed):
    net, batch = _module(seed), _batch(seed)
    torch.manual_seed(seed)
    out = vae_pass(net, batch)
    torch.manual_seed(seed)
    u = net.conditioner(batch.y, batch.task)
    m, lv = net.encoder(batch.x, u)  # x_mean 0, x_scale 1: standardising is a no-op
    eps = torch.randn_like(m)
    torch.testing.assert_close(out.z, m + torch.exp(0.5 * lv) * eps)
    torch.testing.assert_close(out.x_mean, net.decoder(out.z)[0])
    torch.testing.assert_close(out.prior_log_var, net.prior(u)[1])
    # forward (= encode) returns the encoder's parameters, never a sample
    torch.testing.assert_close(net(batch.x, batch.y, batch.task)[0], m)
    torch.testing.assert_close(net.encode(batch.x, batch.y, batch.task)[1], lv)


def test_analytic_and_sampled_kl_agree_in_expectation(seed):
    net = _module(seed)
    x = torch.randn(1, 4, dtype=torch.float64).expand(40_000, 4)
    batch = VAEBatch(
        x,
        torch.zeros(40_000, dtype=torch.float64),
        torch.zeros(40_000, dtype=torch.long),
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        analytic, _ = neg_elbo_loss(net, batch)
        sampled, _ = neg_elbo_loss(net, batch, analytic_kl=False)
    assert float(analytic) == pytest.approx(float(sampled), rel=0.02)


def test_annealed_weights_reach_the_elbo_and_validation_uses_the_elbo(seed):
    obj = WeightedObjective((100, 1, 0, 10), n_data=100, anneal=True, max_epochs=16)
    assert obj.current_weights() == (100, 1, 0, 10)
    for _ in range(5):
        obj.step(None)
    a, b, c, d = obj.current_weights()
    assert 1 < a < 100 and 0 < c < 1 and 1 < d < 10 and b == 1
    for _ in range(5):
        obj.step(None)  # ceil(16 / 1.6) = 10 epochs of annealing
    assert obj.current_weights() == (1, 1, 1, 1)
    net, batch = _module(seed), _batch(seed)
    net.eval()
    torch.manual_seed(seed)
    val = obj(net, batch)
    torch.manual_seed(seed)
    torch.testing.assert_close(val[0], neg_elbo_loss(net, batch)[0])


# ------------------------------------------------------------------ modules


def test_conditioner_builds_u_from_target_and_task():
    y, t = torch.tensor([0.5, 2.5]), torch.tensor([2, 0])
    c = Conditioner(True, "onehot", n_tasks=3, y_mean=0.5, y_scale=2.0)
    torch.testing.assert_close(c(y, t), torch.tensor([[0.0, 0, 0, 1], [1.0, 1, 0, 0]]))
    e = Conditioner(False, "embedding", n_tasks=3, embedding_dim=5)
    assert e.out_features == 5
    torch.testing.assert_close(e(y, t), e.embedding.weight[t])
    assert Conditioner(False, None)(y, t).shape == (2, 0)
    with pytest.raises(ValueError, match="task_mode must be None"):
        Conditioner(True, "table")


def test_unconditional_prior_is_standard_and_decoder_variance_options():
    prior = ConditionalPrior(0, 3)
    mean, log_var = prior(torch.zeros(4, 0))
    assert torch.all(mean == 0) and torch.all(log_var == 0)
    assert not list(prior.parameters())
    fixed = GaussianDecoder(2, 3, obs_var=0.01)
    assert torch.allclose(fixed(torch.zeros(1, 2))[1], torch.full((3,), math.log(0.01)))
    assert "log_var" not in dict(fixed.named_parameters())
    learned = GaussianDecoder(2, 3, learn_var=True)
    assert "log_var" in dict(learned.named_parameters())
    enc = GaussianEncoder(4, 0, 2, log_var_bound=3.0)
    with torch.no_grad():
        enc.net.layers[0].bias.fill_(100.0)
    assert torch.all(enc(torch.zeros(2, 4))[1] <= 3.0)


# ---------------------------------------------------------------- estimators


def test_fit_attributes_and_shapes(fitted, data):
    m = fitted
    Z = m.transform(data.X, data.y, task_ids=data.task_ids)
    assert Z.shape == (240, 2) and Z.dtype == np.float64 and np.isfinite(Z).all()
    assert m.n_features_in_ == 4 and m.n_tasks_ == 6
    np.testing.assert_array_equal(m.tasks_, np.arange(6))
    assert set(m.history_) >= {"train_loss", "val_loss", "best_epoch", "n_epochs"}
    assert len(m.history_["val_loss"]) == 3 and m.fit_seconds_ > 0
    assert not m.module_.training
    mean, var = m.encode(data.X, data.y, task_ids=data.task_ids)
    np.testing.assert_allclose(mean, Z)
    assert var.shape == (240, 2) and np.all(var > 0)
    # target conditioning: the task is not part of u, so it is not needed
    np.testing.assert_allclose(m.transform(data.X, data.y), Z)


def test_transform_depends_on_the_conditioning(fitted, data):
    Z = fitted.transform(data.X, data.y)
    assert not np.allclose(fitted.transform(data.X, data.y + 3.0), Z)


def test_same_random_state_gives_identical_latents(data, seed):
    def run(rs):
        m = MTIVAE(n_latents=2, random_state=rs, **FAST)
        m.fit(data.X, data.y, task_ids=data.task_ids)
        return m.transform(data.X, data.y, task_ids=data.task_ids)

    np.testing.assert_array_equal(run(seed), run(seed))
    assert not np.allclose(run(seed), run(seed + 1))


def test_fitting_leaves_the_global_torch_rng_alone(data):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    IVAE(n_latents=2, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    torch.testing.assert_close(torch.rand(3), expected)


def test_task_conditioning_needs_no_target(data):
    m = IVAE(n_latents=2, conditioning="task", random_state=0, **FAST)
    m.fit(data.X, task_ids=data.task_ids)
    Z = m.transform(data.X, task_ids=data.task_ids)
    assert Z.shape == (240, 2)
    # the prior network sees the one-hot segment
    assert m.module_.prior.cond_features == 6
    with pytest.raises(DataError, match="transform needs task_ids"):
        m.transform(data.X)


def test_mtivae_embeddings(data):
    m = MTIVAE(n_latents=2, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert m.task_embeddings_.shape == (6, 2)
    np.testing.assert_allclose(
        m.task_embeddings_,
        m.module_.conditioner.embedding.weight.detach().double().numpy(),
    )
    assert m.module_.conditioner.out_features == 3  # [y, E_t]
    m2 = MTIVAE(
        n_latents=2, conditioning="task", embedding_dim=4, random_state=0, **FAST
    ).fit(data.X, task_ids=data.task_ids)
    assert m2.task_embeddings_.shape == (6, 4)
    assert m2.module_.conditioner.out_features == 4
    with pytest.raises(DataError, match="task_ids is required"):
        MTIVAE(n_latents=2, **FAST).fit(data.X, data.y)


def test_vae_needs_only_X(data):
    m = VAE(n_latents=2, random_state=0, **FAST).fit(data.X)
    Z = m.transform(data.X)
    assert Z.shape == (240, 2)
    assert m.module_.prior.net is None and m.module_.conditioner.out_features == 0
    # targets and tasks are accepted and ignored
    m2 = VAE(n_latents=2, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    np.testing.assert_allclose(m2.transform(data.X, data.y), Z)
    assert "conditioning" not in m.get_params()


def test_wide_layout(data):
    X, Y = data.to_wide()
    m = IVAE(n_latents=2, conditioning="target+task", random_state=0, **FAST).fit(X, Y)
    assert m.n_tasks_ == 6
    assert m.transform(X, data.y, task_ids=data.task_ids).shape == (240, 2)
    with pytest.raises(DataError, match="transform takes the long layout"):
        m.transform(X, Y, task_ids=data.task_ids)


def test_string_task_labels_and_unknown_task_at_transform(data):
    labels = np.array(list("abcdef"))[data.task_ids]
    m = MTIVAE(n_latents=2, random_state=0, **FAST).fit(data.X, data.y, task_ids=labels)
    np.testing.assert_array_equal(m.tasks_, list("abcdef"))
    assert m.transform(data.X[:3], data.y[:3], task_ids=["a", "f", "c"]).shape == (3, 2)
    with pytest.raises(DataError, match=r"unseen during fit \(first: \['zz'\]\)"):
        m.transform(data.X[:3], data.y[:3], task_ids=["a", "zz", "c"])


def test_unknown_integer_task_is_named(data):
    m = IVAE(n_latents=2, conditioning="task", random_state=0, **FAST)
    m.fit(data.X, task_ids=data.task_ids)
    with pytest.raises(DataError, match=r"unseen during fit \(first: \[99\]\)"):
        m.transform(data.X[:3], task_ids=[0, 99, 1])


def test_unconditional_encoder_transforms_from_X_alone(data):
    m = IVAE(n_latents=2, condition_encoder=False, random_state=0, **FAST)
    m.fit(data.X, data.y, task_ids=data.task_ids)
    assert m.module_.encoder.cond_features == 0
    Z = m.transform(data.X)
    np.testing.assert_allclose(m.transform(data.X, data.y + 5.0), Z)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(encoder="linear"),
        dict(encoder="linear", decoder="mlp", hidden_sizes=(7,)),
        dict(prior="laplace", learn_prior_mean=True),
        dict(decoder_var="learned"),
        dict(objective="weighted"),
        dict(objective="weighted", elbo_weights=(1, 1, 1, 1), anneal=True),
        dict(dtype="float64", lr_schedule="cosine", val_fraction=0.0),
    ],
)
def test_options_train(data, kwargs):
    m = IVAE(n_latents=2, random_state=0, **{**FAST, **kwargs})
    m.fit(data.X, data.y, task_ids=data.task_ids)
    Z = m.transform(data.X, data.y)
    assert Z.shape == (240, 2) and np.isfinite(Z).all()
    assert np.isfinite(m.history_["train_loss"]).all()
    if kwargs.get("encoder") == "linear":
        linears = [
            mod
            for mod in m.module_.encoder.modules()
            if isinstance(mod, torch.nn.Linear)
        ]
        assert len(linears) == 1
    if "hidden_sizes" in kwargs:
        widths = [
            mod.out_features
            for mod in m.module_.decoder.modules()
            if isinstance(mod, torch.nn.Linear)
        ]
        assert widths == [7, 4]
    if kwargs.get("decoder_var") == "learned":
        assert m.module_.decoder.log_var.requires_grad
    if kwargs.get("dtype") == "float64":
        assert next(m.module_.parameters()).dtype == torch.float64
        assert m.history_["val_loss"] == [] and m.history_["n_epochs"] == 3


def test_training_decreases_the_loss(data):
    m = IVAE(n_latents=2, max_epochs=30, lr=1e-2, random_state=0, patience=None)
    m.fit(data.X, data.y, task_ids=data.task_ids)
    h = m.history_["train_loss"]
    assert np.mean(h[-5:]) < h[0] - 1.0


def test_clone_and_params():
    m = MTIVAE(n_latents=4, conditioning="task", embedding_dim=3, lr=3e-3)
    c = clone(m)
    assert c.get_params() == m.get_params() and c is not m
    assert c.get_params()["embedding_dim"] == 3
    assert not hasattr(c, "module_")
    v = clone(VAE(n_latents=3, encoder="linear"))
    assert v.get_params()["encoder"] == "linear"


# ---------------------------------------------------------------- validation


_POS_INT = "an int in the range [1, inf)"
_POS_FLOAT = "a float in the range (0, inf)"


@pytest.mark.parametrize(
    ("kwargs", "allowed"),
    [
        ({"n_latents": 0}, _POS_INT),
        ({"batch_size": 0}, _POS_INT),
        ({"max_epochs": 1.5}, _POS_INT),
        ({"patience": 0}, f"{_POS_INT} or None"),
        (
            {"conditioning": "segment"},
            "a str among {'target', 'target+task', 'task'}",
        ),
        ({"encoder": "cnn"}, "a str among {'linear', 'mlp'}"),
        ({"decoder": "cnn"}, "a str among {'linear', 'mlp'} or None"),
        ({"prior": "student"}, "a str among {'gaussian', 'laplace'}"),
        ({"decoder_var": 0.0}, f"{_POS_FLOAT} or a str among {{'learned'}}"),
        ({"decoder_var": "fixed"}, f"{_POS_FLOAT} or a str among {{'learned'}}"),
        ({"decoder_var": math.inf}, f"{_POS_FLOAT} or a str among {{'learned'}}"),
        ({"objective": "iwae"}, "a str among {'elbo', 'weighted'}"),
        (
            {"elbo_weights": (1, -1, 1, 1)},
            "a sequence of a float in the range [0, inf) or None",
        ),
        (
            {"elbo_weights": (1, 1, 1, math.inf)},
            "a sequence of a float in the range [0, inf) or None",
        ),
        ({"lr": -1.0}, _POS_FLOAT),
        ({"lr_schedule": "step"}, "a str among {'cosine'} or None"),
        ({"val_fraction": 1.0}, "a float in the range [0, 1)"),
        ({"grad_clip": 0.0}, f"{_POS_FLOAT} or None"),
        ({"hidden_sizes": "64"}, f"a sequence of {_POS_INT} or None"),
        ({"hidden_sizes": (8, 0)}, f"a sequence of {_POS_INT} or None"),
        (
            {"activation": "swish"},
            "a str among {'elu', 'gelu', 'leaky_relu', 'relu', 'silu', 'tanh'}",
        ),
        ({"dtype": "float16"}, "'float32' or 'float64' (or the torch dtype)"),
        ({"learn_prior_mean": "yes"}, "a bool"),
    ],
)
def test_invalid_hyperparameters(data, kwargs, allowed):
    ((name, value),) = kwargs.items()
    msg = f"The {name!r} parameter of IVAE must be {allowed}; got {value!r}."
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        IVAE(**{"n_latents": 2, **FAST, **kwargs}).fit(
            data.X, data.y, task_ids=data.task_ids
        )


@pytest.mark.parametrize("weights", [(1, 1, 1), [1] * 5])
@pytest.mark.parametrize("cls", [IVAE, VAE])
def test_elbo_weights_are_four_numbers(data, cls, weights):
    msg = (
        f"The 'elbo_weights' parameter of {cls.__name__} must be four "
        f"non-negative floats (a, b, c, d) or None; got {weights!r}."
    )
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        cls(elbo_weights=weights, **FAST).fit(data.X, data.y, task_ids=data.task_ids)


def test_invalid_mtivae_hyperparameters(data):
    msg = (
        "The 'conditioning' parameter of MTIVAE must be a str among "
        "{'target+task', 'task'}; got 'target'."
    )
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        MTIVAE(conditioning="target", **FAST).fit(
            data.X, data.y, task_ids=data.task_ids
        )
    msg = (
        "The 'embedding_dim' parameter of MTIVAE must be an int in the range "
        "[1, inf) or None; got 0."
    )
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        MTIVAE(embedding_dim=0, **FAST).fit(data.X, data.y, task_ids=data.task_ids)


def test_invalid_data(data):
    m = IVAE(n_latents=2, **FAST)
    X = data.X.copy()
    X[17, 2] = np.nan
    with pytest.raises(
        DataError,
        match=r"X contains 1 non-finite \(NaN or inf\) value\(s\) \(first at row 17",
    ):
        m.fit(X, data.y, task_ids=data.task_ids)
    y = data.y.copy()
    y[3] = np.inf
    with pytest.raises(DataError, match=r"y contains 1 non-finite"):
        m.fit(data.X, y, task_ids=data.task_ids)
    with pytest.raises(DataError, match=r"y must have shape \(240,\) to match X"):
        m.fit(data.X, data.y[:-1], task_ids=data.task_ids)
    with pytest.raises(DataError, match=r"task_ids must have shape \(240,\)"):
        m.fit(data.X, data.y, task_ids=data.task_ids[:-1])
    with pytest.raises(
        DataError,
        match="IVAE conditions on the target: it requires y to be passed, but the "
        r"target y is None\. Pass y of shape \(n_samples,\)",
    ):
        m.fit(data.X)
    with pytest.raises(DataError, match="conditions on the task: pass task_ids"):
        IVAE(conditioning="task", **FAST).fit(data.X)


def test_unfitted_and_mismatched_inputs(fitted, data):
    with pytest.raises(NotFittedError, match="not fitted yet"):
        IVAE().transform(data.X, data.y)
    with pytest.raises(
        DataError,
        match=r"^X has 3 features, but IVAE is expecting 4 features as input"
        r": it was fitted with n_features_in_=4\.$",
    ):
        fitted.transform(data.X[:, :3], data.y)
    with pytest.raises(DataError, match="transform needs y"):
        fitted.transform(data.X)
    with pytest.raises(DataError, match=r"y must have shape \(240,\) to match X"):
        fitted.transform(data.X, data.y[:-1])
    X = data.X.copy()
    X[0, 0] = np.nan
    with pytest.raises(DataError, match="X contains 1 non-finite"):
        fitted.transform(X, data.y)
