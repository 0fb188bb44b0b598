"""Tests of the MTLCM estimator (models/multitask/mtlcm.py): API, layouts, errors.

Recovery at paper scale is in tests/integration/test_mtlcm_recovery.py; here the
problems are small (a fit takes well under a second).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone

from identrep import MTLCM
from identrep.datasets import TaskData, make_linear_tasks
from identrep.exceptions import (
    ConvergenceWarning,
    DataError,
    InvalidParameterError,
    NotFittedError,
)
from identrep.metrics import mcc

T, N, D, K = 30, 60, 4, 2


@pytest.fixture(scope="module")
def data(seed) -> TaskData:
    return make_linear_tasks(
        n_tasks=T, n_samples=N, n_latents=D, n_causal=K, random_state=seed
    )


@pytest.fixture(scope="module")
def model(data, seed) -> MTLCM:
    return MTLCM(random_state=seed).fit(data.X, data.y, task_ids=data.task_ids)


def _tiny(seed=0, **kwargs):
    base = dict(n_tasks=8, n_samples=30, n_latents=3, n_causal=1, random_state=seed)
    return make_linear_tasks(**{**base, **kwargs})


# ------------------------------------------------------------- sklearn contract


def test_get_params_and_clone():
    m = MTLCM(n_latents=3, sigma_s=0.2, n_init=2, random_state=5)
    params = m.get_params()
    assert params["n_latents"] == 3 and params["sigma_s"] == 0.2
    assert params["n_init"] == 2 and params["random_state"] == 5
    assert set(params) == {
        "n_latents",
        "sigma_s",
        "sigma_s_grid",
        "sigma_obs",
        "gamma_bound",
        "init",
        "n_init",
        "max_iter",
        "tol",
        "chunk_size",
        "device",
        "random_state",
        "verbose",
    }
    c = clone(m)
    assert c is not m and c.get_params() == params
    assert c.set_params(sigma_obs=0.05) is c and c.sigma_obs == 0.05
    assert m.sigma_obs == 0.01


def test_clone_of_fitted_is_unfitted(model):
    c = clone(model)
    assert not hasattr(c, "mixing_")
    with pytest.raises(NotFittedError):
        c.transform(np.zeros((2, D)))


def test_init_does_no_validation():
    MTLCM(sigma_s=0, n_init=0, init="foo")  # errors are raised at fit, not here


# ------------------------------------------------------------ fitted attributes


def test_fit_returns_self():
    d = _tiny()
    m = MTLCM(random_state=0)
    assert m.fit(d.X, d.y, task_ids=d.task_ids) is m


def test_fitted_attributes(model, data):
    m = model
    assert m.mixing_.shape == (D, D) and m.unmixing_.shape == (D, D)
    assert m.causal_indicators_.shape == (T, D)
    assert np.all((m.causal_indicators_ >= 0) & (m.causal_indicators_ <= 1))
    np.testing.assert_array_equal(m.causal_mask_, m.causal_indicators_ >= 0.5)
    assert m.causal_mask_.dtype == bool
    assert m.spurious_coefs_.shape == m.target_slopes_.shape == (T, D)
    assert np.isfinite(m.log_likelihood_) and isinstance(m.log_likelihood_, float)
    assert isinstance(m.n_iter_, int) and m.n_iter_ >= 1
    assert m.converged_ is True
    np.testing.assert_array_equal(m.tasks_, np.arange(T))
    assert m.n_features_in_ == D and m.n_latents_ == D and m.n_tasks_ == T
    assert m.restart_log_likelihoods_ == [m.log_likelihood_]
    assert m.fit_seconds_ > 0
    # per-task means used for centring
    np.testing.assert_allclose(m.x_mean_, data.X.reshape(T, N, D).mean(1), atol=1e-12)
    np.testing.assert_allclose(m.y_mean_, data.y.reshape(T, N).mean(1), atol=1e-12)


def test_mixing_unmixing_and_transform(model, data):
    m = model
    np.testing.assert_allclose(m.unmixing_ @ m.mixing_, np.eye(D), atol=1e-10)
    np.testing.assert_allclose(
        m.transform(data.X), data.X @ np.linalg.pinv(m.mixing_).T, rtol=1e-8, atol=1e-10
    )
    # canonical signs: the largest-magnitude entry of every column is positive
    A = m.mixing_
    assert np.all(A[np.abs(A).argmax(axis=0), np.arange(D)] > 0)


def test_slopes_coefficients_consistent(model):
    m = model
    c = m.causal_indicators_
    np.testing.assert_allclose(
        m.spurious_coefs_ * np.maximum(1 - c, 1e-6), m.target_slopes_, rtol=1e-12
    )


def test_causal_sets(model):
    sets = model.causal_sets()
    assert list(sets) == list(range(T))
    for t, idx in sets.items():
        np.testing.assert_array_equal(idx, np.flatnonzero(model.causal_mask_[t]))
    loose = model.causal_sets(threshold=0.0)
    assert sum(map(len, loose.values())) >= sum(map(len, sets.values()))


def test_recovers_latents_and_causal_structure(model, data):
    """Sanity check at unit scale (the recovery tests live in tests/integration)."""
    Z_hat = model.transform(data.X)
    assert Z_hat.shape == (T * N, D)
    assert mcc(data.Z, Z_hat) >= 0.99
    # every task keeps at least one causal latent and at most D - 1
    n_causal = model.causal_mask_.sum(axis=1)
    assert n_causal.min() >= 1 and n_causal.max() <= D - 1


# ------------------------------------------------------------------- likelihood


def test_score_on_training_data_equals_log_likelihood(model, data):
    s = model.score(data.X, data.y, task_ids=data.task_ids)
    np.testing.assert_allclose(s, model.log_likelihood_, rtol=1e-7)
    X, Y = data.to_wide()
    np.testing.assert_allclose(model.score(X, Y), model.log_likelihood_, rtol=1e-7)


def test_task_log_likelihood_is_per_task(model, data):
    ll = model.task_log_likelihood(data.X, data.y, task_ids=data.task_ids)
    assert ll.shape == (T,)
    np.testing.assert_allclose(ll.sum() / (T * N), model.log_likelihood_, rtol=1e-7)
    # a subset of tasks, given in another order, is matched by label
    sel = np.isin(data.task_ids, [7, 2])
    sub = model.task_log_likelihood(
        data.X[sel], data.y[sel], task_ids=data.task_ids[sel]
    )
    np.testing.assert_allclose(sub, ll[[2, 7]], rtol=1e-10)


def test_score_uses_fitted_intercepts(model, data):
    """Held-out data are centred at the training means: shifting X lowers the score,
    while refitting on shifted data (task-wise centring) gives the same likelihood."""
    offset = np.random.default_rng(0).normal(size=(T, D))[data.task_ids]
    assert model.score(data.X + offset, data.y, task_ids=data.task_ids) < (
        model.log_likelihood_ - 1.0
    )
    shifted = MTLCM(random_state=0).fit(
        data.X + offset, data.y + 3.0, task_ids=data.task_ids
    )
    np.testing.assert_allclose(
        shifted.log_likelihood_, model.log_likelihood_, rtol=1e-6
    )
    np.testing.assert_allclose(shifted.x_mean_ - model.x_mean_, offset[::N], atol=1e-10)


def test_unseen_task_in_score(model, data):
    with pytest.raises(DataError, match=r"unseen during fit \(first: \[99\]\)"):
        model.score(data.X[:5], data.y[:5], task_ids=np.full(5, 99))


def test_score_wrong_number_of_features(model, data):
    with pytest.raises(ValueError, match=r"n_features_in_=4"):
        model.score(data.X[:, :3], data.y, task_ids=data.task_ids)


# ---------------------------------------------------------------------- layouts


def test_long_and_wide_layouts_give_same_fit(seed):
    d = _tiny(seed)
    long = MTLCM(random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    wide = MTLCM(random_state=seed).fit(*d.to_wide())
    np.testing.assert_allclose(wide.mixing_, long.mixing_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        wide.causal_indicators_, long.causal_indicators_, atol=1e-8
    )
    np.testing.assert_allclose(wide.log_likelihood_, long.log_likelihood_, rtol=1e-10)
    np.testing.assert_array_equal(wide.tasks_, long.tasks_)


def test_string_task_labels(seed):
    d = _tiny(seed)
    labels = np.array([f"task{t:02d}" for t in range(d.n_tasks)])
    m = MTLCM(random_state=seed).fit(d.X, d.y, task_ids=labels[d.task_ids])
    ref = MTLCM(random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    np.testing.assert_array_equal(m.tasks_, labels)
    assert list(m.causal_sets()) == labels.tolist()
    # zero-padded labels sort like the ints: the same problem, the same fit
    np.testing.assert_array_equal(m.mixing_, ref.mixing_)
    # rows in any order; the statistics then differ by rounding only
    order = np.random.default_rng(seed).permutation(d.n_samples)
    X, y, t = d.X[order], d.y[order], labels[d.task_ids[order]]
    with warnings.catch_warnings():
        # a rounding-level difference can end L-BFGS with an ABNORMAL line search
        warnings.simplefilter("ignore", ConvergenceWarning)
        shuffled = MTLCM(random_state=seed).fit(X, y, task_ids=t)
    np.testing.assert_array_equal(shuffled.tasks_, labels)
    np.testing.assert_allclose(shuffled.log_likelihood_, ref.log_likelihood_, rtol=1e-8)
    np.testing.assert_allclose(shuffled.mixing_, ref.mixing_, atol=1e-3)
    np.testing.assert_allclose(m.score(X, y, task_ids=t), m.log_likelihood_, rtol=1e-7)
    with pytest.raises(DataError, match="unseen"):
        m.score(X, y, task_ids=np.full(len(y), "nope"))


def test_wide_dataframe_column_names_are_tasks(seed):
    d = _tiny(seed, n_tasks=4)
    X, Y = d.to_wide()
    cols = ["logP", "mp", "bp", "Tc"]
    m = MTLCM(random_state=seed).fit(pd.DataFrame(X), pd.DataFrame(Y, columns=cols))
    assert m.tasks_.tolist() == cols
    assert list(m.causal_sets()) == cols


# ------------------------------------------------------------ reproducibility


def test_same_random_state_is_bitwise_reproducible():
    d = _tiny(1)
    a = MTLCM(init="random", random_state=3).fit(d.X, d.y, task_ids=d.task_ids)
    b = MTLCM(init="random", random_state=3).fit(d.X, d.y, task_ids=d.task_ids)
    np.testing.assert_array_equal(a.mixing_, b.mixing_)
    np.testing.assert_array_equal(a.causal_indicators_, b.causal_indicators_)
    c = MTLCM(init="random", random_state=4).fit(d.X, d.y, task_ids=d.task_ids)
    assert not np.array_equal(a.mixing_, c.mixing_)


def test_fit_leaves_global_rngs_alone():
    d = _tiny(2)
    np_state = np.random.get_state()[1].copy()
    torch_state = torch.random.get_rng_state().clone()
    MTLCM(init="random", random_state=0).fit(d.X, d.y, task_ids=d.task_ids)
    np.testing.assert_array_equal(np.random.get_state()[1], np_state)
    assert torch.equal(torch.random.get_rng_state(), torch_state)


def test_n_init_keeps_the_most_likely_restart(seed):
    d = _tiny(seed, n_tasks=12, n_latents=4, n_causal=2)
    m = MTLCM(init="random", n_init=3, max_iter=40, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(d.X, d.y, task_ids=d.task_ids)
    lls = m.restart_log_likelihoods_
    assert len(lls) == 3
    assert len(set(lls)) == 3  # restarts really differ, so the choice matters
    assert m.log_likelihood_ == max(lls)
    np.testing.assert_allclose(
        m.score(d.X, d.y, task_ids=d.task_ids), max(lls), rtol=1e-7
    )


def test_jd_restarts_run(seed):
    d = _tiny(seed)
    m = MTLCM(n_init=2, random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    assert len(m.restart_log_likelihoods_) == 2
    assert m.log_likelihood_ == max(m.restart_log_likelihoods_)


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_random_init_runs(seed):
    d = _tiny(seed)
    m = MTLCM(init="random", random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    assert np.isfinite(m.log_likelihood_) and np.all(np.isfinite(m.mixing_))
    assert m.transform(d.X).shape == (d.n_samples, 3)


def test_generator_random_state():
    d = _tiny()
    m = MTLCM(init="random", random_state=np.random.default_rng(0))
    assert np.isfinite(m.fit(d.X, d.y, task_ids=d.task_ids).log_likelihood_)


def test_convergence_warning_when_max_iter_too_small():
    d = _tiny()
    with pytest.warns(ConvergenceWarning, match="increase max_iter"):
        m = MTLCM(init="random", max_iter=1, random_state=0).fit(
            d.X, d.y, task_ids=d.task_ids
        )
    assert m.converged_ is False and m.n_iter_ == 1


def test_verbose_prints_one_line_per_restart(capsys):
    d = _tiny()
    MTLCM(n_init=2, verbose=True, random_state=0).fit(d.X, d.y, task_ids=d.task_ids)
    out = capsys.readouterr().out
    assert "[MTLCM] restart 0" in out and "[MTLCM] restart 1" in out


# ---------------------------------------------------------------- more features


def test_more_features_than_latents(seed):
    d = make_linear_tasks(
        n_tasks=30,
        n_samples=60,
        n_latents=4,
        n_causal=2,
        n_observed=8,
        mixing="random",
        random_state=seed,
    )
    m = MTLCM(n_latents=4, random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    assert m.mixing_.shape == (8, 4) and m.unmixing_.shape == (4, 8)
    assert m.n_features_in_ == 8 and m.n_latents_ == 4
    Z_hat = m.transform(d.X)
    assert Z_hat.shape == (d.n_samples, 4)
    assert mcc(d.Z, Z_hat) >= 0.99
    np.testing.assert_allclose(
        m.score(d.X, d.y, task_ids=d.task_ids), m.log_likelihood_, rtol=1e-7
    )


# ------------------------------------------------------------------ not fitted


def test_not_fitted_errors():
    m = MTLCM()
    X = np.zeros((4, 2))
    for call in (
        lambda: m.transform(X),
        lambda: m.causal_sets(),
        lambda: m.task_log_likelihood(X, [0, 1, 2, 3.0], task_ids=[0, 0, 1, 1]),
        lambda: m.score(X, [0, 1, 2, 3.0], task_ids=[0, 0, 1, 1]),
    ):
        with pytest.raises(NotFittedError, match="MTLCM instance is not fitted yet"):
            call()
    assert issubclass(NotFittedError, ValueError)
    assert issubclass(NotFittedError, AttributeError)


def test_transform_wrong_number_of_features(model):
    with pytest.raises(
        ValueError,
        match=r"X has 3 features, but MTLCM is expecting 4 features as input: it was "
        r"fitted with n_features_in_=4\.",
    ):
        model.transform(np.zeros((5, 3)))
    with pytest.raises(DataError, match="X must be a 2-D array"):
        model.transform(np.zeros(4))


# -------------------------------------------------------------------- bad input


def _bad_inputs():
    d = _tiny()
    X, y, t = d.X.copy(), d.y.copy(), d.task_ids.copy()
    Xn = X.copy()
    Xn[7, 2] = np.nan
    yi = y.copy()
    yi[3] = np.inf
    t1 = t.copy()
    t1[0] = 99  # task 99 has a single sample
    yc = y.copy()
    yc[t == 2] = 1.5
    _, Y = d.to_wide()
    return [
        ("nan_X", (Xn, y, t), DataError, r"X contains 1 non-finite .*row 7, column 2"),
        ("inf_y", (X, yi, t), DataError, r"y contains 1 non-finite .*index 3"),
        ("X_1d", (X[:, 0], y, t), DataError, r"X must be a 2-D array"),
        (
            "y_length",
            (X, y[:-2], t),
            DataError,
            r"y must have shape \(240,\) to match X",
        ),
        (
            "task_ids_length",
            (X, y, t[:-1]),
            DataError,
            r"task_ids must have shape \(240,\) to match X; got \(239,\)",
        ),
        (
            "single_sample_task",
            (X, y, t1),
            DataError,
            r"at least 2 observed samples; task .*99.* has 1",
        ),
        (
            "constant_target",
            (X, yc, t),
            DataError,
            r"target of task .*2.* is constant \(value 1\.5\)",
        ),
        (
            "wide_rows",
            (X, Y[:-1], None),
            DataError,
            r"Y must have one row per row of X \(240\); got shape \(239, 8\)",
        ),
        (
            "missing_task_ids",
            (X, y, None),
            DataError,
            r"task_ids is required when y is 1-D",
        ),
        (
            "non_numeric_X",
            (X.astype(str).astype(object) + "a", y, t),
            TypeError,
            r"X must be numeric",
        ),
    ]


@pytest.mark.parametrize("case", _bad_inputs(), ids=lambda c: c[0])
def test_bad_input_raises(case):
    _, (X, y, t), exc, match = case
    with pytest.raises(exc, match=match):
        MTLCM(random_state=0).fit(X, y, task_ids=t)


def test_fewer_features_than_latents():
    d = _tiny()
    with pytest.raises(
        DataError,
        match=r"at least n_latents features.*3 feature\(s\) "
        r"and n_latents=5",
    ):
        MTLCM(n_latents=5).fit(d.X, d.y, task_ids=d.task_ids)


@pytest.mark.parametrize("n_latents", [None, 3])
def test_collinear_features(n_latents):
    d = _tiny(n_observed=3)
    X = d.X.copy()
    X[:, 2] = X[:, 0]  # duplicated column: rank 2 < n_latents = p = 3
    with pytest.raises(DataError, match=r"(?i)collinear|singular"):
        MTLCM(n_latents=n_latents, random_state=0).fit(X, d.y, task_ids=d.task_ids)


_POS_INT = r"an int in the range \[1, inf\)"


@pytest.mark.parametrize(
    "params,allowed",
    [
        (dict(sigma_s=0), r"a float in the range \(0, 1\) or a str among \{'auto'\}"),
        (dict(sigma_s=1.0), r"a float in the range \(0, 1\) or a str among \{'auto'\}"),
        (dict(sigma_obs=0.0), r"a float in the range \(0, inf\)"),
        (dict(n_init=0), _POS_INT),
        (dict(n_init=True), _POS_INT),
        (dict(n_init=1.5), _POS_INT),
        (dict(max_iter=-1), _POS_INT),
        (dict(chunk_size=0), _POS_INT),
        (dict(n_latents=0), _POS_INT + " or None"),
        (dict(init="foo"), r"a str among \{'jd', 'random'\}"),
        (dict(tol=0.0), r"a float in the range \(0, inf\)"),
        (dict(device=3), r"a torch device or its name \('cpu', .*\)"),
        (dict(verbose=1), r"a bool"),
    ],
)
def test_bad_hyperparameters_raise_at_fit(params, allowed):
    d = _tiny()
    (name, value) = next(iter(params.items()))
    match = rf"The '{name}' parameter of MTLCM must be {allowed}; got "
    with pytest.raises(InvalidParameterError, match=match + re.escape(repr(value))):
        MTLCM(**params).fit(d.X, d.y, task_ids=d.task_ids)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_device_without_cuda():
    d = _tiny()
    with pytest.raises(ValueError, match="CUDA is not available"):
        MTLCM(device="cuda").fit(d.X, d.y, task_ids=d.task_ids)


def test_no_false_convergence_warning_at_optimum():
    d = make_linear_tasks(
        n_tasks=100, n_samples=100, n_latents=5, n_causal=2, random_state=5
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = MTLCM(random_state=5).fit(d.X, d.y, task_ids=d.task_ids)
    assert m.converged_


# ------------------------------------------------------- scikit-learn contract


def test_fit_on_device_is_reproducible_and_matches_cpu(device, seed):
    d = _tiny(seed)
    m = MTLCM(device=device, random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    again = MTLCM(device=device, random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    np.testing.assert_array_equal(again.mixing_, m.mixing_)
    cpu = MTLCM(random_state=seed).fit(d.X, d.y, task_ids=d.task_ids)
    np.testing.assert_allclose(m.log_likelihood_, cpu.log_likelihood_, rtol=1e-8)
    assert isinstance(m.mixing_, np.ndarray) and m.mixing_.dtype == np.float64


def test_fit_transform_and_feature_names(device):
    d = _tiny()
    X = pd.DataFrame(d.X, columns=["a", "b", "c"])
    m = MTLCM(device=device, random_state=0)
    Z = m.fit_transform(X, d.y, task_ids=d.task_ids)
    np.testing.assert_array_equal(Z, m.transform(X))
    assert m.n_latents_ == 3 and m.feature_names_in_.tolist() == ["a", "b", "c"]
    assert m.get_feature_names_out().tolist() == ["mtlcm0", "mtlcm1", "mtlcm2"]
    with pytest.raises(DataError, match=r"(?s)seen at fit time, yet now missing:\n- c"):
        m.transform(X[["a", "b"]])
    with pytest.raises(DataError, match="unseen at fit time:\n- d\n"):
        m.score(X.rename(columns={"c": "d"}), d.y, task_ids=d.task_ids)


def test_causal_sets_are_plain_python(model):
    sets = model.causal_sets()
    assert all(type(k) is int for k in sets)
    assert all(
        isinstance(v, list) and all(type(j) is int for j in v) for v in sets.values()
    )
    # the one threshold rule: indicator >= threshold
    for t, idx in model.causal_sets(threshold=0.3).items():
        assert idx == np.flatnonzero(model.causal_indicators_[t] >= 0.3).tolist()
    d = _tiny(n_tasks=4)
    labels = np.array(["u", "v", "w", "x"])[d.task_ids]
    m = MTLCM(random_state=0).fit(d.X, d.y, task_ids=labels)
    assert [type(k) for k in m.causal_sets()] == [str] * 4


def test_fit_refuses_missing_y_sparse_and_too_few_samples():
    import scipy.sparse as sp

    d = _tiny()
    with pytest.raises(DataError, match="MTLCM requires y to be passed"):
        MTLCM().fit(d.X, None)
    with pytest.raises(TypeError, match="MTLCM does not accept sparse input"):
        MTLCM().fit(sp.csr_matrix(d.X), d.y, task_ids=d.task_ids)
    with pytest.raises(
        DataError, match=r"1 sample\(s\) \(shape=\(1, 3\)\) while a minimum of 2"
    ):
        MTLCM().fit(d.X[:1], d.y[:1], task_ids=d.task_ids[:1])


def test_lbfgs_stop_messages_are_put_in_words():
    from identrep.models.multitask._mtlcm_solver import stop_reason

    assert stop_reason("ABNORMAL: ") == (
        "the line search could not decrease the objective any further"
    )
    assert "max_iter" in stop_reason("STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT")
    assert stop_reason(b"CONVERGENCE: REL_REDUCTION_OF_F_<=_FACTR*EPSMCH".decode()) == (
        "convergence: rel_reduction_of_f_<=_factr*epsmch"
    )
