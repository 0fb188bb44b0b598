"""Fresh tasks at every outer step (``BilevelSparseMTL.fit(task_sampler=...)``) and
saving / loading the bilevel learner (regression and multinomial heads, also through
``MTRN(heads="group_lasso", loss="multinomial")``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.datasets import SparseTaskSampler
from identrep.exceptions import DataError, InvalidParameterError
from identrep.models.multitask._bilevel_fresh import FreshBatch, fresh_task_loss
from identrep.models.multitask._bilevel_multinomial import (
    multinomial_heads,
    multinomial_loss,
)
from identrep.models.multitask._mtrn_loss import ObsBatch
from identrep.persistence import load_model, save_model

TINY = dict(n_latents=3, hidden_sizes=(16,), max_epochs=2)


@pytest.fixture(scope="module")
def data():
    return ir.datasets.make_sparse_tasks(
        n_tasks=24, n_samples=40, n_latents=3, random_state=0
    )


@pytest.fixture(scope="module")
def classes():
    return ir.datasets.make_sparse_tasks(
        n_tasks=16, n_samples=30, n_latents=3, n_classes=3, random_state=0
    )


def _fit_fresh(data, seed=0, **kw):
    sampler = SparseTaskSampler.from_data(data)
    m = ir.BilevelSparseMTL(random_state=seed, batch_size=160, **{**TINY, **kw})
    return m.fit(data.X, data.y, task_ids=data.task_ids, task_sampler=sampler)


def test_fresh_tasks_train_and_keep_the_fixed_tasks_heads(data):
    m = _fit_fresh(data)
    # 24 tasks of 40 in batches of 160 = 6 steps an epoch, 4 fresh tasks a step
    assert m.history_["n_epochs"] == 2 and np.isfinite(m.history_["train_loss"]).all()
    assert m.head_weights_.shape == (24, 3)  # final heads: the given tasks
    np.testing.assert_array_equal(m.supports_, m.head_weights_ != 0)
    fixed = ir.BilevelSparseMTL(random_state=0, batch_size=160, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    # same init (an int random_state), other tasks: another representation
    assert not np.allclose(m.transform(data.X), fixed.transform(data.X))


def test_fresh_tasks_same_seed_same_fit_other_seed_other_fit(data):
    a, b, c = _fit_fresh(data), _fit_fresh(data), _fit_fresh(data, seed=1)
    np.testing.assert_array_equal(a.transform(data.X), b.transform(data.X))
    assert not np.allclose(a.transform(data.X), c.transform(data.X))


def test_fresh_task_loss_solves_each_task_cold():
    """The loss of a step equals the lasso fit of every task on its own rows,
    whatever the heads' stored warm starts hold."""
    torch.manual_seed(0)
    net = ir.BilevelSparseMTL(n_latents=3, hidden_sizes=(8,))._build_module(
        5, 2, torch.float64
    )
    net.heads.weight.fill_(5.0)  # a stale warm start must not matter
    x = torch.randn(40, 5, dtype=torch.float64)
    y = torch.randn(40, dtype=torch.float64)
    task = torch.arange(2).repeat_interleave(20)
    loss, n = fresh_task_loss(net, FreshBatch(x, y, task, 2), l1_reg=0.3)
    F = net(x).detach()
    W, b, _ = ir.models.multitask.heads.fit_group_lasso_heads(F, y, task, 2, 0.3)
    expected = 0.5 * ((F * W[task]).sum(1) + b[task] - y).square().mean()
    assert float(n) == 40
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-4)


def test_sampler_draws_follow_the_process(data):
    sampler = SparseTaskSampler.from_data(data, support_prob=0.25, noise_ratio=0.0)
    draw = sampler.sample(2000, np.random.default_rng(0))
    assert draw.rows.shape == (2000, 40) and draw.y.shape == (2000, 40)
    assert all(len(set(r)) == 40 for r in draw.rows[:200])  # distinct rows a task
    assert draw.causal.any(1).all()  # no empty support
    # P(j in S | S non-empty) = 0.25 / (1 - 0.75^3) = 0.432; 6,000 draws: sd 0.0064
    assert abs(draw.causal.mean() - 0.25 / (1 - 0.75**3)) < 0.03
    np.testing.assert_array_equal(draw.weights != 0, draw.causal)
    signal = np.einsum("tnd,td->tn", data.Z[draw.rows], draw.weights)
    np.testing.assert_allclose(draw.y, signal)  # noise_ratio = 0
    noisy = SparseTaskSampler(data.Z, n_samples=40, noise_ratio=0.5)
    d2 = noisy.sample(10, np.random.default_rng(1))
    s2 = np.einsum("tnd,td->tn", data.Z[d2.rows], d2.weights)
    ratio = np.linalg.norm(d2.y - s2, axis=1) / np.linalg.norm(s2, axis=1)
    np.testing.assert_allclose(ratio, 0.5)


def test_sampler_and_fit_errors_name_the_input(data, classes):
    with pytest.raises(InvalidParameterError, match="n_samples"):
        SparseTaskSampler(data.Z, n_samples=10**6)
    with pytest.raises(InvalidParameterError, match="support_prob"):
        SparseTaskSampler(data.Z, support_prob=0.0)
    with pytest.raises(InvalidParameterError, match="Z must be"):
        SparseTaskSampler(np.zeros(5))
    with pytest.raises(InvalidParameterError, match="n_classes"):
        SparseTaskSampler.from_data(classes)
    m = ir.BilevelSparseMTL(random_state=0, **TINY)
    small = SparseTaskSampler(data.Z[:100], n_samples=40)
    with pytest.raises(DataError, match="pool of 100 inputs, but X has 960"):
        m.fit(data.X, data.y, task_ids=data.task_ids, task_sampler=small)
    with pytest.raises(DataError, match="lacks sample"):
        m.fit(data.X, data.y, task_ids=data.task_ids, task_sampler=object())
    m.set_params(batch_size=20)
    with pytest.raises(DataError, match="batch_size"):
        m.fit(
            data.X,
            data.y,
            task_ids=data.task_ids,
            task_sampler=SparseTaskSampler.from_data(data),
        )
    mc = ir.BilevelSparseMTL(random_state=0, loss="multinomial", **TINY)
    with pytest.raises(InvalidParameterError, match="loss='squared'"):
        mc.fit(
            classes.X,
            classes.y,
            task_ids=classes.task_ids,
            task_sampler=SparseTaskSampler(classes.Z, n_samples=30),
        )


# -------------------------------------------------------------- persistence
def test_bilevel_round_trip_gives_identical_outputs(data, tmp_path):
    m = ir.BilevelSparseMTL(random_state=0, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    save_model(m, tmp_path / "m")
    m2 = load_model(tmp_path / "m")
    assert type(m2) is ir.BilevelSparseMTL and m2.get_params() == m.get_params()
    np.testing.assert_array_equal(m.transform(data.X), m2.transform(data.X))
    np.testing.assert_array_equal(
        m.predict(data.X, data.task_ids), m2.predict(data.X, data.task_ids)
    )
    np.testing.assert_array_equal(m.supports_, m2.supports_)
    np.testing.assert_array_equal(m.head_weights_, m2.head_weights_)
    assert m2.score(data.X, data.y, task_ids=data.task_ids) == m.score(
        data.X, data.y, task_ids=data.task_ids
    )


@pytest.mark.parametrize("cls", ["BilevelSparseMTL", "MTRN"])
def test_multinomial_round_trip_gives_identical_outputs(classes, cls, tmp_path):
    labels = np.array(["a", "b", "c"])[classes.y]
    kw = dict(loss="multinomial", random_state=0, **TINY)
    if cls == "MTRN":
        kw.update(heads="group_lasso")
    m = getattr(ir, cls)(**kw).fit(classes.X, labels, task_ids=classes.task_ids)
    save_model(m, tmp_path / "m")
    m2 = load_model(tmp_path / "m")
    assert type(m2) is type(m)
    X, t = classes.X, classes.task_ids
    np.testing.assert_array_equal(m.transform(X), m2.transform(X))
    np.testing.assert_array_equal(m.predict_proba(X, t), m2.predict_proba(X, t))
    np.testing.assert_array_equal(m.predict(X, t), m2.predict(X, t))
    np.testing.assert_array_equal(m.classes_, m2.classes_)
    # the stored warm starts (multinomial heads' buffer) come back too
    np.testing.assert_array_equal(
        m.module_.heads.weight.numpy(), m2.module_.heads.weight.numpy()
    )


# ------------------------------------------------------ MTRN multinomial heads
def test_mtrn_multinomial_heads_match_the_named_estimator(classes):
    """MTRN(heads="group_lasso", loss="multinomial") is the same learner as
    BilevelSparseMTL(loss="multinomial") under the same settings."""
    labels = np.array([10, 20, 30])[classes.y]
    shared = dict(
        loss="multinomial",
        activation="leaky_relu",
        lr=1e-3,
        batch_size=400,
        patience=None,
        val_fraction=0.0,
        lr_schedule=None,
        random_state=0,
        **TINY,
    )
    X, t = classes.X, classes.task_ids
    a = ir.MTRN(heads="group_lasso", **shared).fit(X, labels, task_ids=t)
    b = ir.BilevelSparseMTL(**shared).fit(X, labels, task_ids=t)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.head_weights_, b.head_weights_)
    assert a.head_weights_.shape == (16, 3, 3) and list(a.classes_) == [10, 20, 30]
    P = a.predict_proba(X, t)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert set(a.predict(X, t)) <= {10, 20, 30}
    assert a.score(X, labels, task_ids=t) == pytest.approx(
        np.mean(a.predict(X, t) == labels)
    )
    assert a.supports_.shape == (16, 3)


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_mtrn_multinomial_needs_lasso_heads_and_regression_has_no_proba(data):
    with pytest.raises(InvalidParameterError, match="heads='group_lasso'"):
        ir.MTRN(loss="multinomial", **TINY).fit(data.X, data.y, task_ids=data.task_ids)
    r = ir.MTRN(heads="group_lasso", random_state=0, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert not hasattr(r, "predict_proba") and not hasattr(r, "classes_")
    assert r.predict(data.X, data.task_ids).dtype == np.float64


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_multinomial_validation_split_scores_held_out_rows(classes):
    """With val_fraction, MTRN's multinomial heads train on a split and report a
    validation loss; the masked loss solves heads on the ``fit`` rows only and
    scores the ``score`` rows (checked against solving on the fit rows alone)."""
    m = ir.MTRN(
        heads="group_lasso",
        loss="multinomial",
        val_fraction=0.3,
        patience=5,
        random_state=0,
        **TINY,
    ).fit(classes.X, classes.y, task_ids=classes.task_ids)
    assert np.isfinite(m.history_["val_loss"]).all()
    assert len(m.history_["val_loss"]) == 2 and m.validation_index_.size > 0

    torch.manual_seed(0)
    net = m._empty_module().double().train()
    heads = multinomial_heads(m, 2, 3).double()
    net.heads = heads
    x = torch.randn(60, classes.X.shape[1], dtype=torch.float64)
    labels = torch.randint(3, (60,))
    task = torch.arange(2).repeat_interleave(30)
    fit = torch.rand(60) < 0.7
    batch = ObsBatch(x, labels.double(), task, fit, ~fit)
    with torch.no_grad():
        F = net(x)  # the same batch statistics as inside the loss
        loss_m, n = multinomial_loss(net, batch, l1_reg=0.3)
        heads.weight.zero_()
        W, _, _ = heads.solve(F[fit], labels[fit], task[fit], 0.3)
    F1 = torch.cat([F, torch.ones(60, 1, dtype=F.dtype)], 1)
    logits = torch.einsum("nm,nmk->nk", F1[~fit], W[task[~fit]])
    expected = torch.nn.functional.cross_entropy(logits, labels[~fit])
    assert int(n) == int((~fit).sum())
    assert float(loss_m) == pytest.approx(float(expected), rel=1e-6)


def test_pooled_target_scaling_keeps_the_tasks_relative_weights(data):
    """standardize_targets="pooled" (the bilevel default) centres every task and
    divides all by one pooled std; fresh-task steps do the same per step."""
    m = ir.BilevelSparseMTL(random_state=0, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert m.standardize_targets == "pooled"
    y = data.y.reshape(24, 40)
    np.testing.assert_allclose(m.target_mean_, y.mean(1))
    pooled = np.sqrt(np.mean(y.var(1)))  # equal task sizes: plain mean
    np.testing.assert_allclose(m.target_scale_, np.full(24, pooled))
    from identrep.models.multitask._bilevel_fresh import FreshTaskBatches

    batches = FreshTaskBatches(
        SparseTaskSampler.from_data(data),
        torch.as_tensor(data.X),
        n_tasks=5,
        n_steps=1,
        seed=0,
        standardize="pooled",
        dtype=torch.float64,
        device="cpu",
    )
    yb = next(iter(batches)).y.numpy().reshape(5, 40)
    np.testing.assert_allclose(yb.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(np.mean(yb.var(1)), 1.0)
    assert yb.var(1).std() > 0.05  # tasks keep different variances
