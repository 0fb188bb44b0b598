"""Write all of QM9 in ``load_qm9``'s subset format (small enough for the device).

qm9pack's files are 225 MB of CSV, over the 64 MiB the GPU machine receives. The same
molecules as ``<name>.csv.gz`` (mol_id, smiles, the 12 targets) and
``<name>_geometries.xyz.gz`` (coordinates as Python float reprs, so they read back to
the same bits) are about 50 MiB. Then ``load_qm9`` of both sources is compared on a
random subset (X, Y, ids with ``np.array_equal``).

Usage (qm9pack installed; ``benchmarks/gpu_session.sh`` reads ``.devdata/qm9``)::

    PYTHONPATH=src python benchmarks/qm9_devdata.py .devdata/qm9 --check 3000
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np

from identrep.datasets import load_qm9
from identrep.datasets._qm9_files import (
    _QM9PACK_TARGETS,
    _SUBSET_TARGETS,
    _qm9pack_folder,
    _read_qm9pack,
)
from identrep.utils.io import atomic_path


def _gz(path: Path):
    return gzip.open(path, "wt", encoding="utf-8", compresslevel=9)


def write_subset(folder: Path, name: str = "qm9") -> int:
    elements, coords, targets, index, smiles, _ = _read_qm9pack(
        _qm9pack_folder(), lambda n: np.arange(n)
    )
    assert set(_QM9PACK_TARGETS.values()) == set(_SUBSET_TARGETS.values())
    to_column = {v: k for k, v in _SUBSET_TARGETS.items()}
    table = targets.rename(columns=to_column)
    table.insert(0, "smiles", list(smiles))
    table.insert(0, "mol_id", [f"gdb_{int(i)}" for i in index])
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / f"{name}.csv.gz") as tmp, _gz(tmp) as f:
        table.to_csv(f, index=False)
    with atomic_path(folder / f"{name}_geometries.xyz.gz") as tmp, _gz(tmp) as f:
        for mol, els, xyz in zip(table["mol_id"], elements, coords, strict=True):
            f.write(f"{len(els)}\n{mol}\n")
            for e, (x, y, z) in zip(els, xyz, strict=True):
                f.write(f"{e} {float(x)!r} {float(y)!r} {float(z)!r}\n")
    return len(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--check", type=int, default=3000, help="molecules compared")
    args = ap.parse_args()
    n = write_subset(args.folder)
    size = sum(p.stat().st_size for p in args.folder.iterdir()) / 2**20
    print(f"{n} molecules written to {args.folder} ({size:.1f} MiB)")
    if args.check:
        a = load_qm9(n_molecules=args.check, random_state=0)
        b = load_qm9(n_molecules=args.check, random_state=0, source=args.folder)
        same = {
            "X": np.array_equal(a.X, b.X),
            "Y": np.array_equal(a.Y, b.Y),
            "ids": np.array_equal(a.mol_ids, b.mol_ids),
        }
        print(f"load_qm9 of both sources, {args.check} molecules: {same}")
        if not all(same.values()):
            raise SystemExit("the two sources differ")


if __name__ == "__main__":
    main()
