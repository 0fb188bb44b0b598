"""UCI Superconductivity data (Hamidieh 2018): element counts and derived features.

Each of the 21,263 superconductors is a chemical formula, stored as the amounts of 86
elements (H ... Rn). The 81 features of the UCI ``train.csv`` are deterministic
statistics of 8 elemental properties over the formula (plus ``number_of_elements``),
so identrep ships only the compositions and the element table and recomputes the
features exactly (:func:`compute_superconductivity_features`). For Table 3 of Chen et
al. (2024) the inputs are the 86 element counts and the tasks are the 80 derived
features; the critical temperature is neither (:func:`load_superconductivity`).

Definitions (Hamidieh 2018, section 2, and the author's R code): for a material with
elements i = 1..n, amounts a_i and property values t_i, let p_i = a_i / sum_j a_j
(proportions), w_i = t_i / sum_j t_j and A_i = p_i t_i / sum_j p_j t_j. Then

========================  ==================================
``mean``                  (1/n) sum t_i
``wtd_mean``              sum p_i t_i
``gmean``                 (prod t_i)^(1/n)
``wtd_gmean``             prod t_i^(p_i)
``entropy``               -sum w_i ln w_i
``wtd_entropy``           -sum A_i ln A_i
``range``                 max t_i - min t_i
``wtd_range``             max p_i t_i - min p_i t_i
``std``                   sqrt((1/n) sum (t_i - mean)^2)  (population)
``wtd_std``               sqrt(sum p_i (t_i - wtd_mean)^2)
========================  ==================================

Data: UCI Machine Learning Repository, dataset 464 "Superconductivty Data",
K. Hamidieh (2018), CC BY 4.0, derived from the NIMS SuperCon database. See
``datasets/data/superconductivity/README.md`` for provenance and checks.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from identrep.exceptions import DataError

__all__ = [
    "ELEMENTS",
    "FEATURE_NAMES",
    "PROPERTIES",
    "STATISTICS",
    "TASK_NAMES",
    "SuperconductivityData",
    "compute_superconductivity_features",
    "load_superconductivity",
]

#: The 86 element columns of the UCI ``unique_m.csv``, in file order (H ... Rn).
ELEMENTS: tuple[str, ...] = (
    "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si",
    "P", "S", "Cl", "Ar", "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni",
    "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y", "Zr", "Nb",
    "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I", "Xe",
    "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho",
    "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W", "Re", "Os", "Ir", "Pt", "Au", "Hg",
    "Tl", "Pb", "Bi", "Po", "At", "Rn",
)  # fmt: skip

#: The 8 elemental properties, in UCI column order.
PROPERTIES: tuple[str, ...] = (
    "atomic_mass",
    "fie",
    "atomic_radius",
    "Density",
    "ElectronAffinity",
    "FusionHeat",
    "ThermalConductivity",
    "Valence",
)

#: The 10 statistics computed for each property, in UCI column order.
STATISTICS: tuple[str, ...] = (
    "mean",
    "wtd_mean",
    "gmean",
    "wtd_gmean",
    "entropy",
    "wtd_entropy",
    "range",
    "wtd_range",
    "std",
    "wtd_std",
)

#: The 80 derived features (the Table 3 tasks), in UCI ``train.csv`` column order.
TASK_NAMES: tuple[str, ...] = tuple(f"{s}_{p}" for p in PROPERTIES for s in STATISTICS)

#: The 81 feature columns of the UCI ``train.csv`` (without ``critical_temp``).
FEATURE_NAMES: tuple[str, ...] = ("number_of_elements", *TASK_NAMES)

_N_MATERIALS = 21263
_N_LABELLED = 19137
_DATA_DIR = Path(__file__).resolve().parent / "data" / "superconductivity"
_COMPOSITIONS_FILE = "compositions.csv.gz"
_ELEMENTS_FILE = "element_properties.csv"
# SHA-256 of each file's content (decompressed, line endings normalised to "\n").
_SHA256 = {
    _COMPOSITIONS_FILE: (
        "6095ef9eb46cfc21cbd1db9cbd8e1844643e0b453de0f41a2c631ff4aeff46c6"
    ),
    _ELEMENTS_FILE: "9391384c322537b3fc123b9f1645a5b2fca6a9579fbac15411dab9668b357c2f",
}
_UCI_URL = "https://archive.ics.uci.edu/dataset/464/superconductivty+data"
_REINSTALL = (
    "The file ships with identrep; reinstall the package to restore it "
    "(pip install --force-reinstall identrep)."
)

_DESCRIPTION = f"""\
UCI Superconductivity data (dataset 464), {_N_MATERIALS:,} superconductors.

Inputs X: the amounts of 86 elements (H ... Rn) in each material's chemical formula
(UCI unique_m.csv). Tasks Y: the 80 derived features of UCI train.csv (mean, weighted
mean, geometric mean, weighted geometric mean, entropy, weighted entropy, range,
weighted range, std and weighted std of 8 elemental properties), recomputed exactly
from the compositions and the element table; number_of_elements is dropped. Rows are
in the original UCI order (row i = line i of unique_m.csv and train.csv). Metadata:
material (the formula) and critical_temp (K), which is neither an input nor a task.
critical_temp is missing (NaN) for {_N_MATERIALS - _N_LABELLED:,} materials whose
value was withheld in the copy identrep was built from. ElectronAffinity includes the
+1.5 offset the author added to avoid log(0).

Source: Hamidieh, K. (2018). A data-driven statistical model for predicting the
critical temperature of a superconductor. Computational Materials Science 154,
346-354. doi:10.1016/j.commatsci.2018.07.052. Data: UCI Machine Learning Repository,
{_UCI_URL} (derived from the NIMS SuperCon database), licensed CC BY 4.0
(https://creativecommons.org/licenses/by/4.0/). Changes: redistributed as element
counts plus an element-property table recovered from the published features; the
features are recomputed from them (max relative error vs the UCI values ~1e-12).
"""


@dataclass(frozen=True)
class SuperconductivityData:
    """The superconductivity data in wide multi-task format.

    Attributes
    ----------
    X : DataFrame or ndarray of shape (21263, 86)
        Element amounts per material; columns are element symbols (``ELEMENTS``).
    Y : DataFrame or ndarray of shape (21263, 80)
        The 80 derived features, the tasks (``TASK_NAMES``).
    critical_temp : Series or ndarray of shape (21263,)
        Critical temperature in kelvin; NaN for the 2,126 withheld materials.
        Metadata only: never an input or a task.
    material : Series or ndarray of shape (21263,)
        Chemical formula of each material, as in the UCI file.
    feature_names : tuple of str
        Column names of ``X``.
    task_names : tuple of str
        Column names of ``Y``.
    element_properties : DataFrame of shape (77, 8)
        The property of every element that occurs, indexed by symbol.
    description : str
        What the data are, where they come from, and the CC BY 4.0 attribution.
    """

    X: pd.DataFrame | np.ndarray
    Y: pd.DataFrame | np.ndarray
    critical_temp: pd.Series | np.ndarray
    material: pd.Series | np.ndarray
    feature_names: tuple[str, ...]
    task_names: tuple[str, ...]
    element_properties: pd.DataFrame
    description: str

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_tasks(self) -> int:
        return self.Y.shape[1]

    def __repr__(self) -> str:
        n_tc = int(np.isfinite(np.asarray(self.critical_temp, dtype=float)).sum())
        return (
            f"SuperconductivityData(n_samples={self.n_samples}, "
            f"n_features={self.n_features}, n_tasks={self.n_tasks}, "
            f"critical_temp known for {n_tc})"
        )


# ----------------------------------------------------------------------------- files


def _read_shipped(name: str) -> bytes:
    """Content of a shipped file (decompressed), checked against its SHA-256."""
    path = _DATA_DIR / name
    if not path.is_file():
        raise FileNotFoundError(
            f"Superconductivity data file not found: {path}. {_REINSTALL} The "
            f"original data are at {_UCI_URL}."
        )
    try:
        raw = path.read_bytes()
        if name.endswith(".gz"):
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(
            f"Superconductivity data file {path} is corrupt (cannot be read: {exc}). "
            f"{_REINSTALL}"
        ) from exc
    raw = raw.replace(b"\r\n", b"\n")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != _SHA256[name]:
        raise DataError(
            f"Superconductivity data file {path} is corrupt or was modified: the "
            f"SHA-256 of its content is {digest}, expected {_SHA256[name]}. "
            f"{_REINSTALL}"
        )
    return raw


def _load_element_table() -> pd.DataFrame:
    raw = _read_shipped(_ELEMENTS_FILE)
    return pd.read_csv(io.BytesIO(raw), index_col="element")


def _load_compositions() -> pd.DataFrame:
    raw = _read_shipped(_COMPOSITIONS_FILE)
    frame = pd.read_csv(
        io.BytesIO(raw),
        dtype={**dict.fromkeys(ELEMENTS, np.float64), "critical_temp": np.float64},
    )
    frame.index.name = "id"
    return frame


# ---------------------------------------------------------------------------- math


def _check_element_table(element_table) -> pd.DataFrame:
    if not isinstance(element_table, pd.DataFrame):
        raise TypeError(
            "element_table must be a pandas DataFrame indexed by element symbol (or "
            f"with an 'element' column); got {type(element_table).__name__}."
        )
    table = element_table
    if "element" in table.columns:
        table = table.set_index("element")
    missing = [p for p in PROPERTIES if p not in table.columns]
    if missing:
        raise DataError(
            f"element_table must have the property columns {list(PROPERTIES)}; "
            f"missing {missing}."
        )
    if table.index.has_duplicates:
        dup = table.index[table.index.duplicated()].unique().tolist()
        raise DataError(f"element_table lists elements more than once: {dup}.")
    try:
        return table.loc[:, list(PROPERTIES)].astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"element_table properties must be numeric ({exc}).") from exc


def _check_compositions(compositions) -> tuple[np.ndarray, list[str]]:
    if isinstance(compositions, pd.DataFrame):
        symbols = [str(c) for c in compositions.columns]
        values = compositions.to_numpy()
    else:
        values = np.asarray(compositions)
        if values.ndim != 2 or values.shape[1] != len(ELEMENTS):
            raise DataError(
                "compositions given as an array must have shape (n_materials, "
                f"{len(ELEMENTS)}) with columns in ELEMENTS order (H ... Rn); got "
                f"shape {values.shape}. Pass a DataFrame with element-symbol columns "
                "for another set of elements."
            )
        symbols = list(ELEMENTS)
    try:
        amounts = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "compositions must hold numeric element amounts only; drop other columns "
            f"(e.g. 'material', 'critical_temp') first ({exc})."
        ) from exc
    if amounts.ndim != 2:
        raise DataError(
            f"compositions must be 2-D (n_materials, n_elements); got {amounts.shape}."
        )
    bad = ~np.isfinite(amounts)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(
            f"compositions contains {int(bad.sum())} non-finite amount(s) (first at "
            f"row {r}, element {symbols[c]!r}); use 0 for absent elements."
        )
    if (amounts < 0).any():
        r, c = np.argwhere(amounts < 0)[0]
        raise DataError(
            f"compositions must be non-negative; got {amounts[r, c]} at row {r}, "
            f"element {symbols[c]!r}."
        )
    empty = ~(amounts > 0).any(axis=1)
    if empty.any():
        raise DataError(
            f"compositions has {int(empty.sum())} material(s) with no element "
            f"(first at row {int(np.argmax(empty))}); every row needs an amount > 0."
        )
    return amounts, symbols


def _xlogx(x: np.ndarray) -> np.ndarray:
    """x ln x with 0 ln 0 = 0."""
    safe = np.where(x > 0, x, 1.0)
    return x * np.log(safe)


def _features(amounts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The 81 UCI features of materials with ``amounts`` of elements ``values``.

    ``amounts`` has shape (n, m) (>= 0, every row has a positive entry) and
    ``values`` shape (m, 8) (finite and > 0 wherever an amount is positive).
    """
    n = amounts.shape[0]
    present = amounts > 0
    count = present.sum(axis=1)
    k = int(count.max())
    # Slot j of material i holds its j-th present element (column order); slots past
    # count[i] are padding. Slot-major (k, n, 8), so every reduction over a
    # material's elements is a sum of k contiguous slabs.
    order = np.argsort(~present, axis=1, kind="stable")[:, :k].T  # (k, n)
    mask = np.take_along_axis(present.T, order, axis=0)[:, :, None]  # (k, n, 1)
    a = np.where(mask, np.take_along_axis(amounts.T, order, axis=0)[:, :, None], 0.0)
    p = a / a.sum(axis=0)  # proportions p_i, 0 on padding
    t = np.where(mask, values[order], 1.0)  # values t_i; 1 on padding (log 1 = 0)
    nk = count[:, None].astype(np.float64)

    tz = np.where(mask, t, 0.0)
    mean = tz.sum(axis=0) / nk
    wtd_mean = (p * t).sum(axis=0)
    log_t = np.log(t)
    gmean = np.exp(log_t.sum(axis=0) / nk)
    wtd_gmean = np.exp((p * log_t).sum(axis=0))
    entropy = -_xlogx(tz / tz.sum(axis=0)).sum(axis=0)
    pt = p * t
    wtd_entropy = -_xlogx(pt / pt.sum(axis=0)).sum(axis=0)

    def spread(x):  # max - min over the present elements
        return np.where(mask, x, -np.inf).max(axis=0) - np.where(mask, x, np.inf).min(
            axis=0
        )

    value_range, wtd_range = spread(t), spread(pt)
    # Spreads about the first element's value: exactly 0 when all values are equal.
    d = np.where(mask, t - t[0], 0.0)
    d_mean = d.sum(axis=0) / nk
    std = np.sqrt((np.where(mask, d - d_mean, 0.0) ** 2).sum(axis=0) / nk)
    wtd_std = np.sqrt((p * (d - (p * d).sum(axis=0)) ** 2).sum(axis=0))

    stats = np.stack(
        [
            mean,
            wtd_mean,
            gmean,
            wtd_gmean,
            entropy,
            wtd_entropy,
            value_range,
            wtd_range,
            std,
            wtd_std,
        ],
        axis=2,
    )  # (n, 8 properties, 10 statistics): property-major like the UCI columns
    out = np.empty((n, len(FEATURE_NAMES)))
    out[:, 0] = count
    out[:, 1:] = stats.reshape(n, -1)
    return out


def compute_superconductivity_features(compositions, element_table=None):
    """The 81 UCI Superconductivity features of each material, computed exactly.

    Reproduces ``train.csv`` of the UCI data (Hamidieh 2018) without
    ``critical_temp``: ``number_of_elements`` and the 10 statistics (mean, weighted
    mean, geometric mean, weighted geometric mean, entropy, weighted entropy, range,
    weighted range, std, weighted std; definitions in the module docstring) of each
    of 8 elemental properties. Only elements with a positive amount count.

    Parameters
    ----------
    compositions : DataFrame of shape (n_materials, n_elements) or ndarray of shape \
(n_materials, 86)
        Amount of each element in each material's formula (e.g. 2 for the O in
        ``Cu1O2``; amounts need not sum to 1). A DataFrame's columns are element
        symbols, in any order; an array's columns are ``ELEMENTS`` (H ... Rn).
    element_table : DataFrame, optional
        Elemental properties indexed by symbol (or with an ``element`` column), with
        the columns ``PROPERTIES``; values must be positive for every element that
        occurs. Defaults to the table shipped with identrep (77 elements).

    Returns
    -------
    features : DataFrame or ndarray of shape (n_materials, 81)
        Columns ``FEATURE_NAMES`` in UCI order. A DataFrame (same index as
        ``compositions``, ``number_of_elements`` as int) when ``compositions`` is a
        DataFrame, else a float64 array.

    Raises
    ------
    DataError
        If an amount is negative or non-finite, a material has no element, a
        column is not an element of ``ELEMENTS`` or ``element_table``, or an
        element that occurs lacks a positive, finite property value.

    References
    ----------
    K. Hamidieh (2018). A data-driven statistical model for predicting the critical
    temperature of a superconductor. Comput. Mater. Sci. 154, 346-354.

    Examples
    --------
    >>> import pandas as pd
    >>> from identrep.datasets import compute_superconductivity_features
    >>> mgb2 = pd.DataFrame({"Mg": [1.0], "B": [2.0]})
    >>> f = compute_superconductivity_features(mgb2)
    >>> f.shape
    (1, 81)
    >>> f.loc[0, ["number_of_elements", "mean_Valence", "wtd_mean_Valence"]].tolist()
    [2.0, 2.5, 2.6666666666666665]
    """
    amounts, symbols = _check_compositions(compositions)
    table = _load_element_table() if element_table is None else element_table
    table = _check_element_table(table)
    unknown = [s for s in symbols if s not in table.index and s not in ELEMENTS]
    if unknown:
        raise DataError(
            f"compositions has columns that are not element symbols: {unknown[:5]}. "
            "Select the element columns only (e.g. drop 'material' and "
            "'critical_temp')."
        )
    values = table.reindex(symbols).to_numpy()  # NaN for elements not in the table
    used = (amounts > 0).any(axis=0)
    bad = used & ~(np.isfinite(values) & (values > 0)).all(axis=1)
    if bad.any():
        names = [s for s, b in zip(symbols, bad, strict=True) if b]
        raise DataError(
            f"element_table has no positive, finite value of every property for "
            f"elements that occur in compositions: {names[:10]}. Add them to the "
            "table or drop the materials that contain them."
        )
    values = np.where(used[:, None], values, 1.0)
    if amounts.shape[0] == 0:
        out = np.empty((0, len(FEATURE_NAMES)))
    else:
        out = _features(amounts, values)
    if not isinstance(compositions, pd.DataFrame):
        return out
    frame = pd.DataFrame(out, index=compositions.index, columns=list(FEATURE_NAMES))
    frame["number_of_elements"] = frame["number_of_elements"].astype(np.int64)
    return frame


# --------------------------------------------------------------------------- loader


def load_superconductivity(*, as_frame: bool = True, return_X_y: bool = False):
    """Load the UCI Superconductivity data as a multi-task data set (Table 3).

    Inputs are the amounts of the 86 elements in each material's formula; the
    tasks are the 80 derived elemental-property features of the UCI ``train.csv``,
    recomputed exactly from the compositions and the element table shipped with
    identrep (``number_of_elements`` is dropped). ``critical_temp`` and the formula
    are metadata, never inputs or tasks. Rows follow the original UCI order. No
    network access is needed.

    Parameters
    ----------
    as_frame : bool, default=True
        Return pandas objects (``X``/``Y`` DataFrames indexed by the UCI row id,
        ``critical_temp``/``material`` Series). If False, numpy arrays; the column
        names are in ``feature_names`` and ``task_names``.
    return_X_y : bool, default=False
        Return only ``(X, Y)`` instead of the bundle.

    Returns
    -------
    data : SuperconductivityData
        ``X`` (21263, 86), ``Y`` (21263, 80), ``critical_temp`` (21263,) with NaN
        for the 2,126 materials whose value was withheld in the source copy,
        ``material`` (21263,), ``feature_names``, ``task_names``,
        ``element_properties`` and ``description`` (provenance and attribution).
    (X, Y) : tuple
        If ``return_X_y`` is True.

    Raises
    ------
    FileNotFoundError
        If a shipped data file is missing (the message names it).
    DataError
        If a shipped data file is unreadable or its content checksum is wrong.

    Notes
    -----
    Data: UCI Machine Learning Repository, dataset 464, K. Hamidieh (2018),
    licensed CC BY 4.0; see ``data.description``.

    Examples
    --------
    >>> from identrep.datasets import load_superconductivity
    >>> data = load_superconductivity()
    >>> data.X.shape, data.Y.shape
    ((21263, 86), (21263, 80))
    >>> data.Y.columns[:3].tolist()
    ['mean_atomic_mass', 'wtd_mean_atomic_mass', 'gmean_atomic_mass']
    >>> data.material[0], float(data.critical_temp[0])
    ('Ba0.2La1.8Cu1O4', 29.0)
    >>> X, Y = load_superconductivity(as_frame=False, return_X_y=True)
    >>> X.dtype, Y.shape
    (dtype('float64'), (21263, 80))
    """
    table = _load_element_table()
    comp = _load_compositions()
    X = comp.loc[:, list(ELEMENTS)]
    Y = compute_superconductivity_features(X, table).loc[:, list(TASK_NAMES)]
    critical_temp = comp["critical_temp"].astype(np.float64)
    material = comp["material"]
    if not as_frame:
        X, Y = X.to_numpy(), Y.to_numpy()
        critical_temp = critical_temp.to_numpy()
        material = material.to_numpy(dtype=object)
    if return_X_y:
        return X, Y
    return SuperconductivityData(
        X=X,
        Y=Y,
        critical_temp=critical_temp,
        material=material,
        feature_names=ELEMENTS,
        task_names=TASK_NAMES,
        element_properties=table,
        description=_DESCRIPTION,
    )
