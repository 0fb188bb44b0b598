"""iCaRL / MT-iCaRL: the non-factorised prior, the stop-gradients, the estimators."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.base import clone

from identrep.datasets import make_segment_sources
from identrep.exceptions import DataError, InvalidParameterError, NotFittedError
from identrep.models.nn.icarl import ExpFamPrior
from identrep.models.vae import ICaRL, MTICaRL
from identrep.models.vae._elbo import VAEBatch
from identrep.models.vae._icarl_loss import expfam_score_matching, icarl_loss_terms
from identrep.models.vae._score_matching import (
    hyvarinen_score_matching,
    score_and_hessian_diagonal,
)

FAST = dict(max_epochs=2, batch_size=64)


@pytest.fixture(scope="module")
def data(seed):
    return make_segment_sources(
        n_segments=5, n_per_segment=40, n_latents=2, n_observed=3, random_state=seed
    )


def _random_prior(tnn_hidden, seed=0, n=3, c=2):
    """A float64 prior whose natural parameters (incl. coupling) are all non-zero."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        prior = ExpFamPrior(c, n, tnn_hidden=tnn_hidden, lambda_hidden=(8,)).double()
        with torch.no_grad():
            last = prior.natural.layers[-1]
            last.weight.normal_(0.0, 0.5)
            last.bias.normal_(0.0, 0.5)
            for layer in prior.tnn:
                layer.weight.normal_(0.0, 0.8)
    return prior


# ----------------------------------------------------------------- the prior
@pytest.mark.parametrize("tnn_hidden", [(), (7,), (6, 5), (4, 4, 3)])
def test_closed_form_hessian_diagonal_matches_autograd(tnn_hidden, rng):
    prior = _random_prior(tnn_hidden)
    z = torch.as_tensor(rng.standard_normal((6, 3)))
    u = torch.as_tensor(rng.standard_normal((6, 2)))
    log_p, score, hdiag = prior.score_and_hessian_diagonal(z, u)
    torch.testing.assert_close(log_p, prior.log_prob(z, u), atol=1e-12, rtol=0)
    for b in range(z.shape[0]):
        H = torch.autograd.functional.hessian(
            lambda v, b=b: prior.log_prob(v[None], u[b : b + 1])[0], z[b]
        )
        torch.testing.assert_close(hdiag[b], torch.diagonal(H), atol=1e-10, rtol=0)
        if tnn_hidden:  # the coupling makes the prior non-factorised
            assert (H - torch.diag(torch.diagonal(H))).abs().max() > 1e-3
    _, s_ref, h_ref = score_and_hessian_diagonal(lambda v: prior.log_prob(v, u), z)
    torch.testing.assert_close(score, s_ref, atol=1e-10, rtol=0)
    torch.testing.assert_close(hdiag, h_ref, atol=1e-10, rtol=0)


def test_prior_is_integrable_and_starts_standard_normal():
    prior = _random_prior((5,))
    eta, tau, c = prior(torch.randn(100, 2, dtype=torch.float64) * 50)
    assert (tau > 0).all()  # negative z^2 coefficients for any u
    t = prior.statistics(torch.randn(100, 3, dtype=torch.float64) * 100)
    assert t.abs().max() <= 1.0  # bounded coupling statistics
    fresh = ExpFamPrior(2, 3)
    # at initialisation: c = 0, eta = f(u) but tau = 1 + min_precision everywhere
    _, tau0, c0 = fresh(torch.randn(4, 2))
    assert torch.equal(c0, torch.zeros_like(c0))
    torch.testing.assert_close(tau0, torch.full_like(tau0, 1.001))
    with pytest.raises(ValueError, match="needs a conditioning"):
        ExpFamPrior(0, 3)


def test_prior_sliced_equals_exact_for_scaled_basis_projections():
    prior = _random_prior((6, 5))
    z, u = (
        torch.randn(5, 3, dtype=torch.float64),
        torch.randn(5, 2, dtype=torch.float64),
    )
    exact = expfam_score_matching(prior, z, u, method="exact")
    basis = 3**0.5 * torch.eye(3, dtype=z.dtype)[:, None, :].expand(3, 5, 3)
    sliced = expfam_score_matching(prior, z, u, method="sliced", projections=basis)
    torch.testing.assert_close(sliced, exact, atol=1e-10, rtol=0)
    _, s, h = prior.score_and_hessian_diagonal(z, u)
    torch.testing.assert_close(exact, hyvarinen_score_matching(s, h))
    with pytest.raises(ValueError, match="needs projections"):
        expfam_score_matching(prior, z, u, method="sliced")
    with pytest.raises(ValueError, match="method must be one of"):
        expfam_score_matching(prior, z, u, method="denoising")


def test_prior_fitted_by_score_matching_recovers_correlated_gaussians(seed):
    """Score matching alone (no VAE): the non-factorised prior, conditioned on a
    one-hot environment, fitted to correlated 2-D Gaussians. For a Gaussian the
    Hessian of the log-density is -P_e, so the mean -H over fresh samples must
    match the precision P_e, off-diagonal (coupling) entries included.

    Fresh samples every step, as in iCaRL where z ~ q is redrawn each step: on a
    fixed set of 3000 points per environment the flexible prior overfits (score
    matching rewards curvature spikes at the data), and the error grew with the
    number of steps (0.1-0.45 after 400 steps, ~1 after 800, seeds 5-9)."""
    gen = torch.Generator().manual_seed(seed)
    dt = torch.float64
    covs = torch.tensor(
        [
            [[1.0, 0.6], [0.6, 1.0]],
            [[1.5, -0.5], [-0.5, 1.0]],
            [[0.8, 0.3], [0.3, 1.2]],
        ],
        dtype=dt,
    )
    chol = torch.linalg.cholesky(covs)
    n_env, n = 3, 500
    env = torch.arange(n_env).repeat_interleave(n)
    U = torch.nn.functional.one_hot(env, n_env).to(dt)

    def draw():
        eps = torch.randn(n_env, n, 2, dtype=dt, generator=gen)
        return (eps @ chol.transpose(1, 2)).reshape(-1, 2)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        prior = ExpFamPrior(n_env, 2, tnn_hidden=(16,), lambda_hidden=(16,)).double()
    opt = torch.optim.Adam(prior.parameters(), lr=0.02)
    n_steps = 300
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, n_steps)
    for _ in range(n_steps):
        opt.zero_grad()
        expfam_score_matching(prior, draw(), U).mean().backward()
        opt.step()
        sched.step()
    Z = draw().requires_grad_(True)
    _, score, _ = prior.score_and_hessian_diagonal(Z, U)
    # rows of the per-sample Hessian: one backward pass per latent
    H = torch.stack(
        [
            torch.autograd.grad(score[:, j].sum(), Z, retain_graph=True)[0]
            for j in (0, 1)
        ],
        dim=1,
    )
    for e in range(n_env):
        err = (-H[env == e].mean(0) - torch.linalg.inv(covs[e])).abs().max()
        # observed |error| per environment over seeds 0-9: 0.005-0.048; the
        # off-diagonals of P_e are -0.94, 0.4 and -0.34, which a factorised
        # prior would miss
        assert err < 0.1


# ------------------------------------------------------------ stop-gradients
def _grads(loss, params):
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    pairs = zip(grads, params, strict=True)
    return [torch.zeros_like(p) if g is None else g for g, p in pairs]


@pytest.mark.parametrize("method", ["exact", "sliced"])
@pytest.mark.parametrize("cls", [ICaRL, MTICaRL])
def test_stop_gradients_split_the_parameters(cls, method):
    est = cls(n_latents=2, hidden_sizes=(8,), tnn_hidden=5, lambda_hidden=8)
    if cls is MTICaRL:  # the free prior: tests/unit/models/vae/test_task_prior.py
        est.set_params(task_prior="embedding")
    est._validate_params()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = est._build_module(3, 4, np.zeros(3), np.ones(3), 0.0, 1.0).double()
        with torch.no_grad():  # switch the coupling on (it starts at 0)
            module.prior.natural.layers[-1].weight.normal_()
        batch = VAEBatch(
            torch.randn(16, 3, dtype=torch.float64),
            torch.randn(16, dtype=torch.float64),
            torch.arange(16) % 4,
        )
        neg_elbo, sm = icarl_loss_terms(module, batch, score_matching=method)
    enc_dec, prior = module.encoder_decoder_parameters(), module.prior_parameters()
    n_params = len(list(module.parameters()))
    assert len(enc_dec) + len(prior) == n_params  # a partition of all parameters
    if cls is MTICaRL:  # the two task embeddings sit on either side
        assert module.conditioner.embedding.weight in set(prior)
        assert module.encoder_conditioner.embedding.weight in set(enc_dec)
    # ELBO term: zero gradient for every prior parameter, non-zero for the rest
    g = _grads(neg_elbo.mean(), prior)
    assert all(torch.equal(x, torch.zeros_like(x)) for x in g)
    assert sum(x.abs().sum() for x in _grads(neg_elbo.mean(), enc_dec)) > 0
    # score-matching term: zero for the encoder/decoder, non-zero for the prior
    g = _grads(sm.mean(), enc_dec)
    assert all(torch.equal(x, torch.zeros_like(x)) for x in g)
    g = _grads(sm.mean(), prior)
    assert all(x.abs().sum() > 0 for x in g)  # every prior parameter learns


def test_elbo_term_still_reaches_the_encoder_through_the_prior_score():
    """Detaching the prior's parameters must not detach z: the encoder gets the
    gradient of E_q[log p~(z | u)] through the reparameterised sample."""
    prior = _random_prior((4,), n=2, c=1)
    z = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    u = torch.randn(5, 1, dtype=torch.float64)
    (g,) = torch.autograd.grad(prior.log_prob(z, u, detach_params=True).sum(), z)
    _, score, _ = prior.score_and_hessian_diagonal(z.detach(), u)
    torch.testing.assert_close(g, score)
    params = list(prior.parameters())
    out = prior.log_prob(z, u, detach_params=True).sum()
    assert all(x is None for x in torch.autograd.grad(out, params, allow_unused=True))


# ---------------------------------------------------------------- estimators
def test_shapes_and_fitted_attributes(data):
    n, d = data.X.shape[0], 2
    m = ICaRL(n_latents=d, random_state=0, **FAST).fit(data.X, data.y)
    assert m.transform(data.X, data.y).shape == (n, d)
    mean, var = m.encode(data.X, data.y)
    assert mean.shape == var.shape == (n, d) and (var > 0).all()
    assert m.n_features_in_ == 3 and m.score_matching_ == "exact"
    assert len(m.history_["train_loss"]) == 2 and m.history_["val_loss"] == []
    mt = MTICaRL(n_latents=d, random_state=0, task_prior="embedding", **FAST)
    mt.fit(data.X, data.y, task_ids=data.task_ids)
    Z = mt.transform(data.X, data.y, task_ids=data.task_ids)
    assert Z.shape == (n, d) and np.isfinite(Z).all()
    assert mt.task_embeddings_.shape == (5, d)
    assert mt.encoder_task_embeddings_.shape == (5, d)
    assert not np.allclose(mt.task_embeddings_, mt.encoder_task_embeddings_)
    assert mt.n_tasks_ == 5


def test_task_conditioning_and_encoder_without_u(data):
    m = MTICaRL(
        n_latents=2,
        conditioning="task",
        embedding_dim=3,
        task_prior="embedding",
        **FAST,
    )
    m.fit(data.X, task_ids=data.task_ids)  # no target needed
    assert m.task_embeddings_.shape == (5, 3)
    assert m.transform(data.X, task_ids=data.task_ids).shape == (200, 2)
    m = ICaRL(n_latents=2, condition_encoder=False, **FAST).fit(data.X, data.y)
    assert m.transform(data.X).shape == (200, 2)  # q(z | x): X alone
    one = ICaRL(n_latents=2, conditioning="target+task", **FAST)
    one.fit(data.X, data.y, task_ids=data.task_ids)
    assert one.transform(data.X, data.y, task_ids=data.task_ids).shape == (200, 2)


@pytest.mark.parametrize(
    "params, method",
    [
        (dict(score_matching="auto", tnn_hidden=(8, 8), n_latents=12), "sliced"),
        (dict(score_matching="auto", tnn_hidden=(8, 8), n_latents=2), "exact"),
        (dict(score_matching="auto", tnn_hidden=8, n_latents=12), "exact"),
        (dict(score_matching="sliced", n_projections=2, n_latents=2), "sliced"),
    ],
)
def test_score_matching_choice(data, params, method):
    m = ICaRL(**params, random_state=0, **FAST).fit(data.X, data.y)
    assert m.score_matching_ == method
    assert np.isfinite(m.history_["train_loss"]).all()


def test_coupling_warmup_keeps_the_prior_factorised_then_switches_on(data):
    # warm-up over all epochs: the coupling gets no gradient, so the weights of
    # its output rows keep their initial value 0
    m = ICaRL(n_latents=2, coupling_warmup=0.7, random_state=0, max_epochs=3)
    m.fit(data.X, data.y)  # ceil(0.7 * 3) = 3 epochs: switched on at the end
    prior = m.module_.prior
    assert prior.coupling_scale.item() == 1.0
    n = 2
    w = prior.natural.layers[-1].weight[2 * n :]
    assert torch.equal(w, torch.zeros_like(w))
    # without warm-up the coupling learns from the first step
    m3 = ICaRL(n_latents=2, random_state=0, max_epochs=3).fit(data.X, data.y)
    w3 = m3.module_.prior.natural.layers[-1].weight[2 * n :]
    assert w3.abs().sum() > 0
    assert m3.module_.prior.coupling_scale.item() == 1.0
    # a warm-up shorter than training switches on midway (after epoch 1 of 3)
    m4 = ICaRL(n_latents=2, coupling_warmup=0.2, random_state=0, max_epochs=3)
    w4 = m4.fit(data.X, data.y).module_.prior.natural.layers[-1].weight[2 * n :]
    assert w4.abs().sum() > 0


def test_validation_split_runs_score_matching_without_grad_mode(data):
    # fit_module evaluates validation batches under torch.no_grad()
    for method in ("exact", "sliced"):
        m = ICaRL(
            n_latents=2,
            score_matching=method,
            tnn_hidden=(4, 4),
            val_fraction=0.2,
            patience=5,
            **FAST,
        ).fit(data.X, data.y)
        assert len(m.history_["val_loss"]) == 2
        assert np.isfinite(m.history_["val_loss"]).all()


def test_wide_layout(data):
    Y = np.full((200, 5), np.nan)
    Y[np.arange(200), data.task_ids] = data.y
    m = MTICaRL(n_latents=2, random_state=0, **FAST).fit(data.X, Y)
    assert m.tasks_.tolist() == [0, 1, 2, 3, 4]
    assert m.transform(data.X, data.y, task_ids=data.task_ids).shape == (200, 2)


def test_clone_and_params():
    m = MTICaRL(n_latents=4, tnn_hidden=(20, 20), score_matching="sliced")
    params = m.get_params()
    for key in (
        "n_latents",
        "tnn_hidden",
        "lambda_hidden",
        "score_matching",
        "n_projections",
        "embedding_dim",
        "conditioning",
        "decoder_var",
    ):
        assert key in params
    c = clone(m)
    assert c.get_params() == params and c is not m
    c.set_params(n_latents=3)
    assert c.n_latents == 3 and m.n_latents == 4
    assert "embedding_dim" not in ICaRL().get_params()


def test_reproducible_with_a_seed(data):
    def fit(seed):
        m = MTICaRL(n_latents=2, random_state=seed, **FAST)
        m.fit(data.X, data.y, task_ids=data.task_ids)
        return m.transform(data.X, data.y, task_ids=data.task_ids)

    for method in ("exact", "sliced"):
        a = ICaRL(n_latents=2, score_matching=method, random_state=3, **FAST)
        b = ICaRL(n_latents=2, score_matching=method, random_state=3, **FAST)
        za = a.fit(data.X, data.y).transform(data.X, data.y)
        zb = b.fit(data.X, data.y).transform(data.X, data.y)
        np.testing.assert_array_equal(za, zb)
    np.testing.assert_array_equal(fit(1), fit(1))
    assert not np.allclose(fit(1), fit(2))


def test_bad_inputs(data):
    X, y, t = data.X, data.y, data.task_ids
    with pytest.raises(NotFittedError, match="not fitted"):
        ICaRL().transform(X, y)
    with pytest.raises(DataError, match="non-finite"):
        Xn = X.copy()
        Xn[3, 1] = np.nan
        ICaRL(n_latents=2, **FAST).fit(Xn, y)
    with pytest.raises(DataError, match="shape"):
        ICaRL(n_latents=2, **FAST).fit(X, y[:-1])
    with pytest.raises(DataError, match="conditions on the target"):
        ICaRL(n_latents=2, **FAST).fit(X)
    with pytest.raises(DataError, match="task_ids"):
        MTICaRL(n_latents=2, **FAST).fit(X, y)
    m = MTICaRL(n_latents=2, **FAST).fit(X, y, task_ids=t)
    with pytest.raises(DataError, match="unseen during fit"):
        m.transform(X, y, task_ids=np.where(t == 4, 7, t))
    with pytest.raises(DataError, match="needs task_ids"):
        m.transform(X, y)
    with pytest.raises(DataError, match="needs y"):
        m.transform(X, task_ids=t)
    with pytest.raises(DataError, match="is expecting 3 features as input"):
        m.transform(X[:, :2], y, task_ids=t)
    with pytest.raises(DataError, match="non-finite"):
        m.transform(np.where(X > 1, np.inf, X), y, task_ids=t)


_WIDTHS = "an int in the range [0, inf) or a sequence of an int in the range [1, inf)"


@pytest.mark.parametrize(
    "params, allowed",
    [
        (dict(score_matching="denoising"), "a str among {'auto', 'exact', 'sliced'}"),
        (dict(n_projections=0), "an int in the range [1, inf)"),
        (dict(tnn_hidden=(8, -1)), _WIDTHS),
        (dict(tnn_hidden=2.5), _WIDTHS),
        (dict(lambda_hidden=-3), _WIDTHS),
        (
            dict(conditioning="target+task+env"),
            "a str among {'target', 'target+task', 'task'}",
        ),
        (dict(n_latents=0), "an int in the range [1, inf)"),
        (
            dict(decoder_var=-1.0),
            "a float in the range (0, inf) or a str among {'learned'}",
        ),
        (dict(coupling_warmup=1.0), "a float in the range [0, 1)"),
        (dict(coupling_warmup=-0.1), "a float in the range [0, 1)"),
        (dict(condition_encoder=None), "a bool"),
    ],
)
def test_bad_hyperparameters(data, params, allowed):
    ((name, value),) = params.items()
    msg = f"The {name!r} parameter of ICaRL must be {allowed}; got {value!r}."
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        ICaRL(**params).fit(data.X, data.y)


def test_bad_mticarl_hyperparameters(data):
    msg = (
        "The 'conditioning' parameter of MTICaRL must be a str among "
        "{'target+task', 'task'}; got 'target'."
    )
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        MTICaRL(conditioning="target").fit(data.X, data.y, task_ids=data.task_ids)
    msg = (
        "The 'embedding_dim' parameter of MTICaRL must be an int in the range "
        "[1, inf) or None; got 0."
    )
    with pytest.raises(InvalidParameterError, match=f"^{re.escape(msg)}$"):
        MTICaRL(embedding_dim=0).fit(data.X, data.y, task_ids=data.task_ids)


def test_icarl_has_no_factorised_prior_parameters():
    params = ICaRL().get_params()
    assert "prior" not in params and "learn_prior_mean" not in params
    assert not hasattr(ICaRL, "prior") and not hasattr(ICaRL, "learn_prior_mean")
