"""QM9 loader: both file formats, the flat encoding, subsets and error messages."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from identrep.datasets import load_qm9
from identrep.datasets import qm9 as qm9_mod
from identrep.datasets.qm9 import (
    QM9_ATOM_FEATURES,
    QM9_MAX_ATOMS,
    QM9_TARGETS,
    flat_column_names,
    flatten_molecules,
    unflatten_molecules,
)
from identrep.exceptions import DataError

DATA = Path(__file__).resolve().parents[2] / "data" / "qm9"
SAMPLE = DATA / "qm9pack_sample"


@pytest.fixture(scope="module")
def subset():
    return load_qm9(source=DATA)


@pytest.fixture(scope="module")
def sample():
    return load_qm9(source=SAMPLE)


def test_subset_shapes_and_layout(subset):
    n = len(subset)
    assert n == 304  # 320 rows in the CSV, 16 without a geometry
    assert subset.info == {
        "format": "subset",
        "n_available": 304,
        "n_without_geometry": 16,
    }
    F = len(QM9_ATOM_FEATURES)
    assert subset.atom_features.shape == (n, QM9_MAX_ATOMS, F)
    assert subset.positions.shape == (n, QM9_MAX_ATOMS, 3)
    assert subset.mask.shape == (n, QM9_MAX_ATOMS) and subset.mask.dtype == bool
    assert list(subset.targets.columns) == list(QM9_TARGETS)
    assert subset.targets.shape == (n, 12) and subset.Y.shape == (n, 12)
    assert np.all(np.diff(subset.mol_ids) > 0)
    assert subset.targets.index.name == "mol_id"
    # real atoms first, padding all zeros
    k = subset.n_atoms
    assert np.array_equal(subset.mask, np.arange(QM9_MAX_ATOMS) < k[:, None])
    assert np.all(subset.atom_features[~subset.mask] == 0)
    assert np.all(subset.positions[~subset.mask] == 0)
    assert np.all(subset.atomic_numbers[~subset.mask] == 0)
    assert np.all(np.isfinite(subset.Y))


def test_methane_values(subset):
    i = int(np.flatnonzero(subset.mol_ids == 1)[0])
    assert subset.n_atoms[i] == 5
    assert subset.atomic_numbers[i, :5].tolist() == [6, 1, 1, 1, 1]
    np.testing.assert_allclose(
        subset.positions[i, 0], [-0.0126981359, 1.0858041578, 0.0080009958]
    )
    t = subset.targets.loc[1]
    assert t["mu"] == 0.0 and t["alpha"] == 13.21 and t["U0"] == -40.47893
    assert t["Cv"] == 6.469
    feats = dict(zip(QM9_ATOM_FEATURES, subset.atom_features[i, 0], strict=True))
    assert feats["is_C"] == 1 and feats["atomic_number"] == 6
    assert feats["degree"] == 4 and feats["n_hydrogens"] == 4
    assert subset.smiles[i] == "C"


def test_geometric_bond_counts_are_chemical(subset):
    Z, deg = subset.atomic_numbers, subset.atom_features[..., 6]
    n_h = subset.atom_features[..., 7]
    assert np.all(deg[Z == 1] == 1)  # every hydrogen has exactly one bond
    assert deg[Z == 6].max() <= 4 and deg[Z == 8].max() <= 2
    assert np.all(n_h <= deg)
    # every bond to a hydrogen is counted from both ends
    assert n_h.sum() == (Z == 1).sum()


def test_qm9pack_format(sample):
    assert len(sample) == 10 and sample.info["format"] == "qm9pack"
    assert sample.mol_ids.tolist() == [1, 2, 3, 4, 5, 6, 23, 184, 99764, 132003]
    assert sample.n_atoms[sample.mol_ids == 99764][0] == 29  # a full molecule
    # index 4 has coordinates written "0." (not JSON)
    pos4 = sample.positions[sample.mol_ids == 4][0, :4]
    np.testing.assert_allclose(pos4[:, 1:], [[0.0, 1.0]] * 4)
    fluoro = sample.atom_features[sample.mol_ids == 132003][0]
    assert fluoro[:, QM9_ATOM_FEATURES.index("is_F")].sum() >= 1
    assert sample.targets.loc[132003].notna().all()


def test_formats_agree_on_shared_molecules(subset, sample):
    shared = np.intersect1d(subset.mol_ids, sample.mol_ids)
    assert shared.size >= 3  # gdb_1, gdb_2, gdb_3 at least
    a = np.searchsorted(subset.mol_ids, shared)
    b = np.searchsorted(sample.mol_ids, shared)
    np.testing.assert_array_equal(subset.positions[a], sample.positions[b])
    np.testing.assert_array_equal(subset.Y[a], sample.Y[b])
    np.testing.assert_array_equal(subset.atom_features[a], sample.atom_features[b])


def test_random_subset(subset):
    a = load_qm9(source=DATA, n_molecules=50, random_state=3)
    b = load_qm9(source=DATA, n_molecules=50, random_state=3)
    c = load_qm9(source=DATA, n_molecules=50, random_state=4)
    assert len(a) == 50
    assert np.array_equal(a.mol_ids, b.mol_ids)
    assert not np.array_equal(a.mol_ids, c.mol_ids)
    assert np.all(np.diff(a.mol_ids) > 0) and np.isin(a.mol_ids, subset.mol_ids).all()
    idx = np.searchsorted(subset.mol_ids, a.mol_ids)
    np.testing.assert_array_equal(a.X, subset.X[idx])


def test_flat_encoding_round_trip(subset):
    X = subset.X
    F = subset.n_atom_features
    assert X.shape == (len(subset), QM9_MAX_ATOMS * (F + 4))
    blocks = X.reshape(len(subset), QM9_MAX_ATOMS, F + 4)
    np.testing.assert_array_equal(blocks[..., :F], subset.atom_features)
    np.testing.assert_array_equal(blocks[..., F : F + 3], subset.positions)
    np.testing.assert_array_equal(blocks[..., -1], subset.mask)
    feats, pos, mask = unflatten_molecules(X, F)
    np.testing.assert_array_equal(feats, subset.atom_features)
    np.testing.assert_array_equal(pos, subset.positions)
    np.testing.assert_array_equal(mask, subset.mask)
    cols = subset.flat_columns
    assert len(cols) == X.shape[1]
    assert cols[:2] == ["atom00_is_H", "atom00_is_C"] and cols[-1] == "atom28_mask"
    assert flat_column_names(("a",), 3) == [
        f"atom{i}_{f}" for i in range(3) for f in ("a", "x", "y", "z", "mask")
    ]


def test_flatten_zeroes_padding_and_checks_shapes():
    rng = np.random.default_rng(0)
    feats, pos = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 4, 3))
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 0]], dtype=bool)
    X = flatten_molecules(feats, pos, mask, dtype=np.float32)
    assert X.dtype == np.float32 and X.shape == (2, 28)
    f2, p2, m2 = unflatten_molecules(X, 3)
    assert np.all(f2[~mask] == 0) and np.all(p2[~mask] == 0)
    np.testing.assert_allclose(f2[mask], feats[mask], rtol=1e-6)
    with pytest.raises(DataError, match="must agree on"):
        flatten_molecules(feats, pos[:, :3], mask)
    with pytest.raises(DataError, match="must have shapes"):
        flatten_molecules(feats[0], pos, mask)
    with pytest.raises(DataError, match="max_atoms \\* 7"):
        unflatten_molecules(np.zeros((2, 10)), 3)


def test_bundle_is_read_only(subset):
    with pytest.raises(ValueError):
        subset.positions[0, 0, 0] = 1.0


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n_molecules": 0}, ValueError, "n_molecules must be a positive integer"),
        ({"n_molecules": 2.5}, ValueError, "n_molecules must be a positive integer"),
        ({"n_molecules": 10_000}, ValueError, "exceeds the 304 molecules"),
        ({"source": 3}, TypeError, "source must be 'qm9pack' or a path"),
        ({"source": "/nonexistent/qm9"}, FileNotFoundError, "does not exist"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    kwargs.setdefault("source", DATA)
    with pytest.raises(exc, match=match):
        load_qm9(**kwargs)


def test_folder_without_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="identrep\\[molecules\\]"):
        load_qm9(source=tmp_path)
    (tmp_path / "qm9_part1.csv").write_text("x\n")
    with pytest.raises(FileNotFoundError, match="qm9_polarizability.csv"):
        load_qm9(source=tmp_path)


def _no_qm9pack(monkeypatch):
    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)


def test_missing_qm9pack_names_the_extra(monkeypatch, tmp_path):
    _no_qm9pack(monkeypatch)
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path))
    with pytest.raises(ImportError, match='pip install "identrep\\[molecules\\]"'):
        load_qm9()
    with pytest.raises(ImportError, match=str(tmp_path / "qm9")):
        load_qm9()


def test_data_home_fallback(monkeypatch, tmp_path):
    _no_qm9pack(monkeypatch)
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path))
    (tmp_path / "qm9").mkdir()
    for f in SAMPLE.iterdir():
        (tmp_path / "qm9" / f.name).write_bytes(f.read_bytes())
    data = load_qm9()
    assert len(data) == 10 and data.source == str(tmp_path / "qm9")


def test_module_does_not_import_torch():
    for path in (
        Path(qm9_mod.__file__),
        Path(qm9_mod.__file__).with_name("_qm9_files.py"),
    ):
        text = path.read_text(encoding="utf-8")
        assert "import torch" not in text and "from torch" not in text
        assert "import qm9pack" not in text


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("qm9pack") is None, reason="qm9pack not installed"
)
def test_full_qm9_matches_fixture(subset):
    full = load_qm9()
    assert len(full) == 130_831
    assert full.n_atoms.max() == 29
    idx = np.searchsorted(full.mol_ids, subset.mol_ids)
    assert np.array_equal(full.mol_ids[idx], subset.mol_ids)
    np.testing.assert_array_equal(full.positions[idx], subset.positions)
    np.testing.assert_array_equal(full.Y[idx], subset.Y)
    assert np.all(full.atom_features[..., 6][full.atomic_numbers == 1] == 1)


def test_xyz_reader_vectorised_equals_per_line(tmp_path):
    """The one-pass atom-line parser gives the per-line parser's bits, reads QM9's
    ``*^`` exponents and a charge column, and falls back on uneven lines."""
    from identrep.datasets import _qm9_files as files

    xyz = DATA / "micro_qm9_geometries.xyz"
    fast = files._read_xyz(xyz)
    lines = xyz.read_text().splitlines()
    atoms = [ln for ln in lines if len(ln.split()) == 4]
    els, coords = files._parse_atom_lines_plain(atoms)
    got_els = [e for v in fast.values() for e in v[0]]
    got = np.concatenate([v[1] for v in fast.values()])
    assert got_els == els and np.array_equal(got, coords)
    assert len(fast) == 304

    odd = ["C 1.5*^-3 -0.25 3 0.1", "H 0.1 0.2 0.30000000000000004 -0.2"]
    e, c = files._parse_atom_lines(odd)
    assert e == ["C", "H"]
    assert c.tolist() == [[1.5e-3, -0.25, 3.0], [0.1, 0.2, 0.30000000000000004]]
    path = tmp_path / "m_geometries.xyz"
    path.write_text("2\ngdb_7 x\n" + "\n".join(odd) + "\n1\ngdb_8\nO 0 0 0 1 2\n")
    frames = files._read_xyz(path)  # 5 then 6 columns: the per-line parser
    assert frames["gdb_8"][0] == ["O"] and frames["gdb_7"][1].tolist() == c.tolist()
