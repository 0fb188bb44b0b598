"""MTRN's custom feature extractors: the named ones and the check of a callable's
output (:func:`build_extractor`, used by ``MTRN._build_module``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["EXTRACTORS", "build_extractor"]


def _egnn_factory():
    from identrep.models.nn.egnn import EGNNExtractor

    return EGNNExtractor.for_flat_input


#: named extractors: name -> () -> callable(n_features, n_latents) -> nn.Module
EXTRACTORS = {"egnn": _egnn_factory}


def build_extractor(make, p: int, d: int, dtype, probe) -> nn.Module:
    """The extractor ``make(p, d)`` (``make`` a callable or a name in
    :data:`EXTRACTORS`), in ``dtype`` and eval mode, checked on the ``probe`` rows
    of X (on the CPU) when given."""
    if isinstance(make, str):
        make = EXTRACTORS[make]()
    module = make(p, d)
    if not isinstance(module, nn.Module):
        raise TypeError(
            "extractor(n_features, n_latents) must return a torch.nn.Module; got "
            f"{type(module).__name__}."
        )
    module = module.to(dtype=dtype).eval()
    if probe is None:
        return module
    with torch.no_grad():
        out = module(torch.tensor(probe, dtype=dtype))  # a copy: X may be read-only
    if tuple(out.shape) != (probe.shape[0], d):
        raise ValueError(
            f"The extractor must map (batch, {p}) to (batch, n_latents={d}); on "
            f"{probe.shape[0]} rows it returned shape {tuple(out.shape)}."
        )
    return module
