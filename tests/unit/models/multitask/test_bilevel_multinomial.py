"""BilevelSparseMTL(loss="multinomial"): group-lasso multinomial heads on small
classification tasks (fitted attributes, labels of any type, errors), the padding
of whole-task batches, and the outer gradient against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.exceptions import DataError
from identrep.models.multitask._bilevel_multinomial import multinomial_loss, pad_tasks
from identrep.models.multitask._mtrn_loss import ObsBatch

TINY = dict(n_latents=3, hidden_sizes=(16,), max_epochs=2, loss="multinomial")


@pytest.fixture(scope="module")
def data():
    return ir.datasets.make_sparse_tasks(
        n_tasks=16, n_samples=30, n_latents=3, n_classes=3, random_state=0
    )


@pytest.fixture(scope="module")
def fitted(data):
    labels = np.array(["a", "b", "c"])[data.y]
    m = ir.BilevelSparseMTL(random_state=0, **TINY)
    return m.fit(data.X, labels, task_ids=data.task_ids), labels


def test_multinomial_heads_shapes_and_predictions(data, fitted):
    m, labels = fitted
    assert m.head_weights_.shape == (16, 3, 3) and m.head_bias_.shape == (16, 3)
    assert list(m.classes_) == ["a", "b", "c"]
    assert m.supports_.shape == (16, 3) and m.supports_.dtype == bool
    np.testing.assert_array_equal(
        m.supports_, np.linalg.norm(m.head_weights_, axis=-1) > 0
    )
    P = m.predict_proba(data.X, data.task_ids)
    assert P.shape == (480, 3)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    pred = m.predict(data.X, data.task_ids)
    assert set(pred) <= {"a", "b", "c"}
    acc = m.score(data.X, labels, task_ids=data.task_ids)
    assert acc == pytest.approx(np.mean(pred == labels))
    assert np.isfinite(m.history_["train_loss"]).all()
    assert m.transform(data.X).shape == (480, 3)


def test_multinomial_same_seed_same_fit(data, fitted):
    m, labels = fitted
    b = ir.BilevelSparseMTL(random_state=0, **TINY).fit(
        data.X, labels, task_ids=data.task_ids
    )
    np.testing.assert_array_equal(m.transform(data.X), b.transform(data.X))
    np.testing.assert_array_equal(m.head_weights_, b.head_weights_)


def test_multinomial_errors_name_the_input(data, fitted):
    m = ir.BilevelSparseMTL(random_state=0, **TINY)
    with pytest.raises(DataError, match="task_ids"):
        m.fit(data.X, data.y)
    with pytest.raises(DataError, match="at least 2 classes"):
        m.fit(data.X, np.zeros(480, dtype=int), task_ids=data.task_ids)
    with pytest.raises(DataError, match="1-D class labels"):
        m.fit(data.X, np.zeros((480, 2)), task_ids=data.task_ids)
    fitted_m, _ = fitted
    with pytest.raises(DataError, match="needs task_ids"):
        fitted_m.predict(data.X)
    reg = ir.datasets.make_sparse_tasks(
        n_tasks=8, n_samples=20, n_latents=3, random_state=0
    )
    r = ir.BilevelSparseMTL(
        n_latents=3, hidden_sizes=(8,), max_epochs=1, random_state=0
    ).fit(reg.X, reg.y, task_ids=reg.task_ids)
    assert not hasattr(r, "predict_proba")  # regression heads: no probabilities
    r.set_params(loss="multinomial")  # changed after a regression fit
    with pytest.raises(DataError, match="loss='multinomial'"):
        r.predict_proba(reg.X, reg.task_ids)


def test_pad_tasks_places_every_row_once():
    F = torch.arange(10.0).reshape(5, 2)
    local = torch.tensor([1, 0, 1, 1, 0])
    labels = torch.tensor([0, 1, 1, 0, 1])
    Fp, Yp, omega, pos = pad_tasks(F, labels, local, 2, 2)
    assert Fp.shape == (2, 3, 3) and omega.sum() == 5
    np.testing.assert_array_equal(omega.numpy(), [[1, 1, 0], [1, 1, 1]])
    for i in range(5):
        np.testing.assert_array_equal(Fp[local[i], pos[i], :2].numpy(), F[i].numpy())
        assert Fp[local[i], pos[i], 2] == 1 and Yp[local[i], pos[i], labels[i]] == 1
    assert (Fp[omega == 0] == 0).all()


def test_multinomial_outer_gradient_matches_finite_differences(data, monkeypatch):
    """Float64 central differences along a random direction of the extractor's
    parameters, with lambda_max held at its unperturbed value (it is a
    stop-gradient constant of the method)."""
    from identrep.models.multitask import _bilevel_multinomial as bm

    m = ir.BilevelSparseMTL(
        random_state=0,
        dtype="float64",
        inner_tol=1e-13,
        inner_max_iter=50_000,
        **TINY,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    net = m.module_.eval()
    net.heads.weight.zero_()
    sel = data.task_ids < 4
    batch = ObsBatch(
        torch.as_tensor(data.X[sel]),
        torch.as_tensor(data.y[sel], dtype=torch.float64),
        torch.as_tensor(data.task_ids[sel]),
        None,
        None,
    )
    frozen, real = [], bm.lambda_max_multinomial

    def fixed(F, Y, omega):
        if not frozen:
            frozen.append(real(F, Y, omega))
        return frozen[0]

    monkeypatch.setattr(bm, "lambda_max_multinomial", fixed)
    params = [p for p in net.parameters() if p.requires_grad]
    loss, _ = multinomial_loss(net, batch, l1_reg=0.3)
    grads = torch.autograd.grad(loss, params)
    g = torch.Generator().manual_seed(0)
    dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]
    analytic = float(sum((a * v).sum() for a, v in zip(grads, dirs, strict=True)))
    eps, vals = 1e-6, []
    with torch.no_grad():
        for sign in (1, -1):
            for p, v in zip(params, dirs, strict=True):
                p.add_(sign * eps * v)
            vals.append(float(multinomial_loss(net, batch, l1_reg=0.3)[0]))
            for p, v in zip(params, dirs, strict=True):
                p.sub_(sign * eps * v)
    fd = (vals[0] - vals[1]) / (2 * eps)
    assert abs(analytic - fd) / abs(fd) < 1e-4, (analytic, fd)
