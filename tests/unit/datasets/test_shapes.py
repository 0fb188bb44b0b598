"""The procedural 3D-shapes images and their sparse tasks (datasets/shapes.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from identrep.datasets import (
    SHAPES_FACTORS,
    make_shapes_tasks,
    render_shapes,
    sample_shapes_factors,
)
from identrep.datasets.shapes import SHAPES_IMAGE_SHAPE, SHAPES_RANGES
from identrep.exceptions import InvalidParameterError

T, N = 6, 10
MID = np.array([[0.2, 0.5, 0.8, 1.0, 0.0, 10.0]])  # a cube, mid-range factors


@pytest.fixture
def data(seed):
    return make_shapes_tasks(n_tasks=T, n_samples=N, rho=0.5, random_state=seed)


def test_bundle_shapes_dtypes_and_ranges(data):
    assert data.X.shape == (T * N, 64 * 64 * 3) and data.X.dtype == np.float32
    assert data.X.min() >= 0.0 and data.X.max() <= 1.0
    assert data.y.shape == data.task_ids.shape == (T * N,)
    assert data.Z.shape == (T * N, 6)
    np.testing.assert_allclose(data.Z.mean(0), 0, atol=1e-9)
    np.testing.assert_allclose(data.Z.std(0), 1, atol=1e-9)
    assert data.causal.shape == data.weights.shape == data.gammas.shape == (T, 6)
    assert data.mixing is None and not data.gammas.any()
    np.testing.assert_array_equal(data.task_ids, np.repeat(np.arange(T), N))
    f = data.params["factors"]
    for j, name in enumerate(SHAPES_FACTORS):
        lo, hi = SHAPES_RANGES[name]
        assert lo <= f[:, j].min() and f[:, j].max() <= hi
    assert set(np.unique(f[:, 4])) <= {0.0, 1.0, 2.0, 3.0}
    # the images are the factors rendered
    np.testing.assert_array_equal(data.X[:3], render_shapes(f[:3]).reshape(3, -1))


def test_deterministic_given_a_seed():
    a = make_shapes_tasks(n_tasks=2, n_samples=5, rho=0.3, random_state=7)
    b = make_shapes_tasks(n_tasks=2, n_samples=5, rho=0.3, random_state=7)
    c = make_shapes_tasks(n_tasks=2, n_samples=5, rho=0.3, random_state=8)
    for name in ("X", "y", "Z", "causal", "weights"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.y, c.y)
    # rendering does not depend on the chunking
    f = a.params["factors"]
    np.testing.assert_array_equal(render_shapes(f), render_shapes(f, chunk_size=3))


@pytest.mark.parametrize("j", range(6))
def test_each_factor_visibly_changes_the_image(j):
    """Moving one factor (the others fixed) changes many pixels; for every shape
    (orientation too: the two-tone boundary turns with the object)."""
    lo, hi = SHAPES_RANGES[SHAPES_FACTORS[j]]
    for shape in range(4):
        f = np.repeat(MID, 2, axis=0)
        f[:, 4] = shape
        if SHAPES_FACTORS[j] == "shape":
            f[1, 4] = (shape + 1) % 4
        else:
            f[0, j], f[1, j] = lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)
        img = render_shapes(f)
        changed = np.abs(img[0] - img[1]).max(axis=-1) > 0.05
        # observed minimum 88 pixels (orientation of the capsule); hues change
        # 300-2400 pixels: a margin of 4x
        assert changed.sum() >= 20, (SHAPES_FACTORS[j], shape, changed.sum())


def test_factors_are_correlated_by_rho(seed):
    for rho in (0.0, 0.5, 0.9):
        f = sample_shapes_factors(20_000, rho=rho, random_state=seed)
        r = spearmanr(f).statistic
        cont = [0, 1, 2, 3, 5]
        off = r[np.ix_(cont, cont)][~np.eye(5, dtype=bool)]
        expected = 6 / np.pi * np.arcsin(rho / 2)  # copula's Spearman correlation
        # sampling error ~ 1/sqrt(20000) = 0.007
        np.testing.assert_allclose(off, expected, atol=0.03)
        assert abs(expected - rho) <= 0.02
        # the discrete shape factor keeps most of the dependence
        assert np.all(r[4, cont] >= 0.85 * expected - 0.03)
    z = make_shapes_tasks(n_tasks=20, n_samples=50, rho=0.9, random_state=seed).Z
    offz = np.corrcoef(z.T)[~np.eye(6, dtype=bool)]
    assert offz.min() > 0.75 and offz.mean() > 0.82  # Pearson of the factors


def test_supports_weights_and_noise(seed):
    d = make_shapes_tasks(
        n_tasks=400, n_samples=2, support_prob=0.3, noise_ratio=0.0, random_state=seed
    )
    S = d.causal.astype(bool)
    assert set(np.unique(d.causal)) <= {0.0, 1.0} and S.any(axis=1).all()
    np.testing.assert_array_equal(d.weights != 0, S)
    # Bernoulli(0.3) conditioned on a non-empty support: 0.3 / (1 - 0.7^6)
    assert abs(S.mean() - 0.3 / (1 - 0.7**6)) < 0.03
    # supports differ across tasks, independently per task
    assert len({tuple(s) for s in S}) > 20
    y = d.y.reshape(400, 2)
    np.testing.assert_allclose(
        y, np.einsum("tnd,td->tn", d.Z.reshape(400, 2, 6), d.weights), atol=1e-12
    )
    full = make_shapes_tasks(n_tasks=5, n_samples=2, support_prob=1.0, random_state=0)
    assert full.causal.all()


def test_noise_norm_is_the_ratio_of_the_signal_norm(seed):
    d = make_shapes_tasks(n_tasks=4, n_samples=30, noise_ratio=0.3, random_state=seed)
    signal = np.einsum("tnd,td->tn", d.Z.reshape(4, 30, 6), d.weights)
    noise = d.y.reshape(4, 30) - signal
    np.testing.assert_allclose(
        np.linalg.norm(noise, axis=1), 0.3 * np.linalg.norm(signal, axis=1), rtol=1e-10
    )
    np.testing.assert_allclose(
        d.noise_std, np.linalg.norm(noise, axis=1) / np.sqrt(30), rtol=1e-10
    )


def test_image_layout():
    img = render_shapes(MID)[0]
    assert img.shape == SHAPES_IMAGE_SHAPE
    # wall on top, floor below, the object in the middle of the bottom half
    wall, floor = img[5, 5], img[60, 5]
    assert not np.allclose(wall, floor, atol=0.05)
    assert not np.allclose(img[48, 32], floor, atol=0.05)


def test_errors():
    with pytest.raises(InvalidParameterError, match="'rho' parameter"):
        make_shapes_tasks(rho=1.0)
    with pytest.raises(InvalidParameterError, match="'support_prob' parameter"):
        make_shapes_tasks(support_prob=0.0)
    with pytest.raises(InvalidParameterError, match="'n_samples' parameter"):
        sample_shapes_factors(0)
    with pytest.raises(ValueError, match=r"factors must have shape \(n_samples, 6\)"):
        render_shapes(np.zeros((2, 5)))
    bad = MID.copy()
    bad[0, 4] = 1.5
    with pytest.raises(ValueError, match="'shape' must lie in .* be an integer"):
        render_shapes(bad)
    bad = MID.copy()
    bad[0, 5] = 90.0
    with pytest.raises(ValueError, match="'orientation' must lie in"):
        render_shapes(bad)
    with pytest.raises(ValueError, match="non-finite"):
        render_shapes(np.full((1, 6), np.nan))


def test_smaller_images_are_the_same_scene():
    """At 32 px the image is the 64 px scene at half resolution: 2x2 block means
    of the 64 px render differ from it by ~5e-4 on average (anti-aliased edges
    move by less than a pixel)."""
    f = sample_shapes_factors(4, rho=0.5, random_state=0)
    big = render_shapes(f)
    small = render_shapes(f, image_size=32)
    assert small.shape == (4, 32, 32, 3) and small.dtype == np.float32
    pooled = big.reshape(4, 32, 2, 32, 2, 3).mean((2, 4))
    assert np.abs(pooled - small).mean() < 0.005
    data = make_shapes_tasks(n_tasks=2, n_samples=3, image_size=32, random_state=0)
    assert data.X.shape == (6, 32 * 32 * 3) and data.params["image_size"] == 32
    with pytest.raises(ValueError, match="image_size must be >= 8"):
        render_shapes(f, image_size=4)
    with pytest.raises(InvalidParameterError, match="'image_size' parameter"):
        make_shapes_tasks(image_size=4)
