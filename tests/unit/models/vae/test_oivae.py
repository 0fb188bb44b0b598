"""OI-VAE: the group-lasso proximal step in closed form, the grouped decoder, the
proximal schedule and the estimator's errors. The support-recovery run is in
tests/integration/test_oivae_support.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from identrep.exceptions import ConvergenceWarning, DataError, InvalidParameterError
from identrep.models.nn.sparse_coding import GroupedDecoder
from identrep.models.vae import OIVAE
from identrep.models.vae._oivae_loss import (
    group_column_norms,
    group_lasso_penalty,
    prox_group_lasso,
)
from identrep.models.vae.oivae import ProximalObjective, ProximalSGD

FAST = dict(n_latents=2, max_epochs=3, batch_size=32, hidden_sizes=(8,), random_state=0)


def test_prox_on_hand_built_columns(dtype):
    # columns of norm 5, 0.5 and 2 with threshold 1: scaled by 4/5, zeroed, by 1/2
    W = torch.zeros(1, 2, 3, dtype=dtype)
    W[0, :, 0] = torch.tensor([3.0, 4.0])
    W[0, :, 1] = torch.tensor([0.3, 0.4])
    W[0, :, 2] = torch.tensor([0.0, -2.0])
    V = prox_group_lasso(W, 1.0)
    want = torch.zeros_like(W)
    want[0, :, 0] = torch.tensor([2.4, 3.2])
    want[0, :, 2] = torch.tensor([0.0, -1.0])
    torch.testing.assert_close(V, want)
    assert (V[0, :, 1] == 0).all()  # exact zeros, not small numbers
    torch.testing.assert_close(prox_group_lasso(W, 0.0), W)


def test_prox_solves_its_minimisation_problem():
    # argmin_V 0.5 ||V - W||^2 + t sum ||V[g, :, k]||, checked by a generic optimiser
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 2, 2))
    t = 0.8

    def objective(v):
        V = v.reshape(W.shape)
        return 0.5 * ((V - W) ** 2).sum() + t * np.linalg.norm(V, axis=1).sum()

    V = prox_group_lasso(torch.tensor(W), t).numpy()
    best = minimize(
        objective,
        W.ravel(),
        method="Powell",
        options=dict(xtol=1e-10, ftol=1e-14, maxiter=100_000),
    )
    assert objective(V.ravel()) <= best.fun + 1e-9
    # optimality: W - V = t V / ||V|| on kept columns, ||W|| <= t on zeroed ones
    norms = np.linalg.norm(W, axis=1)
    for g in range(3):
        for k in range(2):
            v = V[g, :, k]
            if norms[g, k] <= t:
                assert (v == 0).all()
            else:
                np.testing.assert_allclose(W[g, :, k] - v, t * v / np.linalg.norm(v))


def test_penalty_and_norms():
    W = torch.tensor([[[3.0, 0.0], [4.0, 1.0]]])  # (1 group, dim 2, 2 latents)
    torch.testing.assert_close(group_column_norms(W), torch.tensor([[5.0, 1.0]]))
    torch.testing.assert_close(group_lasso_penalty(W, 0.5), torch.tensor(3.0))


def test_grouped_decoder_routes_each_group_to_its_features():
    torch.manual_seed(0)
    dec = GroupedDecoder(
        2, [1, 0, 1, 2, 0], group_dim=1, hidden_sizes=(), activation="relu"
    )
    z = torch.randn(4, 2)
    out = dec(z)
    # linear generators: feature j of group g is w_g z * a_{g, slot} + b_{g, slot}
    slots = {0: [1, 4], 1: [0, 2], 2: [3]}
    A, b = dec.weights[0], dec.biases[0]
    for g, feats in slots.items():
        u = z @ dec.W[g, 0]
        for s, j in enumerate(feats):
            torch.testing.assert_close(out[:, j], u * A[g, 0, s] + b[g, 0, s])
    # a group whose column for latent 0 is zero does not depend on latent 0
    with torch.no_grad():
        dec.W[2, :, 0] = 0.0
    z2 = z.clone()
    z2[:, 0] += 5.0
    torch.testing.assert_close(dec(z2)[:, 3], dec(z)[:, 3])


def test_every_step_is_followed_by_one_prox():
    calls = []

    class Probe(ProximalObjective):
        def prox(self, module):
            calls.append(self.pending)
            super().prox(module)

    est = OIVAE(groups=[0, 0, 1, 1], group_lasso=0.0, w_optimizer="adam", **FAST)
    obj = Probe(0.0)
    est._make_loss = lambda n: (obj, obj.finish_epoch)
    X = np.random.default_rng(0).normal(size=(100, 4))
    est.fit(X)
    # 90 training rows / 32 = 3 steps per epoch, 3 epochs: every step's prox ran
    # (pending True) before the next step or at the epoch's end
    assert sum(calls) == 9


def test_strong_penalty_switches_every_link_off():
    X = np.random.default_rng(0).normal(size=(120, 4))
    m = OIVAE(groups=[0, 0, 1, 1], group_lasso=1e4, **FAST).fit(X)
    assert not m.support_.any()
    assert (m.group_weights_ == 0).all()
    free = OIVAE(groups=[0, 0, 1, 1], group_lasso=0.0, **FAST).fit(X)
    assert (free.group_norms_ > 0).all()


def test_fitted_attributes_and_labels():
    X = np.random.default_rng(0).normal(size=(120, 5))
    m = OIVAE(groups=np.array([7, 3, 7, 3, 9]), **FAST).fit(X)
    np.testing.assert_array_equal(m.group_labels_, [3, 7, 9])
    np.testing.assert_array_equal(m.groups_, [1, 0, 1, 0, 2])
    assert m.group_norms_.shape == (3, 2) and m.group_weights_.shape == (3, 1, 2)
    assert np.isfinite(m.heldout_nll(X)) and np.isfinite(
        m.heldout_nll(X, n_particles=5)
    )
    one = OIVAE(**FAST).fit(X)  # default: one group per feature
    assert one.group_norms_.shape == (5, 2)


def test_bad_groups_are_named():
    X = np.zeros((10, 3))
    with pytest.raises(
        DataError,
        match=r"one label per feature of X: shape \(3,\); got shape \(2,\)",
    ):
        OIVAE(groups=[0, 1], **FAST).fit(X)
    with pytest.raises(InvalidParameterError, match="'groups' parameter of OIVAE"):
        OIVAE(groups=[0, -1, 2], **FAST).fit(X)
    with pytest.raises(DataError, match="non-negative integers"):
        OIVAE(groups=np.array([0.5, 1.0, 2.0]), **FAST).fit(X)
    with pytest.raises(InvalidParameterError, match="'lr_schedule' parameter of OIVAE"):
        OIVAE(lr_schedule="cosine", **FAST).fit(X)


def _two_factor_data(n=150):
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(n, 2))
    X = np.column_stack(
        [Z[:, 0], 2 * Z[:, 0], Z[:, 1], -Z[:, 1], rng.normal(size=n)]
    ) + 0.1 * rng.normal(size=(n, 5))
    return X


def test_adam_variant_reproduces_the_earlier_training():
    # w_optimizer="adam" is the training of every OI-VAE record made before the
    # proximal SGD: these numbers are what main at bc7e9d6 (before the change)
    # printed for this fit; float32, same operations, so equal to rounding
    X = _two_factor_data()
    with pytest.warns(ConvergenceWarning):
        m = OIVAE(
            n_latents=2,
            group_lasso=0.5,
            w_optimizer="adam",
            max_epochs=3,
            batch_size=32,
            hidden_sizes=(8,),
            random_state=0,
        ).fit(X)
    old = [
        0.8520062565803528, 1.0390616655349731, 0.33819013833999634,
        -0.5333651900291443, 0.6139750480651855, -0.13669347763061523,
        -0.6526111364364624, 0.4775993824005127, -1.0354483127593994,
        -0.3046693503856659,
    ]  # fmt: skip
    np.testing.assert_allclose(m.group_weights_.ravel(), old, rtol=0, atol=1e-6)
    assert m.history_["train_loss"][-1] == pytest.approx(7.064348747112133, abs=1e-5)


def test_sgd_step_is_one_gradient_step_then_the_prox():
    # the hook replaces W by prox(W - lr_w grad, lr_w group_lasso) and clears the
    # gradient, so an Adam step over the same parameter leaves W where it is
    torch.manual_seed(0)
    W = torch.nn.Parameter(torch.randn(3, 2, 4))
    W0 = W.detach().clone()
    c = torch.randn(3, 2, 4)
    steps = ProximalSGD(lr_w=0.1, group_lasso=2.0)
    handle = W.register_post_accumulate_grad_hook(steps.step)
    opt = torch.optim.Adam([W], lr=1.0)
    (W * c).sum().backward()
    assert W.grad is None
    want = prox_group_lasso(W0 - 0.1 * c, 0.2)
    torch.testing.assert_close(W.detach(), want)
    opt.step()
    torch.testing.assert_close(W.detach(), want)
    handle.remove()
    assert steps.n_steps == 1


def test_networks_adam_never_moves_w():
    # lr_w tiny, no penalty: W stays at its initial value to ~lr_w * steps * |grad|
    # (about 1e-10 here) whatever the budget, while Adam would move it ~lr a step
    X = _two_factor_data()
    kw = dict(n_latents=2, group_lasso=0.0, lr_w=1e-12, batch_size=32,
              hidden_sizes=(8,), random_state=0, val_fraction=0.0)  # fmt: skip
    short = OIVAE(max_epochs=2, **kw).fit(X)
    long = OIVAE(max_epochs=6, **kw).fit(X)
    np.testing.assert_allclose(long.group_weights_, short.group_weights_, atol=1e-6)
    enc = [p.detach() for p in long.module_.encoder.parameters()]
    enc0 = [p.detach() for p in short.module_.encoder.parameters()]
    assert (
        max(float((a - b).abs().max()) for a, b in zip(enc, enc0, strict=True)) > 1e-3
    )


def test_sgd_prox_leaves_exact_zeros_and_support_is_nonzero():
    # a weak penalty: some links end exactly at 0 (observed 1 of 10), the others
    # well above it (observed >= 0.075), and support_ is exactly the non-zero ones
    X = _two_factor_data(400)
    m = OIVAE(
        n_latents=2, group_lasso=0.03, lr_w=0.05, max_epochs=40, batch_size=64,
        hidden_sizes=(8,), random_state=0, val_fraction=0.0,
    ).fit(X)  # fmt: skip
    zero = m.group_norms_ == 0
    assert 1 <= zero.sum() <= 8
    assert (m.group_weights_[:, 0, :][zero] == 0).all()  # exact, not small
    np.testing.assert_array_equal(m.support_, ~zero)
    # the hook is gone after fit: a backward through the fitted module leaves W
    W = m.module_.decoder.W
    before = W.detach().clone()
    W.sum().backward()
    torch.testing.assert_close(W.detach(), before)
    assert W.grad is not None


def test_generator_prior_default_follows_the_variant():
    # the paper's N(0, 1) prior counted once against the n training rows
    assert OIVAE()._generator_l2(400) == pytest.approx(1 / 400)
    assert OIVAE(w_optimizer="adam")._generator_l2(400) == 0.0
    assert OIVAE(w_optimizer="adam", generator_l2=0.5)._generator_l2(400) == 0.5


@pytest.mark.parametrize(
    "param, value, expected",
    [
        ("lr_w", 0.0, r"'lr_w' parameter of OIVAE must be a float in the range \(0"),
        ("w_optimizer", "rmsprop", r"'w_optimizer' parameter of OIVAE must be a str"),
        ("w_init_scale", -1.0, r"'w_init_scale' parameter of OIVAE must be"),
        ("generator_l2", -0.5, r"'generator_l2' parameter of OIVAE must be"),
    ],
)
def test_training_parameters_are_validated(param, value, expected):
    X = np.zeros((20, 3))
    with pytest.raises(InvalidParameterError, match=expected):
        OIVAE(**{param: value}, **FAST).fit(X)


def test_w_init_scale_scales_the_initial_draws():
    torch.manual_seed(0)
    a = GroupedDecoder(2, [0, 1, 1], 1, (), "relu").W.detach()
    torch.manual_seed(0)
    b = GroupedDecoder(2, [0, 1, 1], 1, (), "relu", init_scale=3.0).W.detach()
    torch.testing.assert_close(b, 3.0 * a)
