"""Unit tests of MTRN (models/mtrn.py) and the TaskIdentifiable API (pipeline.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sklearn.base import clone

from identrep import MTRN, DataError, NotFittedError, TaskIdentifiable
from identrep.datasets import make_nonlinear_tasks
from identrep.exceptions import InvalidParameterError
from identrep.models.multitask.heads import JointHeads, ridge_heads
from identrep.models.multitask.mtrn import ObsBatch, RowBatch, mtrn_loss
from identrep.models.nn.mlp import MLP, MultiTaskNet
from identrep.training.loop import TRAINING_CONSTRAINTS

FAST = dict(max_epochs=3, batch_size=128)


@pytest.fixture(scope="module")
def data():
    return make_nonlinear_tasks(
        n_tasks=12, n_samples=40, n_latents=3, n_causal=1, n_observed=6, random_state=0
    )


@pytest.fixture(scope="module")
def fitted(data):
    return MTRN(n_latents=3, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )


def _wide_dense(seed, n=150, p=5, T=4, d=2):
    """Rows observing several tasks (about 70% of entries), linear-Gaussian."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    X = np.tanh(Z @ rng.standard_normal((d, p)))
    Y = Z @ rng.standard_normal((d, T)) + 0.1 * rng.standard_normal((n, T))
    Y[rng.random((n, T)) > 0.7] = np.nan
    return X, Y


# ---------------------------------------------------------------- fit/outputs


def test_fit_attributes_and_shapes(fitted, data):
    m = fitted
    F = m.transform(data.X)
    assert F.shape == (480, 3) and F.dtype == np.float64
    assert m.head_weights_.shape == (12, 3) and m.head_bias_.shape == (12,)
    assert m.n_features_in_ == 6 and m.n_tasks_ == 12
    np.testing.assert_array_equal(m.tasks_, np.arange(12))
    assert m.batch_mode_ == "observations"
    assert set(m.history_) >= {
        "train_loss",
        "val_loss",
        "best_epoch",
        "n_epochs",
        "stopped_early",
        "seconds",
    }
    assert m.history_["n_epochs"] == 3 and len(m.history_["val_loss"]) == 3
    assert isinstance(m.module_, MultiTaskNet) and not m.module_.training
    # default architecture: one hidden layer of width 2 * n_features (Table 5)
    widths = [
        mod.out_features
        for mod in m.module_.modules()
        if isinstance(mod, torch.nn.Linear)
    ]
    assert widths == [12, 3]
    assert next(m.module_.parameters()).dtype == torch.float32


def test_predict_is_consistent_with_heads(fitted, data):
    m = fitted
    F = m.transform(data.X)
    expected = (F * m.head_weights_[data.task_ids]).sum(1) + m.head_bias_[data.task_ids]
    np.testing.assert_allclose(m.predict(data.X, data.task_ids), expected)
    all_tasks = m.predict(data.X)
    assert all_tasks.shape == (480, 12)
    np.testing.assert_allclose(all_tasks[np.arange(480), data.task_ids], expected)


def test_same_random_state_gives_identical_representation(data, seed):
    kw = dict(n_latents=3, random_state=seed, **FAST)
    a = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    b = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    np.testing.assert_array_equal(a, b)
    kw["random_state"] = seed + 1
    c = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    assert not np.allclose(a, c)


def test_transform_does_not_depend_on_memory_layout():
    """A DataFrame's .to_numpy() is Fortran-ordered; float32 layers round such an
    input differently (up to 5e-7 on this 5 -> 10 -> 2 net before the fix), so
    inputs are made C-contiguous before the network."""
    import pandas as pd

    d = make_nonlinear_tasks(
        n_tasks=6, n_samples=30, n_latents=2, n_causal=1, n_observed=5, random_state=0
    )
    m = MTRN(n_latents=2, random_state=0, max_epochs=3).fit(
        d.X, d.y, task_ids=d.task_ids
    )
    X = np.random.default_rng(1).standard_normal((180, 5))
    a = m.transform(X)
    np.testing.assert_array_equal(m.transform(np.asfortranarray(X)), a)
    np.testing.assert_array_equal(m.transform(pd.DataFrame(X)), a)


@pytest.mark.parametrize("heads", ["joint", "ridge"])
def test_target_standardisation_makes_fit_scale_equivariant(data, heads):
    kw = dict(n_latents=3, heads=heads, random_state=0, **FAST)
    scale = np.where(data.task_ids % 2 == 0, 1000.0, 0.01)
    a = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids)
    b = MTRN(**kw).fit(data.X, scale * data.y + 5.0, task_ids=data.task_ids)
    np.testing.assert_allclose(a.transform(data.X), b.transform(data.X), rtol=1e-5)
    np.testing.assert_allclose(
        scale * a.predict(data.X, data.task_ids) + 5.0,
        b.predict(data.X, data.task_ids),
        rtol=1e-4,
        atol=1e-6,
    )


def test_ridge_heads_are_solved_on_all_data_after_training(data):
    m = MTRN(
        n_latents=3,
        heads="ridge",
        ridge_alpha=0.01,
        standardize_targets=False,
        random_state=0,
        **FAST,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    assert m.module_.heads is None
    F = torch.as_tensor(m.transform(data.X))
    W, b = ridge_heads(F, torch.tensor(data.y), torch.tensor(data.task_ids), 12, 0.01)
    np.testing.assert_allclose(m.head_weights_, W.numpy(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(m.head_bias_, b.numpy(), rtol=1e-6, atol=1e-8)


def test_joint_heads_are_refit_exactly_after_each_epoch(data):
    kw = dict(
        n_latents=3,
        heads="joint",
        ridge_alpha=0.01,
        val_fraction=0.0,
        standardize_targets=False,
        random_state=0,
        **FAST,
    )
    m = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids)
    F = torch.as_tensor(m.transform(data.X))
    W, b = ridge_heads(F, torch.tensor(data.y), torch.tensor(data.task_ids), 12, 0.01)
    np.testing.assert_allclose(m.head_weights_, W.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.head_bias_, b.numpy(), rtol=1e-4, atol=1e-5)
    free = MTRN(**{**kw, "refit_heads": False}).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert not np.allclose(free.head_weights_, m.head_weights_, atol=1e-3)


@pytest.mark.parametrize("heads", ["joint", "ridge"])
def test_wide_layout_batches_over_rows(seed, heads):
    X, Y = _wide_dense(seed)
    m = MTRN(
        n_latents=2,
        heads=heads,
        ridge_alpha=0.01,
        random_state=seed,
        max_epochs=40,
        batch_size=64,
        lr=1e-2,
    ).fit(X, Y)
    assert m.batch_mode_ == "rows" and m.head_weights_.shape == (4, 2)
    assert m.predict(X).shape == (150, 4)
    assert np.isfinite(m.transform(X)).all()
    assert m.score(X, Y) > 0.5  # a learnable linear-Gaussian problem


def test_sparse_wide_data_with_ridge_heads_batch_over_observations(data):
    X, Y = data.to_wide()  # 12 tasks, one observed entry per row
    kw = dict(n_latents=3, random_state=0, max_epochs=2)
    # 32 rows hold ~3 samples of each task: too few to solve 12 ridge heads on
    m = MTRN(heads="ridge", batch_size=32, **kw).fit(X, Y)
    assert m.batch_mode_ == "observations"
    assert MTRN(heads="ridge", batch_size=480, **kw).fit(X, Y).batch_mode_ == "rows"
    j = MTRN(heads="joint", batch_size=32, **kw).fit(X, Y)
    assert j.batch_mode_ == "rows"


def test_score_is_mean_per_task_r2_and_layout_independent(fitted, data):
    s = fitted.score(data.X, data.y, task_ids=data.task_ids)
    X, Y = data.to_wide()
    assert s == pytest.approx(fitted.score(X, Y))
    pred = fitted.predict(data.X, data.task_ids)
    r2 = []
    for t in range(12):
        m = data.task_ids == t
        y = data.y[m]
        r2.append(1 - ((y - pred[m]) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    assert s == pytest.approx(np.mean(r2))


def test_string_task_labels(data):
    labels = np.array([f"task{t:02d}" for t in data.task_ids])
    m = MTRN(n_latents=3, random_state=0, **FAST).fit(data.X, data.y, task_ids=labels)
    assert m.tasks_[0] == "task00" and len(m.tasks_) == 12
    assert m.predict(data.X[:5], labels[:5]).shape == (5,)


def test_no_validation_trains_all_epochs(data):
    m = MTRN(n_latents=3, val_fraction=0.0, random_state=0, **FAST).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    assert m.history_["val_loss"] == [] and m.history_["n_epochs"] == 3


def test_float64_and_custom_architecture(data):
    m = MTRN(
        n_latents=3,
        hidden_sizes=(7, 5),
        activation="tanh",
        dtype="float64",
        standardize_inputs=False,
        lr_schedule=None,
        random_state=0,
        **FAST,
    ).fit(data.X, data.y, task_ids=data.task_ids)
    assert next(m.module_.parameters()).dtype == torch.float64
    widths = [
        mod.out_features
        for mod in m.module_.modules()
        if isinstance(mod, torch.nn.Linear)
    ]
    assert widths == [7, 5, 3]


def test_clone_and_params():
    m = MTRN(n_latents=4, heads="ridge", lr=3e-3)
    c = clone(m)
    assert c.get_params() == m.get_params() and c is not m
    assert not hasattr(c, "module_")


# ---------------------------------------------------------------- the loss


def test_loss_matches_manual_half_mse(seed):
    torch.manual_seed(seed)
    net = MultiTaskNet(MLP(4, [6], 2), JointHeads(2, 3)).double()
    x = torch.randn(10, 4, dtype=torch.float64)
    y = torch.randn(10, dtype=torch.float64)
    t = torch.randint(0, 3, (10,))
    loss, n = mtrn_loss(net, ObsBatch(x, y, t, None, None))
    pred = net.heads.gather(net(x), t)
    assert int(n) == 10
    torch.testing.assert_close(loss, 0.5 * (pred - y).square().mean())
    # the same observations in wide form (one observed entry per row)
    Y = torch.zeros(10, 3, dtype=torch.float64)
    Y[torch.arange(10), t] = y
    M = torch.zeros(10, 3, dtype=torch.bool)
    M[torch.arange(10), t] = True
    loss_w, n_w = mtrn_loss(net, RowBatch(x, Y, M, M))
    torch.testing.assert_close(loss_w, loss)
    assert int(n_w) == 10
    # ridge heads: obs and row forms agree too
    net.heads = None
    lr_, _ = mtrn_loss(net, ObsBatch(x, y, t, None, None), alpha=0.1)
    lw_, _ = mtrn_loss(net, RowBatch(x, Y, M, M), alpha=0.1)
    torch.testing.assert_close(lr_, lw_)


def test_ridge_validation_loss_scores_held_out_samples_only(seed):
    torch.manual_seed(seed)
    net = MultiTaskNet(MLP(4, [6], 2), None).double()
    x = torch.randn(12, 4, dtype=torch.float64)
    y = torch.randn(12, dtype=torch.float64)
    t = torch.tensor([0] * 6 + [1] * 6)
    fit = torch.tensor([True] * 4 + [False] * 2 + [True] * 5 + [False])
    loss, n = mtrn_loss(net, ObsBatch(x, y, t, fit, ~fit), alpha=0.1)
    F = net(x)
    W, b = ridge_heads(F[fit], y[fit], t[fit], 2, 0.1)
    pred = (F * W[t]).sum(1) + b[t]
    assert int(n) == 3
    torch.testing.assert_close(loss, 0.5 * (pred - y)[~fit].square().mean())


# ---------------------------------------------------------------- validation


_POS_INT = r"an int in the range \[1, inf\)"
_POS_FLOAT = r"a float in the range \(0, inf\)"


@pytest.mark.parametrize(
    ("kwargs", "allowed"),
    [
        ({"n_latents": 0}, _POS_INT),
        ({"n_latents": True}, _POS_INT),  # a bool is never a count
        ({"batch_size": 0}, _POS_INT),
        ({"max_epochs": 1.5}, _POS_INT),
        ({"patience": 0}, _POS_INT + " or None"),
        ({"heads": "lasso"}, r"a str among \{'group_lasso', 'joint', 'ridge'\}"),
        ({"ridge_alpha": 0.0}, _POS_FLOAT),
        ({"lr": -1.0}, _POS_FLOAT),
        ({"val_fraction": 1.0}, r"a float in the range \[0, 1\)"),
        ({"grad_clip": 0.0}, _POS_FLOAT + " or None"),
        ({"grad_clip": True}, _POS_FLOAT + " or None"),
        ({"weight_decay": -1.0}, r"a float in the range \[0, inf\)"),
        ({"lr_schedule": "step"}, r"a str among \{'cosine'\} or None"),
        ({"hidden_sizes": "64"}, r"a sequence of an int in the range .* or None"),
        ({"hidden_sizes": (8, 0)}, r"a sequence of an int in the range .* or None"),
        ({"dtype": "float16"}, r"'float32' or 'float64' \(or the torch dtype\)"),
        ({"activation": "swish"}, r"a str among \{'elu', 'gelu', .*'tanh'\}"),
        ({"refit_heads": 1}, "a bool"),
        ({"standardize_inputs": "yes"}, "a bool or None"),
        ({"verbose": 2}, "a bool"),
    ],
)
def test_invalid_hyperparameters(data, kwargs, allowed):
    (name, value) = next(iter(kwargs.items()))
    match = rf"The '{name}' parameter of MTRN must be {allowed}; got "
    with pytest.raises(InvalidParameterError, match=match + re.escape(repr(value))):
        MTRN(**{"n_latents": 3, **FAST, **kwargs}).fit(
            data.X, data.y, task_ids=data.task_ids
        )


def test_training_budget_follows_the_loops_constraints():
    """MTRN's budget hyperparameters are the very constraints fit_module checks."""
    for name in ("lr", "max_epochs", "batch_size", "patience", "grad_clip"):
        assert MTRN._parameter_constraints[name] is TRAINING_CONSTRAINTS[name]


def test_invalid_data(data):
    m = MTRN(n_latents=3, **FAST)
    X = data.X.copy()
    X[17, 2] = np.nan
    with pytest.raises(
        DataError,
        match=r"X contains 1 non-finite \(NaN or inf\) value\(s\) \(first at row 17",
    ):
        m.fit(X, data.y, task_ids=data.task_ids)
    with pytest.raises(DataError, match="task_ids is required when y is 1-D"):
        m.fit(data.X, data.y)
    with pytest.raises(DataError, match=r"y must have shape \(480,\)"):
        m.fit(data.X, data.y[:-1], task_ids=data.task_ids)


def test_unfitted_and_mismatched_inputs(fitted, data):
    with pytest.raises(NotFittedError, match="not fitted yet"):
        MTRN().transform(data.X)
    with pytest.raises(ValueError, match="n_features_in_=6"):
        fitted.transform(data.X[:, :4])
    with pytest.raises(DataError, match="unseen during fit"):
        fitted.predict(data.X[:3], [0, 1, 99])
    with pytest.raises(DataError, match=r"task_ids must have shape \(3,\)"):
        fitted.predict(data.X[:3], [0, 1])
    with pytest.raises(DataError, match="unseen during fit"):
        fitted.score(data.X[:4], data.y[:4], task_ids=[0, 0, 50, 50])


# ---------------------------------------------------------------- pipeline API


def test_pipeline_api(data):
    pipe = TaskIdentifiable(n_latents=3, mtrn_params=FAST, random_state=0).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    F = pipe.features(data.X)
    np.testing.assert_allclose(F.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(F.std(0), 1, rtol=1e-10)
    Z = pipe.transform(data.X)
    assert Z.shape == (480, 3)
    np.testing.assert_allclose(Z, pipe.mtlcm_.transform(F))
    assert pipe.mtlcm_.sigma_obs == 1e-4 and pipe.mtrn_.max_epochs == 3
    assert pipe.causal_indicators_.shape == (12, 3)
    assert pipe.causal_mask_.dtype == bool and pipe.spurious_coefs_.shape == (12, 3)
    assert set(pipe.causal_sets()) == set(range(12))
    assert pipe.predict(data.X[:4], data.task_ids[:4]).shape == (4,)
    again = TaskIdentifiable(n_latents=3, mtrn_params=FAST, random_state=0).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    np.testing.assert_array_equal(again.transform(data.X), Z)


def test_pipeline_names_rank_deficient_features(data):
    # a last hidden layer of 2 units gives features of rank <= 2 < n_latents = 3
    # (Table 3 at d = 80: 6 dead ReLUs of 80 left rank 74)
    narrow = {**FAST, "hidden_sizes": (16, 2)}
    with pytest.raises(DataError, match=r"features have rank [0-2], fewer than "):
        TaskIdentifiable(n_latents=3, mtrn_params=narrow, random_state=0).fit(
            data.X, data.y, task_ids=data.task_ids
        )


def test_pipeline_rejects_conflicting_sub_parameters(data):
    fit = dict(X=data.X, y=data.y, task_ids=data.task_ids)
    with pytest.raises(
        InvalidParameterError, match=r"mtrn_params must not set \['n_latents'\]"
    ):
        TaskIdentifiable(3, mtrn_params={"n_latents": 4}).fit(**fit)
    with pytest.raises(
        InvalidParameterError, match="mtlcm_params must not set.*sigma_obs"
    ):
        TaskIdentifiable(3, mtlcm_params={"sigma_obs": 0.1}).fit(**fit)
    with pytest.raises(
        InvalidParameterError,
        match=r"The 'mtrn_params' parameter of TaskIdentifiable must be an instance "
        r"of dict or None; got \[\('lr', 1\)\]\.",
    ):
        TaskIdentifiable(3, mtrn_params=[("lr", 1)]).fit(**fit)
    with pytest.raises(
        InvalidParameterError,
        match=r"mtrn_params has unknown MTRN parameter\(s\) \['lrr'\]",
    ):
        TaskIdentifiable(3, mtrn_params={"lrr": 1e-3}).fit(**fit)
    # each stage's own constraints are checked before any data is read
    with pytest.raises(
        InvalidParameterError, match=r"The 'lr' parameter of MTRN must be .*; got -1\.0"
    ):
        TaskIdentifiable(3, mtrn_params={"lr": -1.0}).fit(**fit)
    with pytest.raises(
        InvalidParameterError, match=r"The 'tol' parameter of MTLCM must be .*; got 0"
    ):
        TaskIdentifiable(3, mtlcm_params={"tol": 0}).fit(**fit)
    with pytest.raises(NotFittedError):
        TaskIdentifiable(3).transform(data.X)


# ------------------------------------------------------- scikit-learn contract


def test_fit_on_device_follows_it(data, device, seed):
    kw = dict(n_latents=3, device=device, random_state=seed, **FAST)
    m = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids)
    assert m.device_.type == device.type
    assert all(p.device.type == device.type for p in m.module_.parameters())
    F = m.transform(data.X)
    assert isinstance(F, np.ndarray) and F.dtype == np.float64 and F.shape == (480, 3)
    again = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids)
    np.testing.assert_array_equal(again.transform(data.X), F)


@pytest.mark.parametrize("heads", ["joint", "ridge"])
def test_fit_transform_equals_fit_then_transform(data, heads, device):
    kw = dict(n_latents=3, heads=heads, device=device, random_state=0, **FAST)
    Z = MTRN(**kw).fit_transform(data.X, data.y, task_ids=data.task_ids)
    ref = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids).transform(data.X)
    np.testing.assert_array_equal(Z, ref)
    m = MTRN(**kw).fit(data.X, data.y, task_ids=data.task_ids)
    assert m.n_latents_ == 3
    assert m.get_feature_names_out().tolist() == ["mtrn0", "mtrn1", "mtrn2"]


def test_feature_names_are_recorded_and_checked(data):
    import pandas as pd

    cols = [f"x{j}" for j in range(6)]
    X = pd.DataFrame(data.X, columns=cols)
    m = MTRN(n_latents=3, random_state=0, **FAST).fit(X, data.y, task_ids=data.task_ids)
    assert m.feature_names_in_.tolist() == cols and m.feature_names_in_.dtype == object
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        F = m.transform(data.X)
    np.testing.assert_array_equal(m.transform(X), F)
    with pytest.raises(
        DataError,
        match=r"(?s)The feature names should match those that were passed during "
        r"fit\.\nFeature names unseen at fit time:\n- z0\nFeature names seen at fit "
        r"time, yet now missing:\n- x0\n.*pass the columns of fit, in the same order",
    ):
        m.transform(X.rename(columns={"x0": "z0"}))
    with pytest.raises(
        DataError, match="must be in the same order as they were in fit"
    ):
        m.predict(X[cols[::-1]])
    with pytest.raises(DataError, match="unseen at fit time"):
        m.score(X.rename(columns={"x1": "q"}), data.y, task_ids=data.task_ids)
    # refitting on an array forgets the names
    m.fit(data.X, data.y, task_ids=data.task_ids)
    assert not hasattr(m, "feature_names_in_")


def test_fit_refuses_missing_sparse_and_empty_input(data):
    import scipy.sparse as sp

    m = MTRN(n_latents=3, **FAST)
    with pytest.raises(
        DataError, match="MTRN requires y to be passed, but the target y is None"
    ):
        m.fit(data.X, None)
    with pytest.raises(TypeError, match="MTRN does not accept sparse input"):
        m.fit(sp.csr_matrix(data.X), data.y, task_ids=data.task_ids)
    with pytest.raises(DataError, match=r"0 feature\(s\) \(shape=\(480, 0\)\)"):
        m.fit(data.X[:, :0], data.y, task_ids=data.task_ids)
    with pytest.raises(DataError, match="Complex data not supported"):
        m.fit(data.X + 0j, data.y, task_ids=data.task_ids)
    with pytest.raises(DataError, match="Reshape your data"):
        MTRN(n_latents=3, random_state=0, **FAST).fit(
            data.X, data.y, task_ids=data.task_ids
        ).transform(data.X[0])


def test_load_and_fit_build_the_same_network(fitted):
    """One construction (MTRN._build_module) for fit and for loading a saved model."""
    empty = fitted._empty_module()
    a, b = fitted.module_.state_dict(), empty.state_dict()
    assert a.keys() == b.keys()
    assert all(a[k].shape == b[k].shape and a[k].dtype == b[k].dtype for k in a)


def test_pipeline_fit_transform_names_and_causal_sets(data, device):
    import pandas as pd

    X = pd.DataFrame(data.X, columns=[f"c{j}" for j in range(6)])
    kw = dict(n_latents=3, mtrn_params={**FAST, "device": device}, random_state=0)
    pipe = TaskIdentifiable(**kw)
    Z = pipe.fit_transform(X, data.y, task_ids=data.task_ids)
    np.testing.assert_array_equal(Z, pipe.transform(X))
    np.testing.assert_array_equal(
        Z, TaskIdentifiable(**kw).fit(X, data.y, task_ids=data.task_ids).transform(X)
    )
    assert pipe.n_latents_ == 3 and pipe.feature_names_in_.tolist() == list(X.columns)
    with pytest.raises(DataError, match="unseen at fit time"):
        pipe.transform(X.rename(columns={"c0": "zz"}))
    sets = pipe.causal_sets()
    assert list(sets) == list(range(12))
    for key, idx in sets.items():
        assert type(key) is int and isinstance(idx, list)
        assert all(type(j) is int for j in idx)
        assert idx == np.flatnonzero(pipe.causal_indicators_[key] >= 0.5).tolist()
