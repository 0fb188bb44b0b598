"""Device and dtype resolution for torch-backed estimators (resolved once in fit)."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None``/"auto": CUDA when available, else CPU; otherwise ``torch.device``."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available.")
    return dev


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Map "float32"/"float64" (or a torch dtype) to a torch floating dtype."""
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        out = {"float32": torch.float32, "float64": torch.float64}.get(str(dtype))
        if out is None:
            raise ValueError(f"dtype must be 'float32' or 'float64'; got {dtype!r}.")
    if not out.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype; got {out}.")
    return out


def to_numpy(t: torch.Tensor):
    """Leave torch at the boundary."""
    return t.detach().cpu().numpy()
