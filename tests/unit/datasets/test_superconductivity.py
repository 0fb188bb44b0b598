"""UCI Superconductivity: exact feature recomputation and the Table 3 loader."""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from identrep.datasets import compute_superconductivity_features, load_superconductivity
from identrep.datasets import superconductivity as sc
from identrep.exceptions import DataError

CHECK_DIR = Path(__file__).resolve().parents[2] / "data" / "superconductivity"
N_MATERIALS = 21263
# Original UCI values below this are floating-point noise of the author's R code
# (e.g. 2.2e-16 for the weighted std of equal values); they are compared absolutely.
NOISE = 1e-12


@pytest.fixture(scope="module")
def original():
    """The 2,126 materials whose original UCI features are known (verbatim copy)."""
    comp = pd.read_csv(CHECK_DIR / "original_compositions_2126.csv.gz")
    feats = pd.read_csv(CHECK_DIR / "original_features_2126.csv.gz")
    assert (comp["id"].to_numpy() == feats["id"].to_numpy()).all()
    return comp, feats


@pytest.fixture(scope="module")
def data():
    return load_superconductivity()


def _errors(computed: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Max relative error where |reference| >= NOISE; max absolute error elsewhere."""
    err = np.abs(computed - reference)
    noise = np.abs(reference) < NOISE
    rel = err[~noise] / np.abs(reference[~noise])
    return float(rel.max()), float(err[noise].max(initial=0.0))


# ------------------------------------------------------- exactness vs the UCI file


def test_features_reproduce_original_uci_values(original):
    comp, feats = original
    computed = compute_superconductivity_features(comp.loc[:, list(sc.ELEMENTS)])
    assert list(computed.columns) == list(feats.columns[1:]) == list(sc.FEATURE_NAMES)
    reference = feats.loc[:, list(sc.FEATURE_NAMES)].to_numpy(dtype=float)
    np.testing.assert_array_equal(computed["number_of_elements"], reference[:, 0])
    max_rel, max_abs_noise = _errors(computed.to_numpy(dtype=float), reference)
    assert max_rel < 1e-9  # measured 6.5e-13 (the UCI file prints 15 digits)
    assert max_abs_noise < NOISE  # measured 8.9e-16


def test_array_input_matches_frame_input(original):
    comp, _ = original
    frame = comp.loc[:, list(sc.ELEMENTS)]
    out = compute_superconductivity_features(frame.to_numpy())
    assert isinstance(out, np.ndarray) and out.shape == (len(frame), 81)
    np.testing.assert_array_equal(
        out, compute_superconductivity_features(frame).to_numpy(dtype=float)
    )


# ------------------------------------------------------------- closed-form checks


def test_closed_form_mgb2():
    # Mg: Valence 2, B: Valence 3; amounts 1 and 2, so p = (1/3, 2/3).
    f = compute_superconductivity_features(pd.DataFrame({"Mg": [1.0], "B": [2.0]}))
    got = f.loc[0, [f"{s}_Valence" for s in sc.STATISTICS]].to_numpy(dtype=float)
    wtd_mean = 1 / 3 * 2 + 2 / 3 * 3
    A = np.array([2 / 3, 2.0]) / (2 / 3 + 2.0)
    want = [
        2.5,
        wtd_mean,
        math.sqrt(6),
        2 ** (1 / 3) * 3 ** (2 / 3),
        -(0.4 * math.log(0.4) + 0.6 * math.log(0.6)),
        -(A * np.log(A)).sum(),
        1.0,
        2.0 - 2 / 3,
        0.5,
        math.sqrt(1 / 3 * (2 - wtd_mean) ** 2 + 2 / 3 * (3 - wtd_mean) ** 2),
    ]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert f.loc[0, "number_of_elements"] == 2
    assert f["number_of_elements"].dtype == np.int64


def test_single_element_has_zero_spread():
    f = compute_superconductivity_features(pd.DataFrame({"Nb": [3.0]}))
    for stat in ("entropy", "wtd_entropy", "range", "wtd_range", "std", "wtd_std"):
        cols = [f"{stat}_{p}" for p in sc.PROPERTIES]
        assert (f.loc[0, cols] == 0.0).all(), stat
    assert f.loc[0, "mean_atomic_mass"] == f.loc[0, "wtd_mean_atomic_mass"] == 92.90638
    assert f.loc[0, "gmean_atomic_mass"] == pytest.approx(92.90638, rel=1e-15)


def test_equal_values_give_exact_zero_std():
    # Ir and Pt share fie (868.1): the spread of fie must be exactly 0, not noise.
    f = compute_superconductivity_features(pd.DataFrame({"Ir": [0.8], "Pt": [0.2]}))
    assert f.loc[0, "range_fie"] == f.loc[0, "std_fie"] == 0.0
    assert f.loc[0, "wtd_std_fie"] == 0.0


def test_invariant_to_scale_of_amounts_and_column_order():
    a = pd.DataFrame({"Fe": [1.0], "Se": [0.2], "Te": [0.8]})
    b = pd.DataFrame({"Te": [8.0], "Fe": [10.0], "Se": [2.0]})
    fa, fb = (
        compute_superconductivity_features(a),
        compute_superconductivity_features(b),
    )
    np.testing.assert_allclose(fa.to_numpy(float), fb.to_numpy(float), rtol=1e-13)


def test_custom_element_table_and_index_kept():
    table = pd.DataFrame(
        {p: [2.0, 8.0] for p in sc.PROPERTIES}, index=pd.Index(["Aa", "Bb"])
    )
    comp = pd.DataFrame({"Aa": [1.0, 1.0], "Bb": [0.0, 1.0]}, index=["x", "y"])
    f = compute_superconductivity_features(comp, table.reset_index(names="element"))
    assert list(f.index) == ["x", "y"]
    assert f.loc["y", "gmean_Density"] == pytest.approx(4.0, rel=1e-15)
    assert f.loc["x", "number_of_elements"] == 1


# ------------------------------------------------------------------ input errors


@pytest.mark.parametrize(
    ("comp", "match"),
    [
        (pd.DataFrame({"Cu": [1.0], "O": [-1.0]}), "non-negative; got -1.0 at row 0"),
        (pd.DataFrame({"Cu": [1.0], "O": [np.nan]}), "non-finite amount"),
        (pd.DataFrame({"Cu": [1.0, 0.0], "O": [1.0, 0.0]}), "no element .*row 1"),
        (pd.DataFrame({"Cu": [1.0], "critical_temp": [9.0]}), "not element symbols"),
        (pd.DataFrame({"Uuo": [1.0]}), "not element symbols"),
        (pd.DataFrame({"Xe": [1.0]}), r"no positive, finite value .*\['Xe'\]"),
        (np.ones((2, 85)), r"shape \(n_materials, 86\)"),
    ],
)
def test_bad_compositions_raise(comp, match):
    with pytest.raises(DataError, match=match):
        compute_superconductivity_features(comp)


def test_non_numeric_compositions_raise():
    comp = pd.DataFrame({"Cu": [1.0], "material": ["Cu1"]})
    with pytest.raises(TypeError, match="drop other columns"):
        compute_superconductivity_features(comp)


def test_bad_element_table_raises():
    comp = pd.DataFrame({"Cu": [1.0], "O": [2.0]})
    table = sc._load_element_table()
    with pytest.raises(DataError, match="missing \\['Valence'\\]"):
        compute_superconductivity_features(comp, table.drop(columns="Valence"))
    with pytest.raises(DataError, match=r"\['Cu'\]"):
        compute_superconductivity_features(comp, table.drop(index="Cu"))
    zero = table.copy()
    zero.loc["O", "FusionHeat"] = 0.0
    with pytest.raises(DataError, match=r"\['O'\]"):
        compute_superconductivity_features(comp, zero)
    with pytest.raises(TypeError, match="DataFrame"):
        compute_superconductivity_features(comp, table.to_numpy())


# ------------------------------------------------------------------------ loader


def test_loader_shapes_and_names(data):
    assert data.X.shape == (N_MATERIALS, 86)
    assert data.Y.shape == (N_MATERIALS, 80)
    assert list(data.X.columns) == list(data.feature_names) == list(sc.ELEMENTS)
    assert data.X.columns[0] == "H" and data.X.columns[-1] == "Rn"
    assert list(data.Y.columns) == list(data.task_names) == list(sc.TASK_NAMES)
    assert data.Y.columns[0] == "mean_atomic_mass"
    assert data.Y.columns[-1] == "wtd_std_Valence"
    assert (data.n_samples, data.n_features, data.n_tasks) == (N_MATERIALS, 86, 80)
    assert data.element_properties.shape == (77, 8)
    assert "CC BY 4.0" in data.description and "Hamidieh" in data.description


def test_critical_temp_is_metadata_only(data):
    for name in ("critical_temp", "material", "number_of_elements"):
        assert name not in data.X.columns and name not in data.Y.columns
    assert data.critical_temp.shape == data.material.shape == (N_MATERIALS,)


def test_loader_has_no_missing_inputs_or_tasks(data):
    assert np.isfinite(data.X.to_numpy()).all()
    assert np.isfinite(data.Y.to_numpy()).all()
    assert (data.X.to_numpy() >= 0).all()


def test_loader_rows_follow_uci_order(data, original):
    # First and last rows of the UCI unique_m.csv.
    first, last = data.X.iloc[0], data.X.iloc[-1]
    assert first[first > 0].to_dict() == {"O": 4.0, "Cu": 1.0, "Ba": 0.2, "La": 1.8}
    assert last[last > 0].to_dict() == {"Fe": 1.0, "Se": 0.2, "Te": 0.8}
    assert data.material.iloc[0] == "Ba0.2La1.8Cu1O4"
    assert data.material.iloc[-1] == "Fe1Se0.2Te0.8"
    assert data.critical_temp.iloc[0] == 29.0 and data.critical_temp.iloc[-1] == 12.8
    assert data.X.index[-1] == N_MATERIALS - 1
    # Row 0 of train.csv by hand: wtd_mean_atomic_mass = sum p t over Ba0.2La1.8Cu1O4.
    by_hand = (0.2 * 137.327 + 1.8 * 138.90547 + 63.546 + 4 * 15.9994) / 7
    assert data.Y.iloc[0]["wtd_mean_atomic_mass"] == pytest.approx(by_hand, rel=1e-14)
    # Every row with known original features sits at its UCI id.
    comp, feats = original
    ids = feats["id"].to_numpy()
    assert (data.material.iloc[ids].to_numpy() == comp["material"].to_numpy()).all()
    got = data.Y.iloc[ids].to_numpy()
    max_rel, max_abs_noise = _errors(got, feats.loc[:, list(sc.TASK_NAMES)].to_numpy())
    assert max_rel < 1e-9 and max_abs_noise < NOISE


def test_critical_temp_missing_exactly_where_withheld(data, original):
    _, feats = original
    missing = np.flatnonzero(data.critical_temp.isna().to_numpy())
    np.testing.assert_array_equal(missing, np.sort(feats["id"].to_numpy()))
    known = data.critical_temp.dropna()
    assert len(known) == N_MATERIALS - 2126
    assert known.min() == 0.00021 and known.max() == 185.0


def test_loader_arrays_and_return_X_y(data):
    arrays = load_superconductivity(as_frame=False)
    assert isinstance(arrays.X, np.ndarray) and arrays.X.dtype == np.float64
    assert isinstance(arrays.Y, np.ndarray) and arrays.Y.shape == (N_MATERIALS, 80)
    np.testing.assert_array_equal(arrays.X, data.X.to_numpy())
    np.testing.assert_array_equal(arrays.Y, data.Y.to_numpy())
    assert arrays.material[0] == "Ba0.2La1.8Cu1O4"
    assert arrays.feature_names == sc.ELEMENTS and arrays.task_names == sc.TASK_NAMES
    X, Y = load_superconductivity(return_X_y=True)
    assert isinstance(X, pd.DataFrame) and X.shape == (N_MATERIALS, 86)
    assert isinstance(Y, pd.DataFrame) and Y.shape == (N_MATERIALS, 80)
    assert "n_tasks=80" in repr(data)


# -------------------------------------------------------- missing / corrupt files


def _copy_data(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copy(sc._DATA_DIR / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("missing", [sc._COMPOSITIONS_FILE, sc._ELEMENTS_FILE])
def test_missing_file_raises_naming_it(tmp_path, monkeypatch, missing):
    other = {sc._COMPOSITIONS_FILE, sc._ELEMENTS_FILE} - {missing}
    monkeypatch.setattr(sc, "_DATA_DIR", _copy_data(tmp_path, *other))
    with pytest.raises(FileNotFoundError, match=f"not found: .*{missing}.*reinstall"):
        load_superconductivity()


def test_truncated_file_raises(tmp_path, monkeypatch):
    _copy_data(tmp_path, sc._ELEMENTS_FILE)
    raw = (sc._DATA_DIR / sc._COMPOSITIONS_FILE).read_bytes()
    (tmp_path / sc._COMPOSITIONS_FILE).write_bytes(raw[: len(raw) // 2])
    monkeypatch.setattr(sc, "_DATA_DIR", tmp_path)
    with pytest.raises(DataError, match=r"compositions\.csv\.gz is corrupt"):
        load_superconductivity()


def test_modified_file_raises(tmp_path, monkeypatch):
    _copy_data(tmp_path, sc._COMPOSITIONS_FILE)
    text = (sc._DATA_DIR / sc._ELEMENTS_FILE).read_text()
    (tmp_path / sc._ELEMENTS_FILE).write_text(text.replace("1.00794", "1.008"))
    monkeypatch.setattr(sc, "_DATA_DIR", tmp_path)
    with pytest.raises(DataError, match=r"element_properties\.csv .*SHA-256"):
        load_superconductivity()


def test_crlf_line_endings_are_accepted(tmp_path, monkeypatch):
    # A checkout that converts line endings must not look corrupt.
    _copy_data(tmp_path, sc._COMPOSITIONS_FILE)
    raw = (sc._DATA_DIR / sc._ELEMENTS_FILE).read_bytes()
    (tmp_path / sc._ELEMENTS_FILE).write_bytes(raw.replace(b"\n", b"\r\n"))
    monkeypatch.setattr(sc, "_DATA_DIR", tmp_path)
    assert sc._load_element_table().shape == (77, 8)


def test_shipped_files_are_small():
    sizes = {p.name: p.stat().st_size for p in sc._DATA_DIR.iterdir()}
    assert sum(sizes.values()) < 1_000_000, sizes
    with gzip.open(sc._DATA_DIR / sc._COMPOSITIONS_FILE, "rt") as fh:
        header = fh.readline().rstrip("\n").split(",")
    assert header == [*sc.ELEMENTS, "critical_temp", "material"]
