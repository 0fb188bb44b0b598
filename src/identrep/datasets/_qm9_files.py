"""QM9 file readers: qm9pack's data files and the QM9-subset format (numpy/pandas).

Used by :func:`identrep.datasets.load_qm9`; nothing here imports torch or qm9pack
(qm9pack's files are located through its distribution metadata).
"""

from __future__ import annotations

import ast
import gzip
import importlib.metadata
import importlib.util
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from identrep.exceptions import DataError

_QM9PACK_TARGETS = {
    "Dipole_debye": "mu",
    "Polarizability_bohr3": "alpha",
    "HOMO_au": "homo",
    "LUMO_au": "lumo",
    "HOMO_LUMO_gap_au": "gap",
    "R2_bohr2": "r2",
    "ZPVE_au": "zpve",
    "InternalEnergy_0K_au": "U0",
    "InternalEnergy_298K_au": "U",
    "Enthalphy_298K_au": "H",
    "GibbsFreeEnergy_298K_au": "G",
    "Heatcapacity_Cv_cal_mol_K": "Cv",
}

# column of the QM9-subset CSV (graphium's micro_qm9.csv) -> target name
_SUBSET_TARGETS = {
    "mu": "mu",
    "alpha": "alpha",
    "homo": "homo",
    "lumo": "lumo",
    "gap": "gap",
    "r2": "r2",
    "zpve": "zpve",
    "u0": "U0",
    "u298": "U",
    "h298": "H",
    "g298": "G",
    "cv": "Cv",
}
_INSTALL_HINT = (
    'install the optional data package with `pip install "identrep[molecules]"` '
    "(PyPI: qm9pack, MIT), or pass source=<folder> holding qm9_part*.csv and "
    "qm9_polarizability.csv (qm9pack's data files) or a QM9 subset "
    "(<name>.csv with mol_id/smiles/target columns plus <name>_geometries.xyz)"
)


def _literal(text: str):
    """Parse a Python/JSON list literal safely (JSON first, the faster parser)."""
    try:
        return json.loads(text)
    except ValueError:  # e.g. "0." is a Python float but not JSON
        return ast.literal_eval(text)


def _qm9pack_folder() -> Path:
    """The ``data`` folder of the installed qm9pack distribution (not imported)."""
    try:
        dist = importlib.metadata.distribution("qm9pack")
        folder = Path(str(dist.locate_file("qm9pack/data")))
        if folder.is_dir():
            return folder
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("qm9pack")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"QM9 is not available: {_INSTALL_HINT}.")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_qm9pack(folder: Path, select) -> tuple:
    parts = sorted(folder.glob("qm9_part*.csv"))
    pol = folder / "qm9_polarizability.csv"
    if not parts or not pol.is_file():
        missing = "qm9_part*.csv" if not parts else pol.name
        raise FileNotFoundError(
            f"QM9 data file {missing} not found in {folder}; {_INSTALL_HINT}."
        )
    cols = ["XYZ_file", "Index", "SMILES", "Elements", "XYZ_Ang", *_QM9PACK_TARGETS]
    df = pd.concat([pd.read_csv(p, usecols=cols) for p in parts], ignore_index=True)
    # qm9pack's get_data keeps only molecules that also have a polarizability row
    keep = pd.read_csv(pol, usecols=["XYZ_file"])["XYZ_file"]
    df = df[df["XYZ_file"].isin(set(keep))]
    df = df.sort_values("Index", kind="stable").reset_index(drop=True)
    n_total = len(df)
    df = df.iloc[select(n_total)].reset_index(drop=True)
    elements = [[str(e) for e in _literal(s)] for s in df["Elements"]]
    coords = [np.asarray(_literal(s), dtype=np.float64) for s in df["XYZ_Ang"]]
    targets = df[list(_QM9PACK_TARGETS)].rename(columns=_QM9PACK_TARGETS)
    info = {"format": "qm9pack", "n_available": n_total}
    return elements, coords, targets, df["Index"].to_numpy(), df["SMILES"], info


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _read_xyz(path: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """Multi-frame XYZ: ``{name: (elements, coords)}``, name = comment's first word.

    The frames are found line by line (one step per molecule); the atom lines of
    all frames are then parsed in one pass by pandas' C reader, whose float
    conversion is exact (the same bits as ``float``; before pandas 3.1 with
    ``float_precision="round_trip"``). Atom lines of uneven width fall back to
    the plain per-line parser.
    """
    with _open_text(path) as f:
        lines = f.read().splitlines()
    names, starts, counts = [], [], []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        k = int(lines[i])
        names.append(lines[i + 1].split()[0])
        starts.append(i + 2)
        counts.append(k)
        i += 2 + k
    atoms = [ln for s, k in zip(starts, counts, strict=True) for ln in lines[s : s + k]]
    try:
        els, xyz = _parse_atom_lines(atoms)
    except (ValueError, pd.errors.ParserError):
        els, xyz = _parse_atom_lines_plain(atoms)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return {
        name: (els[a:b], xyz[a:b])
        for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)
    }


# pandas >= 3.1 parses floats exactly by default (and deprecates the option)
_PANDAS = tuple(int(v) for v in re.findall(r"\d+", pd.__version__)[:2])
_ROUND_TRIP = {} if _PANDAS >= (3, 1) else {"float_precision": "round_trip"}


def _parse_atom_lines(atoms: list[str]) -> tuple[list[str], np.ndarray]:
    """``element x y z [charge]`` lines -> (elements, (n, 3) float64), vectorised.

    QM9's original files write some exponents as ``*^`` (Mathematica); they are
    read as ``e``.
    """
    text = "\n".join(atoms).replace("*^", "e")
    table = pd.read_csv(  # as many columns as the first line; more: an error
        io.StringIO(text),
        sep=r"\s+",
        header=None,
        dtype={0: str, 1: np.float64, 2: np.float64, 3: np.float64},
        engine="c",
        **_ROUND_TRIP,
    )
    if len(table) != len(atoms) or table.shape[1] < 4:
        raise ValueError("atom lines were merged, dropped or short")
    xyz = table[[1, 2, 3]].to_numpy(np.float64)
    if np.isnan(xyz).any():  # a short line: let the plain parser name it
        raise ValueError("an atom line without three coordinates")
    return table[0].tolist(), xyz


def _parse_atom_lines_plain(atoms: list[str]) -> tuple[list[str], np.ndarray]:
    rows = [ln.split() for ln in atoms]
    xyz = np.array([[float(v.replace("*^", "e")) for v in r[1:4]] for r in rows])
    return [r[0] for r in rows], xyz.reshape(len(rows), 3)


def _find_subset_files(folder: Path) -> tuple[Path, Path] | None:
    for xyz in sorted([*folder.glob("*_geometries.xyz"), *folder.glob("*.xyz.gz")]):
        stem = xyz.name.split("_geometries")[0]
        for csv in (folder / f"{stem}.csv", folder / f"{stem}.csv.gz"):
            if csv.is_file():
                return csv, xyz
    return None


def _read_subset(csv: Path, xyz: Path, select) -> tuple:
    table = pd.read_csv(csv)
    need = ["mol_id", "smiles", *_SUBSET_TARGETS]
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise DataError(f"{csv} lacks the column(s) {missing}; expected {need}.")
    frames = _read_xyz(xyz)
    has_geom = table["mol_id"].isin(frames.keys())
    table = table[has_geom]
    table = table.assign(
        _index=table["mol_id"].str.removeprefix("gdb_").astype(np.int64)
    )
    table = table.sort_values("_index", kind="stable").reset_index(drop=True)
    n_total = len(table)
    table = table.iloc[select(n_total)].reset_index(drop=True)
    elements = [frames[m][0] for m in table["mol_id"]]
    coords = [frames[m][1] for m in table["mol_id"]]
    targets = table[list(_SUBSET_TARGETS)].rename(columns=_SUBSET_TARGETS)
    info = {
        "format": "subset",
        "n_available": n_total,
        "n_without_geometry": int((~has_geom).sum()),
    }
    return elements, coords, targets, table["_index"].to_numpy(), table["smiles"], info


def _data_home() -> Path:
    return Path(os.environ.get("IDENTREP_DATA", "~/identrep_data")).expanduser()


def _find_files(folder: Path) -> bool:
    """Whether ``folder`` holds QM9 data in either supported format."""
    if not folder.is_dir():
        return False
    return any(folder.glob("qm9_part*.csv")) or _find_subset_files(folder) is not None


# ----------------------------------------------------------------- loader
