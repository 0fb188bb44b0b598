"""Saving and loading fitted estimators without pickle.

A saved model is a folder::

    model/
      manifest.json   format, versions, class, get_params(), fitted attributes
                      (scalars inline, arrays and tensors by key), checksums,
                      feature names and free-form metadata
      arrays.npz      numpy arrays (loaded with ``allow_pickle=False``)
      tensors.pt      torch tensors and module state dicts (loaded with
                      ``torch.load(..., weights_only=True)``)

No arbitrary Python object is pickled, so loading a file from someone else cannot
run code: classes come from a registry of known estimators (:func:`register_estimator`),
networks are rebuilt by the estimator's own construction from the saved
hyperparameters and shapes, and only their weights come from the file. A loaded model
gives bit-identical ``transform`` output (same arrays, weights and code path).

The folder is written to a temporary sibling (each part with
:func:`identrep.utils.io.atomic_path`) and swapped with the previous model in one
atomic step (:func:`identrep.utils.io.replace_dir`), under a lock on the parent
folder: a process killed at any moment leaves the previous model or the complete new
one at the path, and the next save removes what it left beside it. Only a folder whose
manifest is an identrep manifest is ever replaced.

Loading reads only plain files inside the folder (no links), only the arrays and
tensors the manifest names, from parts stored uncompressed (so a file never unpacks
to more than its size), and answers any malformed manifest with
:class:`~identrep.exceptions.ModelFileError`.

Examples
--------
>>> import tempfile, numpy as np, identrep as ir
>>> from identrep.persistence import save_model, load_model
>>> data = ir.datasets.make_linear_tasks(n_tasks=20, n_samples=30, n_latents=3,
...                                      random_state=0)
>>> m = ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
>>> with tempfile.TemporaryDirectory() as d:
...     _ = save_model(m, f"{d}/model")
...     m2 = load_model(f"{d}/model")
>>> bool(np.array_equal(m.transform(data.X), m2.transform(data.X)))
True
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np

from identrep.exceptions import ModelFileError  # re-exported: it lived here before
from identrep.persistence._codec import (
    _decode_estimator,
    _encode_estimator,
    _referenced_keys,
    _registered_name,
    register_estimator,
)
from identrep.utils.io import (
    atomic_path,
    atomic_write_text,
    clean_leftovers,
    locked_dir,
    replace_dir,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ModelFileError",
    "load_model",
    "read_manifest",
    "register_estimator",
    "save_model",
]

FORMAT = "identrep-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
TENSORS = "tensors.pt"

_MAX_MANIFEST_BYTES = 16 * 2**20


# ------------------------------------------------------------------------ files
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict:
    import torch

    from identrep._version import __version__

    return {
        "identrep": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def _is_model_dir(path: Path) -> bool:
    """Whether ``path`` is a folder holding an identrep model manifest (a folder
    that merely has some ``manifest.json`` is not)."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        read_manifest(path)
    except (ModelFileError, OSError):
        return False
    return True


def _write_parts(tmp: Path, model, metadata: dict | None) -> None:
    """Write arrays, tensors and the manifest (last) into the folder ``tmp``."""
    import torch

    arrays: dict = {}
    tensors: dict = {}
    spec = _encode_estimator(model, "", arrays, tensors)
    with atomic_path(tmp / ARRAYS) as part, open(part, "wb") as f:
        np.savez(f, **arrays)
    with atomic_path(tmp / TENSORS) as part:
        torch.save(tensors, part)
    names = getattr(model, "feature_names_in_", None)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "class": spec["class"],
        "versions": _versions(),
        "feature_names": None if names is None else [str(n) for n in names],
        "metadata": metadata or {},
        "files": {
            n: {"sha256": _sha256(tmp / n), "bytes": (tmp / n).stat().st_size}
            for n in (ARRAYS, TENSORS)
        },
        "estimator": spec,
    }
    atomic_write_text(
        tmp / MANIFEST, json.dumps(manifest, indent=2, allow_nan=True) + "\n"
    )


def save_model(
    model, path: str | os.PathLike, *, metadata: dict | None = None, overwrite=True
) -> Path:
    """Save a fitted estimator to the folder ``path``, atomically and without pickle.

    Parameters
    ----------
    model : MTLCM, MTRN, BilevelSparseMTL, TaskIdentifiable or another registered
        estimator
        A fitted estimator. If it has ``feature_names_in_`` they are also listed
        in the manifest.
    path : path-like
        Folder to create (its parent is created if needed).
    metadata : dict, optional
        JSON-serialisable information stored in the manifest (e.g. the data
        columns the model was fitted on); read it back with :func:`read_manifest`.
    overwrite : bool, default=True
        Replace an existing saved model at ``path``. A path that exists but is not
        a saved model is never replaced.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    NotFittedError
        If ``model`` is not fitted.
    TypeError
        If the class is not registered or a fitted attribute cannot be saved.
    FileExistsError
        If ``path`` exists and is not a saved model, or ``overwrite=False``.
    """
    path = Path(path)
    if hasattr(model, "_check_fitted"):
        model._check_fitted()
    _registered_name(type(model))
    if metadata is not None:
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"metadata must be JSON-serialisable: {exc}") from exc
    if path.exists() or path.is_symlink():
        if not _is_model_dir(path):
            raise FileExistsError(
                f"{path} exists and is not a saved identrep model (no identrep "
                f"{MANIFEST}); refusing to replace it. Choose another path or remove "
                "it."
            )
        if not overwrite:
            raise FileExistsError(f"{path} already holds a saved model.")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    with locked_dir(parent):
        clean_leftovers(path)  # of a save killed before this one
        if (path.exists() or path.is_symlink()) and not _is_model_dir(path):
            raise FileExistsError(
                f"{path} exists and is not a saved identrep model; refusing to "
                "replace it. Choose another path or remove it."
            )
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
        try:
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes it private (0700)
            _write_parts(tmp, model, metadata)
            replace_dir(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return path


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a saved model (format, versions, class, metadata, ...).

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    ModelFileError
        If ``path`` is not a saved identrep model or its manifest is corrupt.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"No saved model at {path}; expected a folder written by "
            "identrep.persistence.save_model (or `identrep fit --out DIR`, which "
            "saves DIR/model)."
        )
    if not path.is_dir():
        raise ModelFileError(
            f"{path} is a file, not a saved identrep model: save_model writes a "
            f"folder holding {MANIFEST}, {ARRAYS} and {TENSORS}."
        )
    mpath = path / MANIFEST
    if not (mpath.exists() or mpath.is_symlink()):
        raise ModelFileError(
            f"{path} is not a saved identrep model: it has no {MANIFEST}."
        )
    _check_part(path, MANIFEST)
    if mpath.stat().st_size > _MAX_MANIFEST_BYTES:
        raise ModelFileError(
            f"{mpath} is {mpath.stat().st_size} bytes; a model manifest is at most "
            f"{_MAX_MANIFEST_BYTES} bytes."
        )
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFileError(f"Corrupt model manifest {mpath}: {exc}.") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelFileError(
            f"{mpath} is not an identrep model manifest (format "
            f"{manifest.get('format') if isinstance(manifest, dict) else None!r}, "
            f"expected {FORMAT!r})."
        )
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        saved_by = manifest.get("versions", {}).get("identrep", "?")
        raise ModelFileError(
            f"{path} uses model format version {version!r} (saved by identrep "
            f"{saved_by}); this identrep reads up to version {FORMAT_VERSION}. "
            "Upgrade identrep."
        )
    for key in ("estimator", "files"):
        if not isinstance(manifest.get(key), dict):
            raise ModelFileError(f"Corrupt model manifest {mpath}: no {key!r} entry.")
    return manifest


def load_model(path: str | os.PathLike, *, device: str = "cpu"):
    """Load an estimator saved by :func:`save_model`.

    Only data are read: arrays with ``np.load(..., allow_pickle=False)``, tensors and
    state dicts with ``torch.load(..., weights_only=True)``, and the class from a
    registry of known estimators.

    Parameters
    ----------
    path : path-like
        The folder written by :func:`save_model`.
    device : str, default="cpu"
        Torch device for networks and tensors (and the estimators' ``device_``).

    Returns
    -------
    estimator
        Fitted, with the saved parameters and fitted attributes.

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    ModelFileError
        If the folder is not a saved model, a part is missing or corrupt (checked
        against the SHA-256 sums in the manifest), or the class is unknown.
    """
    import torch

    path = Path(path)
    manifest = read_manifest(path)
    spec = manifest["estimator"]
    try:
        keys = _referenced_keys(spec)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ModelFileError(
            f"Corrupt model manifest {path / MANIFEST}: {exc!r}."
        ) from exc
    for name in (ARRAYS, TENSORS):
        f = _check_part(path, name)
        want = manifest["files"].get(name, {})
        if isinstance(want, dict) and want.get("sha256") not in (None, _sha256(f)):
            raise ModelFileError(
                f"Saved model {path} is corrupt: the checksum of {name} does not "
                "match the manifest (the file was modified or truncated)."
            )
        _check_stored_zip(f)
    dev = torch.device(device)
    try:
        with np.load(path / ARRAYS, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in keys["arrays"] if k in npz.files}
        tensors = torch.load(path / TENSORS, map_location=dev, weights_only=True)
    except ModelFileError:
        raise
    except Exception as exc:  # zip/pickle/format errors of a damaged file
        raise ModelFileError(f"Saved model {path} could not be read: {exc}") from exc
    if not isinstance(tensors, dict):
        raise ModelFileError(f"Saved model {path}: {TENSORS} does not hold a dict.")
    try:
        return _decode_estimator(spec, arrays, tensors, dev)
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ModelFileError(
            f"Corrupt model manifest {path / MANIFEST}: {type(exc).__name__} {exc}."
        ) from exc


def _check_part(folder: Path, name: str) -> Path:
    """``folder/name`` as a regular file inside ``folder``: never a link."""
    f = folder / name
    if f.is_symlink():
        raise ModelFileError(
            f"Saved model {folder}: {name} is a symbolic link; a saved model holds "
            "its parts as plain files and links are not followed."
        )
    if not f.is_file():
        raise ModelFileError(
            f"Saved model {folder} is incomplete: {name} is missing."
            if not f.exists()
            else f"Saved model {folder}: {name} is not a regular file."
        )
    return f


def _check_stored_zip(f: Path) -> None:
    """Refuse a part whose members are compressed or larger than the file: what
    save_model writes is stored uncompressed, so reading it never needs more
    memory than the file's own size (no zip bombs)."""
    import zipfile

    try:
        with zipfile.ZipFile(f) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelFileError(f"Saved model part {f} could not be read: {exc}.") from exc
    size = f.stat().st_size
    total = sum(i.file_size for i in infos)
    packed = [i.filename for i in infos if i.compress_type != zipfile.ZIP_STORED]
    if packed or total > size:
        raise ModelFileError(
            f"Saved model part {f} unpacks to {total} bytes from {size} on disk "
            f"(compressed members: {packed[:3]}); save_model stores parts "
            "uncompressed, so this file was not written by it."
        )
