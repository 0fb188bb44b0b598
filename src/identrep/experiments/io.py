"""Run records: one JSON file per run (written atomically), loading them back."""

from __future__ import annotations

import json
import os
import warnings
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


def _record_problem(rec) -> str | None:
    """Why a parsed record cannot be used, or None."""
    if not isinstance(rec, dict):
        return f"holds a {type(rec).__name__}, not a run record (a JSON object)"
    missing = [k for k in ("run_id", "config", "metrics") if k not in rec]
    if missing:
        return f"lacks {missing}"
    if not isinstance(rec["config"], dict) or not isinstance(rec["metrics"], dict):
        return "has a config or metrics entry that is not a JSON object"
    return None


def load_records(folder: str | os.PathLike) -> list[dict]:
    """All run records (``records/*.json``) under ``folder``, sorted by file name.

    A record that is not valid JSON or not a run record (never written by
    :func:`write_record`: a hand edit, another tool, a damaged disk) is moved to
    ``folder/records_set_aside/`` with a warning naming it and why, so it neither
    blocks a resumed sweep (which runs it again) nor the report.

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
            rec = json.loads(p.read_text(encoding="utf-8"))
            problem = _record_problem(rec)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            rec, problem = None, f"is not valid JSON ({exc})"
        if problem is None:
            out.append(rec)
            continue
        aside = Path(folder) / "records_set_aside"
        aside.mkdir(exist_ok=True)
        os.replace(p, aside / p.name)
        warnings.warn(
            f"Record {p.name} {problem}; moved it to {aside}. A resumed sweep runs "
            "that configuration again.",
            UserWarning,
            stacklevel=2,
        )
    return out
