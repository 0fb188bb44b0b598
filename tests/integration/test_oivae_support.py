"""OI-VAE recovers which latent drives each group of features.

``test_group_latent_support_is_recovered`` is the Adam variant
(``w_optimizer="adam"``, the training before the proximal SGD on W), unchanged:
its thresholds were measured on that training. ``test_prox_sgd_support_...``
checks the default training (module docstring of the test).

Data: 3 standard-normal latents, 6 groups of 3 features; each group is driven by one
latent (two groups per latent), ``x_gj = c_j tanh(a_g z_k(g)) + 0.1 noise`` with
|a_g| in [0.7, 1.3] and |c_j| in [0.5, 1.5], random signs; 2,000 rows. OIVAE with
the true groups, 3 latents, group_lasso 0.3, decoder variance 0.01, Adam 1e-2, 60
epochs (about 10-30 s on one busy core).

The fitted ``support_`` (group-latent links of at least 5% of the largest norm) is
compared with the true group-to-latent map under the best permutation of the latents.

Observed over seeds 0-9 (data and model seeded alike;
``benchmarks/calibrate_sparse_coding.py`` prints these): the support was exact in
seeds 0-8, with 5-10 of the 12 switched-off links exact zeros and the others at most
0.019 of the largest norm; seed 9 had 3 wrong links of 18 (MCC 0.872, a partly
rotated fit). MCC 0.958-0.970 in seeds 0-8. For scale: without the penalty
every link stays on (12 wrong). group_lasso 1.0 fixed seed 9 but broke seed 6 (2
wrong links): about one seed in ten ends in a rotated local optimum. With
groups driven by two latents as well (two such groups beside the six above), the
support was exact in 8 of 10 seeds; in seeds 3 and 4 the fit settled in a rotated
local optimum (MCC 0.80-0.84, 5-6 wrong links) that 120 epochs, group_lasso 1.0 or
lr 3e-3 did not leave, so mixed groups are not part of this gate.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from identrep.metrics import mcc
from identrep.models.vae import OIVAE

SUPPORT = np.array(
    [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], dtype=bool
)


def _grouped(seed, n=2000, per=3, noise=0.1):
    rng = np.random.default_rng(seed)
    n_groups, k = SUPPORT.shape
    Z = rng.normal(size=(n, k))
    cols, groups = [], []
    for g in range(n_groups):
        a = SUPPORT[g] * rng.uniform(0.7, 1.3, size=k) * rng.choice([-1, 1], size=k)
        u = Z @ a
        for _ in range(per):
            c = rng.uniform(0.5, 1.5) * rng.choice([-1, 1])
            cols.append(c * np.tanh(u) + noise * rng.normal(size=n))
            groups.append(g)
    return np.column_stack(cols), Z, np.array(groups)


@pytest.mark.slow
def test_group_latent_support_is_recovered(seed):
    X, Z, groups = _grouped(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fixed budget: under-fitting warnings
        m = OIVAE(
            3,
            groups=groups,
            group_lasso=0.3,
            w_optimizer="adam",
            decoder_var=0.01,
            lr=1e-2,
            max_epochs=60,
            random_state=seed,
        ).fit(X)
    wrong = min(
        int((m.support_[:, list(p)] != SUPPORT).sum())
        for p in itertools.permutations(range(3))
    )
    assert wrong <= 4  # observed 0 in seeds 0-8, 3 in seed 9 (of 18 links)
    N = m.group_norms_ / m.group_norms_.max()
    assert N[~m.support_].max() <= 0.04  # observed at most 0.019
    assert mcc(Z, m.transform(X)) >= 0.8  # observed 0.872-0.970


TWO = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=bool)


def _two_latents(seed, n=2000, per=3, noise=0.1):
    """4 groups of 3 features, groups 0-1 driven by latent 0 and 2-3 by latent 1:
    ``x_gj = c_j tanh(a_g z_k(g)) + noise``, |a_g| in [0.7, 1.3], |c_j| in
    [0.5, 1.5], random signs."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 2))
    cols, groups = [], []
    for g in range(4):
        a = TWO[g] * rng.uniform(0.7, 1.3, size=2) * rng.choice([-1, 1], size=2)
        u = Z @ a
        for _ in range(per):
            c = rng.uniform(0.5, 1.5) * rng.choice([-1, 1])
            cols.append(c * np.tanh(u) + noise * rng.normal(size=n))
            groups.append(g)
    return np.column_stack(cols), np.array(groups)


@pytest.mark.slow
def test_prox_sgd_support_does_not_follow_the_initial_scale(seed):
    """The proximal SGD on W (the default) ends at the same support from an
    N(0, 1) and an N(0, 9) initial W and at two budgets (40 and 80 epochs); the
    Adam variant at the same settings keeps off-links that follow the initial
    scale. Support: links of at least 5% of the largest norm (the Adam
    variant's rule), because a minibatch whose gradient on a zero link exceeds
    ``group_lasso`` reopens it by at most ``lr_w * (|g| - group_lasso)`` before
    the fit ends (such stragglers were at most 0.005 here).

    ``generator_l2`` 0.1: with the default (1 / n = 5e-4) W keeps shrinking as
    the group networks grow (the largest norms fell from 0.35-0.44 at 40 epochs
    to 0.26-0.28 at 80, seed 0) and minibatch noise leaves off-links at up to
    10% of the largest norm, so the support is not settled at these budgets;
    the prior on the networks pins the scale.

    Observed (``group_lasso`` 0.1, ``lr_w`` 0.05, batch 256; 2-3 s CPU a fit):
    seeds 0 and 2, both proximal-SGD fits exactly the true support; seed 1, a
    latent lost (groups 2-3 without links at scale 1, on latent 0's latent at
    scale 3): about one seed in three ends in that optimum, so the gate is seed 0
    (the suite's default). The Adam variant at scale 3 and 80 epochs kept
    off-links of up to 28% of the largest norm at seed 0 (0.5% at seed 2, where
    it also found the support).
    """
    X, groups = _two_latents(seed)
    kw = dict(groups=groups, group_lasso=0.1, lr_w=0.05, lr=1e-2, batch_size=256,
              hidden_sizes=(16,), val_fraction=0.0, random_state=seed,
              generator_l2=0.1)  # fmt: skip

    def fit(scale, epochs, **extra):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return OIVAE(2, w_init_scale=scale, max_epochs=epochs, **kw, **extra).fit(X)

    def support(m):
        return m.group_norms_ >= 0.05 * m.group_norms_.max()

    def wrong(S):
        return min(int((S[:, list(p)] != TWO).sum()) for p in ((0, 1), (1, 0)))

    small, large = fit(1.0, 40), fit(3.0, 80)
    assert wrong(support(small)) == 0  # observed 0 at seeds 0 and 2
    assert wrong(support(large)) == 0
    # exact zeros on the off-links: at least 2 of the 4 (observed 2-4)
    assert (small.group_norms_ == 0).sum() >= 2 and (large.group_norms_ == 0).sum() >= 2
    adam = fit(3.0, 80, w_optimizer="adam")
    off = np.sort(adam.group_norms_.ravel())[:4] / adam.group_norms_.max()
    assert off.max() >= 0.15  # observed 0.28 at seed 0: the initial W survives
