"""The one atomic writer: every result file (records, reports, tables, plots, model
parts) is written to a temporary sibling, fsynced and renamed over its path, so a
reader, or a crash at any moment (SIGKILL included), sees the old file or the whole
new one, never a half-written file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "fsync_file"]


def fsync_file(path: str | os.PathLike) -> None:
    """Flush ``path``'s data to disk (``os.fsync`` on an open handle)."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the folder of ``path`` to write to.

    On success the file is fsynced and renamed over ``path``; on any error (a
    ``KeyboardInterrupt`` included) it is removed and the error re-raised. A killed
    write leaves only a hidden ``.<name>.<random>.tmp`` file behind, never a partial
    ``path``. The file gets the usual permissions (``0o666`` less the umask), not
    ``mkstemp``'s private ``0o600``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield Path(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))
