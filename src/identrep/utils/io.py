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

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "clean_leftovers",
    "exchange_paths",
    "fsync_file",
    "locked_dir",
    "replace_dir",
]


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


# ----------------------------------------------------------------- folders
_RENAME_EXCHANGE = 2  # linux/fs.h
_ASIDE = ".old"  # suffix of a previous folder set aside by the two-rename fallback


def _renameat2_exchange():
    """``renameat2(..., RENAME_EXCHANGE)`` from the C library, or None where the
    platform has none (then :func:`replace_dir` falls back to two renames)."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    fn.argtypes += [ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange_paths(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two existing paths in one atomic step (Linux ``RENAME_EXCHANGE``).

    Returns False, changing nothing, where the platform or file system cannot; the
    caller then falls back to two renames.
    """
    import ctypes
    import errno

    fn = _renameat2_exchange()
    if fn is None:
        return False
    at_fdcwd = -100
    res = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # not supported here
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


@contextlib.contextmanager
def locked_dir(folder: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (a no-op where fcntl is missing):
    writers that swap folders inside it take turns, so leftovers found under the
    lock belong to a process that died."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def replace_dir(new: str | os.PathLike, path: str | os.PathLike) -> None:
    """Put the finished folder ``new`` at ``path`` so that ``path`` always holds
    either its previous folder or ``new``, whenever the process dies.

    Where ``path`` exists the two are exchanged in one atomic step and the previous
    folder (now at ``new``) is removed; without ``RENAME_EXCHANGE`` the previous
    folder is first renamed aside to a sibling ``<new>.old``, which
    :func:`clean_leftovers` puts back if the process died in between. ``new`` and
    ``path`` must be siblings; callers hold :func:`locked_dir` on their parent.
    """
    import shutil

    new, path = Path(new), Path(path)
    if not (path.exists() or path.is_symlink()):
        os.replace(new, path)
        return
    if exchange_paths(new, path):
        shutil.rmtree(new, ignore_errors=True)
        return
    aside = new.with_name(new.name + _ASIDE)
    os.replace(path, aside)
    os.replace(new, path)
    shutil.rmtree(aside, ignore_errors=True)


def clean_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove the hidden ``.<name>.<random>.tmp`` siblings (and their ``.old``
    forms) that a killed :func:`replace_dir` or writer left beside ``path``; other
    files are never touched; if ``path`` is missing
    and a folder set aside by the two-rename fallback survives, put it back first.
    Call under :func:`locked_dir` of the parent. Returns what was removed."""
    import shutil

    path = Path(path)
    if not path.parent.is_dir():
        return []
    ours = (".tmp", ".tmp" + _ASIDE)  # names mkdtemp/mkstemp gave our writers
    mine = sorted(
        p for p in path.parent.glob(f".{path.name}.*") if p.name.endswith(ours)
    )
    if not path.exists():
        aside = [p for p in mine if p.name.endswith(_ASIDE) and p.is_dir()]
        if aside:
            os.replace(aside[-1], path)
            mine.remove(aside[-1])
    for p in mine:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return mine
