"""load_zeisel: the quantile normalisation against a direct computation, the
shipped file's content, and the pack/load round trip on a generated source."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from identrep.datasets import MAJOR_CLASS_NAMES, load_zeisel
from identrep.datasets.zeisel import _read_packed, pack_zeisel, quantile_normalize
from identrep.exceptions import DataError


def _naive_quantile(X):
    """Direct definition: reference = mean of sorted rows; a value takes the mean
    of the reference over the ranks of the values equal to it in its row."""
    X = np.asarray(X, float)
    ref = np.sort(X, axis=1).mean(0)
    out = np.empty_like(X)
    for i, row in enumerate(X):
        order = np.sort(row)
        for j, v in enumerate(row):
            ranks = np.flatnonzero(order == v)
            out[i, j] = ref[ranks].mean()
    return out


def test_quantile_normalize_matches_its_definition_with_ties(seed):
    X = np.random.default_rng(seed).poisson(1.5, size=(7, 12))  # many ties
    np.testing.assert_allclose(quantile_normalize(X), _naive_quantile(X), rtol=1e-12)
    Q = quantile_normalize(X)
    # without ties every row holds exactly the reference values
    Y = np.random.default_rng(seed).normal(size=(5, 9))
    QY = quantile_normalize(Y)
    np.testing.assert_allclose(np.sort(QY, 1), np.sort(QY, 1)[[0]].repeat(5, 0))
    np.testing.assert_allclose(quantile_normalize(X, columns=[3, 1]), Q[:, [3, 1]])
    with pytest.raises(ValueError, match="finite 2-D array"):
        quantile_normalize(np.array([1.0, np.nan]))


def test_shipped_file_has_the_published_cells_and_types():
    data = load_zeisel()
    assert data.X.shape == data.counts.shape == (3005, 558)
    # level-1 class sizes published by Zeisel et al. (2015)
    sizes = dict(zip(data.cell_type_names, np.bincount(data.cell_type), strict=True))
    assert sizes == {
        "astrocytes_ependymal": 224,
        "endothelial-mural": 235,
        "interneurons": 290,
        "microglia": 98,
        "oligodendrocytes": 820,
        "pyramidal CA1": 939,
        "pyramidal SS": 399,
    }
    assert len(np.unique(data.subtype)) == 48
    # the kept genes are the most variable after normalisation, in order
    assert np.all(np.diff(data.X.std(axis=0)) <= 1e-9)
    # normalisation keeps each cell's ranks: higher count, higher value
    i = 0
    o = np.argsort(data.counts[i], kind="stable")
    assert np.all(np.diff(data.X[i, o]) >= -1e-12)
    assert np.isfinite(data.X).all() and data.X.min() >= 0


def test_major_classes_split_the_two_merged_level1_classes():
    data = load_zeisel()
    major = data.major_class
    sizes = {
        name: int(np.sum(major == code)) for code, name in enumerate(MAJOR_CLASS_NAMES)
    }
    # level-2 labels: Astro1 68 + Astro2 61; Choroid 10 + Epend 20; Vend1 32 +
    # Vend2 105; Peric 21 + Vsmc 62; the other classes as at level 1
    assert sizes == {
        "astrocytes": 129,
        "ependymal": 30,
        "endothelial": 137,
        "mural": 83,
        "interneurons": 290,
        "microglia": 98,
        "oligodendrocytes": 820,
        "pyramidal CA1": 939,
        "pyramidal SS": 399,
    }
    # the 80 unplaced cells (level-2 "(none)") come from the two merged classes
    names = np.asarray(data.cell_type_names)[data.cell_type[major == -1]]
    assert sorted(set(names)) == ["astrocytes_ependymal", "endothelial-mural"]
    assert len(names) == 80
    # every placed cell keeps its level-1 class
    merged = {"astrocytes": "astrocytes_ependymal", "ependymal": "astrocytes_ependymal"}
    merged |= {"endothelial": "endothelial-mural", "mural": "endothelial-mural"}
    for code, name in enumerate(MAJOR_CLASS_NAMES):
        level1 = set(np.asarray(data.cell_type_names)[data.cell_type[major == code]])
        assert level1 == {merged.get(name, name)}


def _fake_source(folder, seed=0):
    rng = np.random.default_rng(seed)
    counts = rng.negative_binomial(2, 0.4, size=(30, 50)).astype(np.uint16)
    l1 = (np.arange(30) % 3).astype(np.int16)
    folder.mkdir()
    np.savez(
        folder / "zeisel_counts_top4000.npz",
        counts=counts,
        level1_code=l1,
        level2_code=l1 * 2,
    )
    pd.DataFrame(
        {
            "cell_index": np.arange(30),
            "level1_code": l1,
            "level1_class": np.array(["a", "b", "c"])[l1],
            "level2_code": l1 * 2,
            "level2_class": "x",
        }
    ).to_csv(folder / "zeisel_cell_labels.csv", index=False)
    return counts


def test_pack_then_read_equals_preprocessing_the_source(tmp_path):
    counts = _fake_source(tmp_path / "src")
    direct = load_zeisel(source=tmp_path / "src", n_genes=10)
    Q = _naive_quantile(counts)
    keep = np.argsort(-Q.std(0), kind="stable")[:10]
    np.testing.assert_allclose(direct.X, Q[:, keep], rtol=1e-12)
    np.testing.assert_array_equal(direct.gene_index, keep)
    pack_zeisel(tmp_path / "src", tmp_path / "packed.npz", n_genes=10)
    with open(tmp_path / "packed.npz", "rb") as fh:
        packed = _read_packed(fh)
    np.testing.assert_array_equal(packed.X, direct.X)
    np.testing.assert_array_equal(packed.counts, direct.counts)
    assert packed.cell_type_names == ("a", "b", "c")
    with pytest.raises(DataError, match="major_class needs Zeisel.*got 'a'"):
        _ = packed.major_class


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="n_genes must be an integer"):
        load_zeisel(n_genes=0)
    with pytest.raises(ValueError, match="pass source="):
        load_zeisel(n_genes=100)
    with pytest.raises(DataError, match="zeisel_counts_top4000.npz"):
        load_zeisel(source=tmp_path)
