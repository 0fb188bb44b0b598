"""Unit tests of the multi-task variants' free task prior and input whitening:
:class:`~identrep.models.nn.vae.TaskPrior`, :class:`~identrep.models.nn.vae.Whiten`,
:func:`~identrep.models.vae._base.whitening_map`,
:class:`~identrep.models.nn.icarl.TaskExpFamPrior` and the ``task_prior`` /
``whiten`` options of MTIVAE and MTICaRL."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch.distributions import Normal, kl_divergence

from identrep.datasets import make_linear_tasks
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models.nn.icarl import TaskExpFamPrior
from identrep.models.nn.vae import Conditioner, TaskPrior, Whiten, soft_clamp
from identrep.models.vae import MTIVAE, MTICaRL
from identrep.models.vae._base import whitening_map
from identrep.models.vae._elbo import VAEBatch, neg_elbo_loss, vae_pass
from identrep.models.vae._icarl_loss import icarl_loss_terms

FAST = dict(max_epochs=2, batch_size=64, encoder="linear")
ICARL = dict(tnn_hidden=4, lambda_hidden=8)


@pytest.fixture(scope="module")
def tasks():
    return make_linear_tasks(
        n_tasks=6, n_samples=30, n_latents=3, n_causal=1, random_state=0
    )


# ================================================================== modules
def test_index_conditioner_emits_the_target_and_the_task_code():
    c = Conditioner(True, "index", n_tasks=4, y_mean=1.0, y_scale=2.0)
    u = c(torch.tensor([3.0, 1.0], dtype=torch.float64), torch.tensor([2, 0]))
    torch.testing.assert_close(u, torch.tensor([[1.0, 2.0], [0.0, 0.0]]))
    assert c.out_features == 2 and not list(c.parameters())
    assert Conditioner(False, "index", n_tasks=4).out_features == 1


def test_task_prior_is_the_closed_form_and_starts_standard():
    state = torch.random.get_rng_state()
    prior = TaskPrior(3, 2)
    assert torch.equal(torch.random.get_rng_state(), state)  # no draws
    u = torch.tensor([[0.7, 2.0], [-1.0, 0.0]])
    mean, log_var = prior(u)
    assert torch.equal(mean, torch.zeros(2, 2)) and torch.equal(log_var, mean)
    with torch.no_grad():
        prior.slope.copy_(torch.arange(6.0).reshape(3, 2))
        prior.offset.copy_(-torch.arange(6.0).reshape(3, 2))
        prior.log_var.copy_(0.1 * torch.arange(6.0).reshape(3, 2))
    mean, log_var = prior(u)
    # task 2: a = (4, 5), b = (-4, -5), y = 0.7; task 0: a = (0, 1), b = (0, -1)
    torch.testing.assert_close(mean, torch.tensor([[-1.2, -1.5], [0.0, -2.0]]))
    expected = soft_clamp(torch.tensor([[0.4, 0.5], [0.0, 0.1]]), 8.0)
    torch.testing.assert_close(log_var, expected)
    no_y = TaskPrior(3, 2, use_target=False)
    with torch.no_grad():
        no_y.offset.fill_(1.5)
    assert torch.equal(no_y(torch.tensor([[1.0]]))[0], torch.full((1, 2), 1.5))
    assert not no_y.slope.requires_grad
    with pytest.raises(ValueError, match="dist must be one of"):
        TaskPrior(3, 2, dist="cauchy")


def test_elbo_with_the_task_prior_matches_torch_distributions(tasks):
    m = MTIVAE(n_latents=3, random_state=0, **FAST).fit(
        tasks.X, tasks.y, task_ids=tasks.task_ids
    )
    net = m.module_
    torch.manual_seed(1)
    with torch.no_grad():
        net.prior.slope.normal_()
        net.prior.offset.normal_()
        net.prior.log_var.normal_()
    x = torch.tensor(tasks.X[:20])
    y = torch.tensor(tasks.y[:20])
    t = torch.tensor(tasks.task_ids[:20])
    batch = VAEBatch(x, y, t)
    torch.manual_seed(0)
    out = vae_pass(net, batch)
    y_std = (y - net.conditioner.target.mean) / net.conditioner.target.scale
    a, b, s = (
        p.detach()[t] for p in (net.prior.slope, net.prior.offset, net.prior.log_var)
    )
    expected_mean = (a * y_std[:, None] + b).float()
    torch.testing.assert_close(out.prior_mean, expected_mean)
    torch.manual_seed(0)
    loss, _ = neg_elbo_loss(net, batch)
    q = Normal(out.z_mean, torch.exp(0.5 * out.z_log_var))
    p = Normal(expected_mean, torch.exp(0.5 * soft_clamp(s, 8.0)))
    rec = Normal(out.x_mean, torch.exp(0.5 * out.x_log_var)).log_prob(out.x).sum(-1)
    expected = (kl_divergence(q, p).sum(-1) - rec).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-4)


def test_task_expfam_prior_natural_parameters_and_score():
    prior = TaskExpFamPrior(3, 2, tnn_hidden=(4,))
    u = torch.tensor([[0.5, 1.0], [-2.0, 2.0]])
    eta, tau, c = prior(u)
    assert torch.equal(eta, torch.zeros(2, 2)) and torch.equal(c, torch.zeros(2, 4))
    torch.testing.assert_close(tau, torch.full((2, 2), 1.0 + prior.min_precision))
    with torch.no_grad():
        prior.slope.normal_()
        prior.offset.normal_()
        prior.coupling.normal_()
    eta, tau, c = prior(u)
    torch.testing.assert_close(eta[1], prior.slope[2] * -2.0 + prior.offset[2])
    torch.testing.assert_close(c[0], prior.coupling[1])
    # the inherited closed-form score and Hessian diagonal against autograd
    z = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    prior = prior.double()
    log_p, score, hess = prior.score_and_hessian_diagonal(z, u.double())
    grad = torch.autograd.grad(log_p.sum(), z, create_graph=True)[0]
    torch.testing.assert_close(score, grad)
    diag = torch.stack(
        [
            torch.autograd.grad(grad[:, j].sum(), z, retain_graph=True)[0][:, j]
            for j in range(2)
        ],
        1,
    )
    torch.testing.assert_close(hess, diag)


# ================================================================ whitening
def test_whitening_map_whitens(rng):
    X = rng.standard_normal((500, 4)) @ rng.standard_normal((4, 4)) + 3.0
    mean, W = whitening_map(X)
    Xw = (X - mean) @ W.T
    np.testing.assert_allclose(np.cov(Xw.T, bias=True), np.eye(4), atol=1e-10)
    Ws = W * X.std(axis=0)  # ZCA of the standardised columns: symmetric
    np.testing.assert_allclose(Ws, Ws.T, atol=1e-10)
    mean, W = whitening_map(X * 1e300)  # any units: no overflow
    np.testing.assert_allclose(W * 1e300, whitening_map(X)[1], rtol=1e-9)
    mean, W = whitening_map(X, 2)
    assert W.shape == (2, 4)
    np.testing.assert_allclose(
        np.cov(((X - mean) @ W.T).T, bias=True), np.eye(2), atol=1e-10
    )
    with pytest.raises(DataError, match="non-zero covariance"):
        whitening_map(np.ones((5, 3)))


def test_whiten_module_is_the_affine_map():
    w = Whiten(torch.tensor([1.0, 2.0]), torch.tensor([[1.0, 1.0], [0.0, 3.0]]))
    out = w(torch.tensor([[2.0, 4.0]], dtype=torch.float64))
    torch.testing.assert_close(out, torch.tensor([[3.0, 6.0]]))
    assert w.double()(torch.zeros(1, 2, dtype=torch.float64)).dtype == torch.float64


# =============================================================== estimators
@pytest.mark.parametrize("cls", [MTIVAE, MTICaRL])
def test_free_prior_estimators_expose_their_task_parameters(cls, tasks):
    extra = ICARL if cls is MTICaRL else {}
    m = cls(n_latents=3, random_state=0, whiten="zca", **FAST, **extra)
    m.fit(tasks.X, tasks.y, task_ids=tasks.task_ids)
    params = m.task_prior_params_
    assert params["slope"].shape == params["offset"].shape == (6, 3)
    assert np.isfinite(m.transform(tasks.X, tasks.y, task_ids=tasks.task_ids)).all()
    emb = cls(n_latents=3, random_state=0, task_prior="embedding", **FAST, **extra).fit(
        tasks.X, tasks.y, task_ids=tasks.task_ids
    )
    assert emb.task_prior_params_ is None and emb.task_embeddings_.shape == (6, 3)


def test_pca_whitening_reduces_the_decoder_output():
    data = make_linear_tasks(
        n_tasks=4, n_samples=25, n_latents=2, n_causal=1, n_observed=5, random_state=1
    )
    m = MTIVAE(n_latents=2, whiten="pca", random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert m.module_.decoder.net(torch.zeros(1, 2)).shape == (1, 2)
    assert m.n_features_in_ == 5
    assert m.transform(data.X, data.y, task_ids=data.task_ids).shape == (100, 2)


def test_same_seed_same_numbers_with_the_free_prior(tasks):
    def run():
        m = MTIVAE(n_latents=3, random_state=3, whiten="zca", **FAST)
        return m.fit(tasks.X, tasks.y, task_ids=tasks.task_ids).transform(
            tasks.X, tasks.y, task_ids=tasks.task_ids
        )

    np.testing.assert_array_equal(run(), run())


@pytest.mark.parametrize(
    ("param", "value", "allowed"),
    [
        ("task_prior", "mlp", "a str among {'embedding', 'free'}"),
        ("whiten", "pcaa", "a str among {'pca', 'zca'} or None"),
    ],
)
def test_bad_options_are_named(param, value, allowed, tasks):
    msg = f"The '{param}' parameter of MTIVAE must be {allowed}; got {value!r}."
    with pytest.raises(InvalidParameterError, match=re.escape(msg)):
        MTIVAE(**{param: value}, **FAST).fit(tasks.X, tasks.y, task_ids=tasks.task_ids)


@pytest.mark.parametrize("method", ["exact", "sliced"])
def test_free_icarl_prior_stop_gradients_split_the_parameters(method):
    est = MTICaRL(n_latents=2, hidden_sizes=(8,), tnn_hidden=5)
    est._validate_params()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = est._build_module(3, 4, np.zeros(3), np.ones(3), 0.0, 1.0).double()
        with torch.no_grad():  # move off the (symmetric) initial values
            for p in (module.prior.slope, module.prior.offset, module.prior.coupling):
                p.normal_()
        batch = VAEBatch(
            torch.randn(16, 3, dtype=torch.float64),
            torch.randn(16, dtype=torch.float64),
            torch.arange(16) % 4,
        )
        neg_elbo, sm = icarl_loss_terms(module, batch, score_matching=method)
    enc_dec, prior = module.encoder_decoder_parameters(), module.prior_parameters()
    assert len(enc_dec) + len(prior) == len(list(module.parameters()))
    assert module.prior.slope in set(prior) and module.prior.coupling in set(prior)

    def grads(loss, params):
        return torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)

    for g in grads(neg_elbo.mean(), prior):  # the ELBO term leaves the prior alone
        assert g is None or torch.equal(g, torch.zeros_like(g))
    for g in grads(sm.mean(), enc_dec):  # score matching leaves the encoder alone
        assert g is None or torch.equal(g, torch.zeros_like(g))
    assert all(g.abs().sum() > 0 for g in grads(sm.mean(), prior))
