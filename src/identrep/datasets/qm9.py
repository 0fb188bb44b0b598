"""QM9: 3-D molecules with 12 quantum-chemical properties (numpy/pandas only).

:func:`load_qm9` reads the full QM9 (130,831 molecules, Ramakrishnan et al., 2014)
from the data files of the optional PyPI package ``qm9pack`` (MIT; install with
``pip install "identrep[molecules]"``), or a folder holding either the same files
or the small QM9 subset used by the test suite (without qm9pack, the folder ``qm9``
of the data home ``$IDENTREP_DATA``, else ``~/identrep_data``, is tried). The
package is never imported: its files are located through ``importlib.metadata``
and parsed here.

Molecules come as dense arrays padded to :data:`QM9_MAX_ATOMS` = 29 atoms, plus a
flat 2-D encoding (:func:`flatten_molecules`) that every identrep estimator
accepts as ``X`` and that :class:`identrep.models.nn.egnn.EGNNExtractor` decodes.

Flat layout
-----------
Row i of ``X`` is molecule i; its ``max_atoms * (n_atom_features + 4)`` columns
are atom-major blocks, one per atom slot ``a = 0 .. max_atoms - 1``::

    X[i, a*w : (a+1)*w] = [atom_features[i, a, :], x, y, z, mask]   # w = F + 4

Positions are in Angstrom and ``mask`` is 1.0 for a real atom, 0.0 for padding
(padding slots are all zeros). ``X.reshape(n, max_atoms, w)`` recovers the blocks.

Atom features (:data:`QM9_ATOM_FEATURES`, F = 8): one-hot element (H, C, N, O,
F), atomic number, and two bond counts derived from the geometry (QM9's files
have no bond table and identrep does not depend on RDKit): ``degree``, the number
of atoms within bonding distance, and ``n_hydrogens``, how many of them are
hydrogens. Two atoms are bonded when their distance is below the sum of their
covalent radii (Cordero et al., 2008) plus 0.2 Angstrom: in QM9 this threshold falls in
the gap between bonded and non-bonded distances of every element pair (C-C bonds
end near 1.70 Angstrom, the shortest 1,3 contacts in strained rings start near 1.75).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from identrep._typing import Seed
from identrep.datasets._qm9_files import (
    _INSTALL_HINT,
    _data_home,
    _find_files,
    _find_subset_files,
    _qm9pack_folder,
    _read_qm9pack,
    _read_subset,
)
from identrep.exceptions import DataError

__all__ = [
    "QM9_ATOM_FEATURES",
    "QM9_MAX_ATOMS",
    "QM9_TARGETS",
    "QM9_TARGET_UNITS",
    "MoleculeData",
    "flatten_molecules",
    "load_qm9",
    "unflatten_molecules",
]

QM9_MAX_ATOMS = 29
"""Largest molecule in QM9 (atoms, hydrogens included)."""

QM9_TARGETS = (
    "mu",
    "alpha",
    "homo",
    "lumo",
    "gap",
    "r2",
    "zpve",
    "U0",
    "U",
    "H",
    "G",
    "Cv",
)
"""The 12 regression targets in the order of Chen et al. (2024), Figure 3."""

QM9_TARGET_UNITS = {
    "mu": "Debye",
    "alpha": "Bohr^3",
    "homo": "Hartree",
    "lumo": "Hartree",
    "gap": "Hartree",
    "r2": "Bohr^2",
    "zpve": "Hartree",
    "U0": "Hartree",
    "U": "Hartree",
    "H": "Hartree",
    "G": "Hartree",
    "Cv": "cal/(mol K)",
}
"""Units of the targets as stored in QM9 (no conversion is applied)."""

_ELEMENTS = ("H", "C", "N", "O", "F")
_ATOMIC_NUMBER = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
# single-bond covalent radii in Angstrom (Cordero et al., Dalton Trans. 2008; C sp3)
_COVALENT_RADIUS = {1: 0.31, 6: 0.76, 7: 0.71, 8: 0.66, 9: 0.57}
_BOND_TOLERANCE = 0.2

QM9_ATOM_FEATURES = (
    "is_H",
    "is_C",
    "is_N",
    "is_O",
    "is_F",
    "atomic_number",
    "degree",
    "n_hydrogens",
)
"""Names of the per-atom features, in column order."""


# ----------------------------------------------------------------------- bundle
@dataclass(frozen=True)
class MoleculeData:
    """Molecules as dense arrays padded to ``max_atoms``, with their targets.

    Attributes
    ----------
    atom_features : ndarray of shape (n_molecules, max_atoms, n_atom_features)
        Per-atom features (``feature_names``); zero on padding slots.
    positions : ndarray of shape (n_molecules, max_atoms, 3)
        Cartesian coordinates in Angstrom (DFT geometries); zero on padding.
    mask : ndarray of shape (n_molecules, max_atoms), bool
        True for real atoms. Real atoms come first, in the file's atom order.
    atomic_numbers : ndarray of shape (n_molecules, max_atoms), int
        0 on padding.
    targets : pandas.DataFrame of shape (n_molecules, 12)
        The :data:`QM9_TARGETS` in that order, raw QM9 units
        (:data:`QM9_TARGET_UNITS`), indexed by ``mol_id``.
    mol_ids : ndarray of shape (n_molecules,), int
        QM9 index N of molecule ``gdb_N`` (1 ... 133885).
    smiles : ndarray of shape (n_molecules,), object
    feature_names : tuple of str
    source : str
        Where the molecules were read from.
    """

    atom_features: np.ndarray
    positions: np.ndarray
    mask: np.ndarray
    atomic_numbers: np.ndarray
    targets: pd.DataFrame
    mol_ids: np.ndarray
    smiles: np.ndarray
    feature_names: tuple[str, ...] = QM9_ATOM_FEATURES
    source: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in (
            "atom_features",
            "positions",
            "mask",
            "atomic_numbers",
            "mol_ids",
            "smiles",
        ):
            getattr(self, name).setflags(write=False)

    def __len__(self) -> int:
        return self.mask.shape[0]

    @property
    def max_atoms(self) -> int:
        """Padded atom count (29 for QM9)."""
        return self.mask.shape[1]

    @property
    def n_atom_features(self) -> int:
        return self.atom_features.shape[2]

    @property
    def n_atoms(self) -> np.ndarray:
        """ndarray of shape (n_molecules,): real atoms per molecule."""
        return self.mask.sum(axis=1)

    @property
    def X(self) -> np.ndarray:
        """Flat encoding of shape (n_molecules, max_atoms * (n_atom_features + 4)).

        Computed on every access (see :func:`flatten_molecules` for the layout).
        """
        return flatten_molecules(self.atom_features, self.positions, self.mask)

    @property
    def Y(self) -> np.ndarray:
        """Targets as an array of shape (n_molecules, 12), float64."""
        return self.targets.to_numpy(dtype=np.float64)

    @property
    def flat_columns(self) -> list[str]:
        """Column names of :attr:`X`: ``atom00_is_H``, ..., ``atom28_mask``."""
        return flat_column_names(self.feature_names, self.max_atoms)


def flat_column_names(
    feature_names: tuple[str, ...] | list[str], max_atoms: int
) -> list[str]:
    """Names of the flat-encoding columns, ``atom<a>_<feature>`` per atom slot."""
    per_atom = [*feature_names, "x", "y", "z", "mask"]
    width = len(str(max_atoms - 1))
    return [f"atom{a:0{width}d}_{f}" for a in range(max_atoms) for f in per_atom]


def flatten_molecules(
    atom_features: np.ndarray,
    positions: np.ndarray,
    mask: np.ndarray,
    dtype=np.float64,
) -> np.ndarray:
    """Encode padded molecules as one row each (the module docstring's layout).

    Parameters
    ----------
    atom_features : array-like of shape (n_molecules, max_atoms, n_atom_features)
    positions : array-like of shape (n_molecules, max_atoms, 3)
    mask : array-like of shape (n_molecules, max_atoms), bool
    dtype : numpy dtype, default=float64

    Returns
    -------
    ndarray of shape (n_molecules, max_atoms * (n_atom_features + 4))
        Padding slots are all zeros, whatever the inputs hold there.

    Raises
    ------
    DataError
        If the shapes disagree.
    """
    F = np.asarray(atom_features)
    P = np.asarray(positions)
    M = np.asarray(mask).astype(bool)
    if F.ndim != 3 or P.ndim != 3 or P.shape[2] != 3 or M.ndim != 2:
        raise DataError(
            "atom_features, positions and mask must have shapes (n, max_atoms, F), "
            f"(n, max_atoms, 3) and (n, max_atoms); got {F.shape}, {P.shape} and "
            f"{M.shape}."
        )
    if not (F.shape[:2] == P.shape[:2] == M.shape):
        raise DataError(
            "atom_features, positions and mask must agree on (n, max_atoms); got "
            f"{F.shape[:2]}, {P.shape[:2]} and {M.shape}."
        )
    n, A = M.shape
    out = np.concatenate(
        [F.astype(dtype), P.astype(dtype), M[..., None].astype(dtype)], axis=2
    )
    out *= M[..., None]
    return out.reshape(n, A * (F.shape[2] + 4))


def unflatten_molecules(
    X: np.ndarray, n_atom_features: int = len(QM9_ATOM_FEATURES)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Invert :func:`flatten_molecules`.

    Parameters
    ----------
    X : array-like of shape (n_molecules, max_atoms * (n_atom_features + 4))
    n_atom_features : int, default=8

    Returns
    -------
    atom_features : ndarray of shape (n_molecules, max_atoms, n_atom_features)
    positions : ndarray of shape (n_molecules, max_atoms, 3)
    mask : ndarray of shape (n_molecules, max_atoms), bool

    Raises
    ------
    DataError
        If the width of ``X`` is not a multiple of ``n_atom_features + 4``.
    """
    X = np.asarray(X)
    w = int(n_atom_features) + 4
    if X.ndim != 2 or X.shape[1] % w:
        raise DataError(
            f"X must have shape (n_molecules, max_atoms * {w}) for "
            f"n_atom_features={n_atom_features}; got {X.shape}."
        )
    B = X.reshape(X.shape[0], -1, w)
    return B[..., :-4], B[..., -4:-1], B[..., -1] > 0.5


# ---------------------------------------------------------------- features
def _bond_counts(
    positions: np.ndarray, atomic_numbers: np.ndarray, chunk: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """Geometric bond graph: (degree, number of bonded H) per atom, 0 on padding."""
    radius = np.zeros(10)
    for z, r in _COVALENT_RADIUS.items():
        radius[z] = r
    n, A = atomic_numbers.shape
    degree = np.zeros((n, A), dtype=np.int64)
    n_h = np.zeros((n, A), dtype=np.int64)
    eye = np.eye(A, dtype=bool)
    for s in range(0, n, chunk):
        P, Z = positions[s : s + chunk], atomic_numbers[s : s + chunk]
        real = Z > 0
        r = radius[Z]
        dist = np.sqrt(((P[:, :, None, :] - P[:, None, :, :]) ** 2).sum(-1))
        bonded = dist < r[:, :, None] + r[:, None, :] + _BOND_TOLERANCE
        bonded &= real[:, :, None] & real[:, None, :] & ~eye
        degree[s : s + chunk] = bonded.sum(2)
        n_h[s : s + chunk] = (bonded & (Z == 1)[:, None, :]).sum(2)
    return degree, n_h


def _build(
    elements: list[list[str]],
    coords: list[np.ndarray],
    targets: pd.DataFrame,
    mol_ids: np.ndarray,
    smiles: np.ndarray,
    source: str,
    info: dict,
) -> MoleculeData:
    n, A = len(elements), QM9_MAX_ATOMS
    Z = np.zeros((n, A), dtype=np.int64)
    P = np.zeros((n, A, 3))
    for i, (els, xyz) in enumerate(zip(elements, coords, strict=True)):
        k = len(els)
        if k > A or xyz.shape != (k, 3):
            raise DataError(
                f"Molecule gdb_{mol_ids[i]} has {k} atoms and coordinates of shape "
                f"{xyz.shape}; expected at most {A} atoms and shape ({k}, 3)."
            )
        try:
            Z[i, :k] = [_ATOMIC_NUMBER[e] for e in els]
        except KeyError as exc:
            raise DataError(
                f"Molecule gdb_{mol_ids[i]} has element {exc.args[0]!r}; QM9 holds "
                f"only {_ELEMENTS}."
            ) from None
        P[i, :k] = xyz
    mask = Z > 0
    degree, n_h = _bond_counts(P, Z)
    onehot = (Z[..., None] == np.array([1, 6, 7, 8, 9])).astype(np.float64)
    feats = np.concatenate(
        [onehot, Z[..., None], degree[..., None], n_h[..., None]], axis=2
    ).astype(np.float64)
    targets = targets.reset_index(drop=True)
    targets.index = pd.Index(mol_ids, name="mol_id")
    return MoleculeData(
        atom_features=feats,
        positions=P,
        mask=mask,
        atomic_numbers=Z,
        targets=targets,
        mol_ids=np.asarray(mol_ids, dtype=np.int64),
        smiles=np.asarray(smiles, dtype=object),
        feature_names=QM9_ATOM_FEATURES,
        source=source,
        info=info,
    )


def load_qm9(
    *,
    n_molecules: int | None = None,
    random_state: Seed = None,
    source: str | os.PathLike = "qm9pack",
) -> MoleculeData:
    """Load QM9 molecules (3-D geometries) and their 12 standard targets.

    Parameters
    ----------
    n_molecules : int, optional
        Load a uniformly random subset of this many molecules (without
        replacement, kept in QM9 index order); default all of them.
    random_state : int, Generator or None
        Seeds the subset; unused when ``n_molecules`` is None.
    source : "qm9pack" or path, default="qm9pack"
        ``"qm9pack"``: the data files of the installed ``qm9pack`` package (the
        full QM9, 130,831 molecules; ``pip install "identrep[molecules]"``); when
        it is not installed, the folder ``qm9`` of the data home
        (``$IDENTREP_DATA``, else ``~/identrep_data``) if it holds QM9 files. A
        folder: either qm9pack's files (``qm9_part*.csv`` and
        ``qm9_polarizability.csv``) or a QM9 subset as shipped with the tests
        (``<name>.csv`` with columns ``mol_id, smiles, mu, alpha, homo, lumo, gap,
        r2, zpve, u0, u298, h298, g298, cv`` and a multi-frame
        ``<name>_geometries.xyz`` whose comment lines start with the mol_id;
        either may be gzipped). Molecules without a geometry are dropped.

    Returns
    -------
    MoleculeData
        Padded arrays (29 atom slots), the targets as a DataFrame in the order
        :data:`QM9_TARGETS` (raw units, not standardised), ``mol_ids``, and the
        flat encoding ``.X`` of shape (n_molecules, 348).

    Raises
    ------
    ImportError
        ``source="qm9pack"``, the package is not installed and the data home has
        no QM9 files.
    FileNotFoundError
        A data file is missing.
    ValueError
        A bad ``n_molecules`` or ``source``.

    Examples
    --------
    >>> from identrep.datasets import load_qm9
    >>> data = load_qm9(n_molecules=1000, random_state=0)  # doctest: +SKIP
    >>> data.X.shape, list(data.targets.columns[:3])  # doctest: +SKIP
    ((1000, 348), ['mu', 'alpha', 'homo'])
    """
    if n_molecules is not None and (
        isinstance(n_molecules, bool)
        or not isinstance(n_molecules, (int, np.integer))
        or n_molecules < 1
    ):
        raise ValueError(
            f"n_molecules must be a positive integer or None; got {n_molecules!r}."
        )

    def select(n_total: int) -> np.ndarray:
        if n_molecules is None:
            return np.arange(n_total)
        if n_molecules > n_total:
            raise ValueError(
                f"n_molecules={n_molecules} exceeds the {n_total} molecules available "
                f"in {label}; pass at most {n_total} or None."
            )
        rng = np.random.default_rng(random_state)
        return np.sort(rng.choice(n_total, size=int(n_molecules), replace=False))

    if isinstance(source, str) and source == "qm9pack":
        try:
            folder = _qm9pack_folder()
        except ImportError:
            home = _data_home() / "qm9"
            if not _find_files(home):
                raise ImportError(
                    f"QM9 is not available: {_INSTALL_HINT}, or put those files in "
                    f"{home} (the data home is $IDENTREP_DATA, else ~/identrep_data)."
                ) from None
            source = home
    if isinstance(source, str) and source == "qm9pack":
        label = f"qm9pack ({folder})"
        parsed = _read_qm9pack(folder, select)
    elif isinstance(source, (str, os.PathLike)):
        folder = Path(source).expanduser()
        label = str(folder)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"QM9 source folder {folder} does not exist; pass source='qm9pack' "
                f"or an existing folder ({_INSTALL_HINT})."
            )
        if any(folder.glob("qm9_part*.csv")):
            parsed = _read_qm9pack(folder, select)
        elif (files := _find_subset_files(folder)) is not None:
            parsed = _read_subset(*files, select)
        else:
            raise FileNotFoundError(
                f"No QM9 data files in {folder}: expected qm9_part*.csv and "
                "qm9_polarizability.csv, or <name>.csv with <name>_geometries.xyz; "
                f"{_INSTALL_HINT}."
            )
    else:
        raise TypeError(
            f"source must be 'qm9pack' or a path; got {type(source).__name__}."
        )
    elements, coords, targets, ids, smiles, info = parsed
    return _build(
        elements,
        coords,
        targets.astype(np.float64),
        np.asarray(ids, dtype=np.int64),
        np.asarray(smiles, dtype=object),
        label,
        info,
    )
