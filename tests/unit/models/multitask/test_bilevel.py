"""BilevelSparseMTL, MTRN(heads="group_lasso") and RidgeICA: the estimator contract
on small data (fitted attributes, both layouts, warm starts, persistence of the
hyperparameters), and the gradients of the outer loss through the lasso heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.exceptions import InvalidParameterError
from identrep.models.multitask.mtrn import mtrn_loss

TINY = dict(n_latents=3, hidden_sizes=(16,), max_epochs=2)


@pytest.fixture(scope="module")
def data():
    return ir.datasets.make_sparse_tasks(
        n_tasks=24, n_samples=40, n_latents=3, random_state=0
    )


def test_bilevel_fits_sparse_heads_and_transforms(data):
    m = ir.BilevelSparseMTL(random_state=0, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert m.transform(data.X).shape == (960, 3)
    assert m.head_weights_.shape == (24, 3) and m.supports_.dtype == bool
    assert np.array_equal(m.supports_, m.head_weights_ != 0)
    assert not m.supports_.all()  # l1_reg = 0.3 zeroes some weights
    assert m.get_params()["l1_reg"] == 0.3 and "heads" not in m.get_params()
    assert np.isfinite(m.history_["train_loss"]).all()


def test_wide_layout_and_dataframe_feature_names(data):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(data.X, columns=[f"x{i}" for i in range(data.X.shape[1])])
    Y = np.full((960, 24), np.nan)
    Y[np.arange(960), data.task_ids] = data.y
    m = ir.BilevelSparseMTL(random_state=0, **TINY).fit(X, Y)
    assert list(m.feature_names_in_) == list(X.columns)
    assert m.fit_transform(X, Y).shape == (960, 3)


def test_same_seed_same_fit(data):
    a = ir.BilevelSparseMTL(random_state=1, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    b = ir.BilevelSparseMTL(random_state=1, **TINY).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    np.testing.assert_array_equal(a.transform(data.X), b.transform(data.X))


def test_mtrn_group_lasso_heads_and_l1_reg_constraint(data):
    m = ir.MTRN(heads="group_lasso", l1_reg=0.5, random_state=0, **TINY)
    m.fit(data.X, data.y, task_ids=data.task_ids)
    assert (m.head_weights_ == 0).any()
    # the warm-start buffer holds every task's last solution
    assert m.module_.heads.weight.shape == (24, 3)
    with pytest.raises(InvalidParameterError, match="'l1_reg' parameter of MTRN"):
        ir.MTRN(heads="group_lasso", l1_reg=1.0).fit(
            data.X, data.y, task_ids=data.task_ids
        )


def test_ridge_ica_returns_unmixed_features(data):
    m = ir.RidgeICA(random_state=0, **TINY).fit(data.X, data.y, task_ids=data.task_ids)
    S = m.transform(data.X)
    assert S.shape == (960, 3)
    np.testing.assert_allclose(np.corrcoef(S.T), np.eye(3), atol=1e-6)


@pytest.mark.parametrize("diff", ["implicit", "unrolled"])
def test_outer_gradient_through_lasso_heads_matches_finite_differences(
    data, diff, monkeypatch
):
    """The MTRN loss with lasso heads, in float64, against central differences
    along a random direction of the extractor's parameters.

    The penalty lam = l1_reg * lambda_max(features) is a constant for the
    gradient (stop-gradient, as in the method), so the finite differences hold it
    at its value for the unperturbed parameters.
    """
    from identrep.models.multitask.heads import group_lasso as gl

    m = ir.BilevelSparseMTL(
        random_state=0,
        dtype="float64",
        inner_tol=1e-13,
        inner_max_iter=50_000,
        inner_diff=diff,
        **TINY,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    net = m.module_.eval()  # eval: batch norm uses fixed statistics
    sel = data.task_ids < 8
    batch = ir.models.multitask.mtrn.ObsBatch(
        torch.as_tensor(data.X[sel]),
        torch.as_tensor(data.y[sel]),
        torch.as_tensor(data.task_ids[sel]),
        None,
        None,
    )
    params = [p for p in net.parameters() if p.requires_grad]
    frozen = []
    real = gl.lambda_max_quadratic

    def fixed_lambda_max(C):
        if not frozen:
            frozen.append(real(C))
        return frozen[0]

    monkeypatch.setattr(gl, "lambda_max_quadratic", fixed_lambda_max)
    loss, _ = mtrn_loss(net, batch, l1_reg=0.3)
    grads = torch.autograd.grad(loss, params)
    g = torch.Generator().manual_seed(0)
    dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]
    analytic = float(sum((a * v).sum() for a, v in zip(grads, dirs, strict=True)))
    eps, vals = 1e-6, []
    with torch.no_grad():
        for sign in (1, -1):
            for p, v in zip(params, dirs, strict=True):
                p.add_(sign * eps * v)
            vals.append(float(mtrn_loss(net, batch, l1_reg=0.3)[0]))
            for p, v in zip(params, dirs, strict=True):
                p.sub_(sign * eps * v)
    fd = (vals[0] - vals[1]) / (2 * eps)
    assert abs(analytic - fd) / abs(fd) < 1e-4, (analytic, fd)
