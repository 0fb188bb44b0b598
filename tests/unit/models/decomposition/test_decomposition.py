"""NMF and LDA: recovery on data from their own generative processes, the
held-out NLL in closed form, and the input errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from identrep.exceptions import DataError, InvalidParameterError, NotFittedError
from identrep.metrics import reconstruction_nll
from identrep.models.decomposition import LDA, NMF


def _low_rank(seed, n=120, p=10, k=3):
    rng = np.random.default_rng(seed)
    return rng.gamma(1.0, size=(n, k)) @ rng.gamma(1.0, size=(k, p))


def _lda_docs(rng, beta, n, length=60, alpha=0.3):
    theta = rng.dirichlet(np.full(beta.shape[0], alpha), size=n)
    X = np.stack([rng.multinomial(length, t @ beta) for t in theta]).astype(float)
    return X, theta


def test_nmf_factorises_exact_low_rank_data(seed):
    X = _low_rank(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's max_iter warning
        m = NMF(n_latents=3, max_iter=2000, tol=1e-8, random_state=seed).fit(X)
    rel = np.linalg.norm(X - m.reconstruct(X)) / np.linalg.norm(X)
    # exact rank-3 non-negative data: the coordinate-descent solver reaches a
    # relative error of ~1e-4 or less; 1e-2 is a wide margin
    assert rel < 1e-2
    assert m.transform(X).shape == (120, 3) and (m.transform(X) >= 0).all()


def test_nmf_gaussian_heldout_nll_is_the_closed_form():
    X = _low_rank(0) + np.random.default_rng(1).uniform(size=(120, 10))
    m = NMF(n_latents=2, random_state=0).fit(X[:100])
    R = m.reconstruct(X[100:])
    s2 = m.noise_var_
    want = (0.5 * (np.log(2 * np.pi * s2) + (X[100:] - R) ** 2 / s2)).sum(1)
    np.testing.assert_allclose(m.heldout_nll(X[100:], per_row=True), want)
    assert m.score(X[100:]) == pytest.approx(-want.mean())
    # the noise variance is the training residual's
    # (fit's W; transform re-solves W to the solver tolerance, hence rtol)
    resid = X[:100] - m.reconstruct(X[:100])
    np.testing.assert_allclose(s2, (resid**2).mean(0), rtol=1e-2)


def test_nmf_multinomial_nll_uses_normalised_reconstructions():
    X = np.random.default_rng(0).poisson(2.0, size=(60, 6)).astype(float)
    m = NMF(n_latents=2, likelihood="multinomial", random_state=0).fit(X)
    R = m.reconstruct(X) + 1e-10
    want = reconstruction_nll(X, R / R.sum(1, keepdims=True), likelihood="multinomial")
    assert m.heldout_nll(X) == pytest.approx(want, rel=1e-6)


def test_lda_recovers_topics_and_beats_uniform(seed):
    rng = np.random.default_rng(seed)
    K, V = 3, 15
    beta = np.zeros((K, V))
    for k in range(K):  # three topics on disjoint words
        beta[k, 5 * k : 5 * k + 5] = rng.dirichlet(np.full(5, 5.0))
    X, _ = _lda_docs(rng, beta, 300)
    Xt, theta_t = _lda_docs(rng, beta, 100)
    m = LDA(n_latents=3, max_iter=50, random_state=seed).fit(X)
    tv = 0.5 * np.abs(m.topics_[:, None, :] - beta[None]).sum(-1)
    r, c = linear_sum_assignment(tv)
    # seeds 0-9: the largest matched total-variation distance was 0.009-0.022
    assert tv[r, c].max() < 0.06
    nll = m.heldout_nll(Xt)
    oracle = reconstruction_nll(Xt, theta_t @ beta, likelihood="multinomial")
    # seeds 0-9: LDA's NLL sat 0.45-0.75 nats below the oracle's (theta is
    # inferred from the same document) and ~40 nats below uniform (162.5)
    assert abs(nll - oracle) < 3.0
    assert nll < 60 * np.log(V) - 30
    np.testing.assert_allclose(m.transform(Xt).sum(1), 1.0, rtol=1e-6)
    assert m.perplexity(Xt) > 1.0


@pytest.mark.parametrize("cls", [NMF, LDA])
def test_sparse_input_gives_the_dense_result(cls):
    X = np.random.default_rng(0).poisson(0.7, size=(50, 8)).astype(float)
    a = cls(n_latents=2, random_state=0).fit(X)
    b = cls(n_latents=2, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(a.transform(X), b.transform(sp.csr_matrix(X)))
    assert a.heldout_nll(X) == pytest.approx(b.heldout_nll(sp.csr_matrix(X)))


@pytest.mark.parametrize("cls", [NMF, LDA])
def test_sparse_input_is_not_modified(cls, unsorted_csr):
    # Converting float32 CSR to float64 without a copy shares the caller's index
    # arrays; scikit-learn then sorted them in place under the caller's values,
    # moving counts to other columns (found at stop 51: NMF's fit, transform and
    # heldout_nll and LDA's fit changed up to 22 counts of a Table 1b split)
    X = np.random.default_rng(0).poisson(0.8, size=(40, 9)).astype(np.float32)
    for method in ("fit", "transform", "heldout_nll"):
        m = cls(n_latents=2, random_state=0)
        A = unsorted_csr(X)
        assert not A.has_sorted_indices
        if method == "fit":
            m.fit(A)
        else:
            getattr(m.fit(X), method)(A)
        np.testing.assert_array_equal(A.toarray(), X, err_msg=method)
    # and the numbers are those of the dense input
    a = cls(n_latents=2, random_state=0).fit(X.astype(float))
    b = cls(n_latents=2, random_state=0).fit(unsorted_csr(X))
    assert b.heldout_nll(unsorted_csr(X)) == pytest.approx(a.heldout_nll(X))


@pytest.mark.parametrize("cls", [NMF, LDA])
def test_same_seed_same_numbers_and_generators(cls):
    X = np.random.default_rng(0).poisson(1.0, size=(40, 6)).astype(float)
    a = cls(n_latents=2, random_state=3).fit(X).transform(X)
    b = cls(n_latents=2, random_state=3).fit(X).transform(X)
    np.testing.assert_array_equal(a, b)
    g = cls(n_latents=2, random_state=np.random.default_rng(3)).fit(X)
    assert g.transform(X).shape == (40, 2)


@pytest.mark.parametrize("cls", [NMF, LDA])
def test_input_errors_are_named(cls):
    X = np.ones((10, 4))
    with pytest.raises(NotFittedError):
        cls().transform(X)
    bad = X.copy()
    bad[3, 1] = -2.0
    with pytest.raises(DataError, match="non-negative data .* 1 negative values"):
        cls(n_latents=2).fit(bad)
    m = cls(n_latents=2, random_state=0).fit(X)
    with pytest.raises(DataError, match="X has 3 features, but .* expecting 4"):
        m.transform(np.ones((2, 3)))
    with pytest.raises(DataError, match="non-finite"):
        m.transform(sp.csr_matrix(np.array([[np.nan, 1.0, 0.0, 0.0]])))


def test_nmf_kl_loss_needs_the_mu_solver():
    with pytest.raises(InvalidParameterError, match="only with solver='mu'"):
        NMF(beta_loss="kullback-leibler").fit(np.ones((5, 3)))
