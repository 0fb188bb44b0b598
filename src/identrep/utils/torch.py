"""Device and dtype resolution for torch-backed estimators (resolved once in fit)."""

from __future__ import annotations

import os
from contextlib import contextmanager

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


@contextmanager
def deterministic(device: torch.device):
    """Deterministic kernels while fitting or predicting on an accelerator.

    On CUDA some sums run in a thread-dependent order (``index_add``, used by the
    EGNN's message passing and the ridge heads' per-task sums, adds with atomics),
    so two fits with the same seed differed in the last bits and then more. Inside
    this context torch picks its deterministic kernels (warning, not failing, for
    an operation that has none) and cuBLAS gets a fixed workspace when this
    process has not used it yet. The CPU path is untouched.
    """
    if torch.device(device).type == "cpu":
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
