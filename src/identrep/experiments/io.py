"""Result files: atomic writes, one JSON record per run, loading them back."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["atomic_path", "atomic_write_text", "load_records", "write_record"]


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


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the folder of ``path`` to write to; on success
    the file is fsynced and renamed over ``path``, on any error it is removed.
    A reader (or a crash at any moment, SIGKILL included) sees either the old
    file or the complete new one; a killed write leaves only a hidden
    ``.<name>.<random>.tmp`` file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp makes the file private (0600); results get the usual permissions
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


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
