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
:func:`identrep.utils.io.atomic_path`) and renamed into place, so a crash at any
moment leaves the previous model or the complete new one, never a partial folder.

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
from collections.abc import Callable
from operator import methodcaller
from pathlib import Path
from typing import Any

import numpy as np

from identrep.exceptions import ModelFileError  # re-exported: it lived here before
from identrep.utils.io import atomic_path, atomic_write_text

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

_JSON_SCALARS = (type(None), bool, int, float, str)
# parameters that do not shape the fitted model and may be saved as None
_DROPPABLE_PARAMS = frozenset({"random_state"})


# ----------------------------------------------------------------------- registry
_ESTIMATORS: dict[str, type] = {}
_BUILDERS: dict[str, dict[str, Callable[[Any], Any]]] = {}


def register_estimator(
    cls: type,
    *,
    name: str | None = None,
    modules: dict[str, Callable[[Any], Any]] | None = None,
) -> type:
    """Make an estimator class saveable with :func:`save_model`.

    Parameters
    ----------
    cls : type
        An estimator with sklearn's ``get_params`` whose constructor accepts those
        parameters as keywords. Fitted attributes (public names ending in ``_``)
        may be numbers, strings, None, JSON-like lists/dicts, numpy arrays and
        scalars, torch tensors, devices and dtypes, other registered estimators,
        and ``nn.Module``s listed in ``modules``.
    name : str, optional
        Name stored in the manifest (default ``cls.__name__``); must be unique.
    modules : dict, optional
        ``{attribute: builder}`` for ``nn.Module`` attributes. ``builder(estimator)``
        receives the estimator with its parameters and every non-module fitted
        attribute already restored, and returns the module with the fitted
        architecture (weights arbitrary); the saved state dict is then loaded into
        it strictly.

    Returns
    -------
    cls, so it can be used as a class decorator.
    """
    key = cls.__name__ if name is None else name
    if key in _ESTIMATORS and _ESTIMATORS[key] is not cls:
        raise ValueError(
            f"An estimator named {key!r} is already registered "
            f"({_ESTIMATORS[key].__module__}.{_ESTIMATORS[key].__qualname__}); "
            "pass name=... to register this one under another name."
        )
    _ESTIMATORS[key] = cls
    _BUILDERS[key] = dict(modules or {})
    return cls


def _registered_name(cls: type) -> str:
    for key, c in _ESTIMATORS.items():
        if c is cls:
            return key
    raise TypeError(
        f"save_model does not know how to save a {cls.__module__}.{cls.__qualname__}; "
        f"saveable classes: {sorted(_ESTIMATORS)}. Register it with "
        "identrep.persistence.register_estimator."
    )


# ----------------------------------------------------------------- JSON helpers
def _param_to_json(v):
    """Hyperparameter -> JSON value; tuples are tagged so they come back as tuples."""
    if isinstance(v, np.generic):
        v = v.item()
    if type(v).__module__ == "torch" and type(v).__name__ in ("device", "dtype"):
        v = str(v).removeprefix("torch.")  # device=torch.device("cuda") -> "cuda"
    if isinstance(v, _JSON_SCALARS):
        return v
    if isinstance(v, tuple):
        return {"__tuple__": [_param_to_json(x) for x in v]}
    if isinstance(v, list):
        return [_param_to_json(x) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {"__dict__": {k: _param_to_json(x) for k, x in v.items()}}
    raise TypeError(type(v).__name__)


def _param_from_json(v):
    if isinstance(v, list):
        return [_param_from_json(x) for x in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_param_from_json(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {k: _param_from_json(x) for k, x in v["__dict__"].items()}
        raise ModelFileError(f"Unexpected JSON object in saved parameters: {v!r}.")
    return v


def _plain_json(v) -> bool:
    """True if ``v`` is made of JSON scalars, lists and str-keyed dicts only."""
    if isinstance(v, _JSON_SCALARS):
        return True
    if isinstance(v, list):
        return all(_plain_json(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain_json(x) for k, x in v.items())
    return False


# ----------------------------------------------------------------------- encoding
def _fitted_attributes(est) -> list[str]:
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


def _encode_estimator(est, prefix: str, arrays: dict, tensors: dict) -> dict:
    import torch

    name = _registered_name(type(est))
    params, dropped = {}, []
    for k, v in est.get_params(deep=False).items():
        try:
            params[k] = _param_to_json(v)
        except TypeError:
            if k not in _DROPPABLE_PARAMS:
                raise TypeError(
                    f"Cannot save {name} with {k}={v!r}: only numbers, strings, None "
                    "and lists/tuples/dicts of them can be saved without pickle (a "
                    "callable would have to be pickled). Use a named option instead."
                ) from None
            # random_state=np.random.Generator only seeds a new fit
            params[k] = None
            dropped.append(k)
    attrs = {}
    for attr in _fitted_attributes(est):
        v = getattr(est, attr)
        key = f"{prefix}{attr}"
        where = f"{name}.{attr}"
        if isinstance(v, torch.nn.Module):
            if attr not in _BUILDERS[name]:
                raise TypeError(
                    f"{where} is an nn.Module but {name} registered no builder for "
                    "it; pass modules={...} to register_estimator."
                )
            sd = {k: t.detach().cpu().clone() for k, t in v.state_dict().items()}
            tensors[key] = sd
            attrs[attr] = {"kind": "module", "key": key}
        elif isinstance(v, torch.Tensor):
            tensors[key] = v.detach().cpu().clone()
            attrs[attr] = {"kind": "tensor", "key": key, "device": str(v.device)}
        elif isinstance(v, torch.device):
            attrs[attr] = {"kind": "torch_device", "value": str(v)}
        elif isinstance(v, torch.dtype):
            attrs[attr] = {"kind": "torch_dtype", "value": str(v).replace("torch.", "")}
        elif isinstance(v, np.ndarray):
            attrs[attr] = _encode_array(v, key, where, arrays)
        elif isinstance(v, np.generic):
            attrs[attr] = {
                "kind": "numpy_scalar",
                "dtype": v.dtype.str,
                "value": v.item(),
            }
        elif type(v) in _ESTIMATORS.values():
            attrs[attr] = {
                "kind": "estimator",
                "value": _encode_estimator(v, f"{key}.", arrays, tensors),
            }
        elif isinstance(v, tuple) and _plain_json(list(v)):
            attrs[attr] = {"kind": "tuple", "value": list(v)}
        elif _plain_json(v):
            attrs[attr] = {"kind": "json", "value": v}
        else:
            raise TypeError(
                f"Cannot save fitted attribute {where} of type {type(v).__name__} "
                "without pickle; supported: numbers, str, None, JSON-like lists and "
                "dicts, numpy arrays/scalars, torch tensors/devices/dtypes, "
                "registered estimators and registered nn.Modules."
            )
    return {
        "class": name,
        "params": params,
        "unsaved_params": dropped,
        "attributes": attrs,
    }


def _encode_array(a: np.ndarray, key: str, where: str, arrays: dict) -> dict:
    if a.dtype.kind in "biufcUS":
        arrays[key] = a
        return {"kind": "array", "key": key}
    if a.dtype == object:
        flat = a.ravel().tolist()
        if all(isinstance(x, str) for x in flat):
            arrays[key] = a.astype(str)
            return {"kind": "array", "key": key, "object": True}
        flat = [x.item() if isinstance(x, np.generic) else x for x in flat]
        if all(isinstance(x, _JSON_SCALARS) for x in flat):
            return {"kind": "object_array", "shape": list(a.shape), "value": flat}
    raise TypeError(
        f"Cannot save fitted attribute {where}: array of dtype {a.dtype} holds "
        "objects other than str, numbers and None."
    )


# ----------------------------------------------------------------------- decoding
def _decode_estimator(spec: dict, arrays, tensors: dict, device) -> Any:
    import torch

    name = spec.get("class")
    if name not in _ESTIMATORS:
        raise ModelFileError(
            f"The saved model is a {name!r}, which this identrep does not know how to "
            f"load; known classes: {sorted(_ESTIMATORS)}. It may need a newer "
            "identrep, or register_estimator(...) for a third-party class."
        )
    cls = _ESTIMATORS[name]
    params = {k: _param_from_json(v) for k, v in spec["params"].items()}
    try:
        est = cls(**params)
    except TypeError as exc:
        raise ModelFileError(
            f"The saved {name} has parameters this identrep's {name} does not accept "
            f"({exc}); it was probably saved by another identrep version."
        ) from exc
    modules = []
    for attr, a in spec["attributes"].items():
        kind = a["kind"]
        if kind == "module":
            modules.append((attr, a))
            continue
        if kind == "array":
            val = _get(arrays, a["key"])
            if a.get("object"):
                val = val.astype(object)
        elif kind == "object_array":
            val = np.empty(len(a["value"]), dtype=object)
            val[:] = a["value"]
            val = val.reshape(a["shape"])
        elif kind == "tensor":
            val = _get(tensors, a["key"]).to(device)
        elif kind == "torch_device":
            val = torch.device(device)
        elif kind == "torch_dtype":
            val = getattr(torch, a["value"], None)
            if not isinstance(val, torch.dtype):
                raise ModelFileError(f"Unknown torch dtype {a['value']!r} in {name}.")
        elif kind == "numpy_scalar":
            val = np.dtype(a["dtype"]).type(a["value"])
        elif kind == "estimator":
            val = _decode_estimator(a["value"], arrays, tensors, device)
        elif kind == "tuple":
            val = tuple(a["value"])
        elif kind == "json":
            val = a["value"]
        else:
            raise ModelFileError(f"Unknown attribute kind {kind!r} in {name}.{attr}.")
        setattr(est, attr, val)
    for attr, a in modules:
        builder = _BUILDERS[name].get(attr)
        if builder is None:
            raise ModelFileError(f"{name} has no registered builder for {attr}.")
        module = builder(est)
        try:
            module.load_state_dict(_get(tensors, a["key"]), strict=True)
        except RuntimeError as exc:
            raise ModelFileError(
                f"The saved weights of {name}.{attr} do not fit the network this "
                f"identrep builds from the saved parameters ({exc})."
            ) from exc
        setattr(est, attr, module.to(device).eval())
    return est


def _get(store, key: str):
    try:
        return store[key]
    except KeyError:
        raise ModelFileError(
            f"The saved model refers to {key!r}, which is missing from its data files."
        ) from None


# --------------------------------------------------------------------- builders
def _register_builtin() -> None:
    from identrep.models import MTLCM, MTRN, TaskIdentifiable

    register_estimator(MTLCM)
    # MTRN builds its own network, with the construction fit uses
    register_estimator(MTRN, modules={"module_": methodcaller("_empty_module")})
    register_estimator(TaskIdentifiable)


_register_builtin()


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
    return path.is_dir() and (path / MANIFEST).is_file()


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
    model : MTLCM, MTRN, TaskIdentifiable or another registered estimator
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
                f"{path} exists and is not a saved identrep model (no {MANIFEST}); "
                "refusing to replace it. Choose another path or remove it."
            )
        if not overwrite:
            raise FileExistsError(f"{path} already holds a saved model.")
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    old = None
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes it private (0700)
        _write_parts(tmp, model, metadata)
        if path.exists():
            old = Path(
                tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=parent)
            )
            os.replace(path, old / "model")
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old / "model", path)  # put the previous model back
                raise
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
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
    if not mpath.is_file():
        raise ModelFileError(
            f"{path} is not a saved identrep model: it has no {MANIFEST}."
        )
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
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
    for name in (ARRAYS, TENSORS):
        f = path / name
        if not f.is_file():
            raise ModelFileError(
                f"Saved model {path} is incomplete: {name} is missing."
            )
        want = manifest["files"].get(name, {}).get("sha256")
        if want is not None and _sha256(f) != want:
            raise ModelFileError(
                f"Saved model {path} is corrupt: the checksum of {name} does not "
                "match the manifest (the file was modified or truncated)."
            )
    dev = torch.device(device)
    try:
        with np.load(path / ARRAYS, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        tensors = torch.load(path / TENSORS, map_location=dev, weights_only=True)
    except ModelFileError:
        raise
    except Exception as exc:  # zip/pickle/format errors of a damaged file
        raise ModelFileError(f"Saved model {path} could not be read: {exc}") from exc
    if not isinstance(tensors, dict):
        raise ModelFileError(f"Saved model {path}: {TENSORS} does not hold a dict.")
    return _decode_estimator(manifest["estimator"], arrays, tensors, dev)
