"""Encoding and decoding an estimator as JSON plus named arrays and tensors.

The registry of known estimator classes (:func:`register_estimator`) and their
module builders, the JSON form of hyperparameters and fitted attributes, and the
walk of a saved spec. File handling is in :mod:`identrep.persistence`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import methodcaller
from typing import Any

import numpy as np

from identrep.exceptions import ModelFileError

_JSON_SCALARS = (type(None), bool, int, float, str)
_MAX_NESTING = 8  # estimators inside estimators (the pipeline holds two)
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
    from identrep.models import MTLCM, MTRN, BilevelSparseMTL, TaskIdentifiable

    register_estimator(MTLCM)
    # MTRN builds its own network, with the construction fit uses
    register_estimator(MTRN, modules={"module_": methodcaller("_empty_module")})
    # as MTRN; its _empty_module also rebuilds multinomial heads
    register_estimator(
        BilevelSparseMTL, modules={"module_": methodcaller("_empty_module")}
    )
    register_estimator(TaskIdentifiable)


_register_builtin()


def _referenced_keys(spec: dict, depth: int = 0) -> dict[str, set]:
    """The array and tensor keys the manifest's estimator spec refers to."""
    if depth > _MAX_NESTING:
        raise ModelFileError(
            f"The model manifest nests estimators more than {_MAX_NESTING} deep."
        )
    out: dict[str, set] = {"arrays": set(), "tensors": set()}
    for a in spec["attributes"].values():
        kind = a["kind"]
        if kind == "array":
            out["arrays"].add(str(a["key"]))
        elif kind in ("tensor", "module"):
            out["tensors"].add(str(a["key"]))
        elif kind == "estimator":
            inner = _referenced_keys(a["value"], depth + 1)
            out["arrays"] |= inner["arrays"]
            out["tensors"] |= inner["tensors"]
    return out
