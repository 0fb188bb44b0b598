"""Run records: one JSON file per run (written atomically), loading them back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from identrep.utils.io import atomic_path, atomic_write_text

__all__ = [
    "atomic_path",
    "atomic_write_text",
    "latents_path",
    "load_records",
    "write_record",
]


def _default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def latents_path(artifacts: str | os.PathLike, run_id: str) -> Path:
    """Where a run stores its representations (``<artifacts>/<run_id>.npz``; a
    sweep's artifacts folder is ``out/latents``), for cross-seed metrics."""
    return Path(artifacts) / f"{run_id}.npz"


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Write one run record as JSON, atomically."""
    text = json.dumps(record, indent=2, sort_keys=True, default=_default)
    return atomic_write_text(path, text + "\n")


def load_records(folder: str | os.PathLike) -> list[dict]:
    """All run records (``records/*.json``) under ``folder``, sorted by file name.

    Raises
    ------
    FileNotFoundError
        If the folder has no ``records`` subfolder.
    """
    rec_dir = Path(folder) / "records"
    if not rec_dir.is_dir():
        raise FileNotFoundError(
            f"No records folder at {rec_dir}; expected the --out folder of "
            "`identrep reproduce`."
        )
    out = []
    for p in sorted(rec_dir.glob("*.json")):
        try:
            out.append(json.loads(p.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:  # never produced by write_record
            raise ValueError(f"Corrupt record {p}: {exc}") from exc
    return out
