"""The optimisers of :func:`identrep.training.fit_module`, built for the device."""

from __future__ import annotations

import torch

__all__ = ["OPTIMIZERS", "make_optimizer"]

#: The optimisers ``fit_module`` accepts, by name.
OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}


def make_optimizer(
    name: str,
    params: list,
    lr: float,
    weight_decay: float = 0.0,
    *,
    capturable: bool = False,
) -> torch.optim.Optimizer:
    """The optimiser ``name`` over ``params``; on CPU in its multi-tensor
    (``foreach``) implementation.

    On CPU torch otherwise runs the per-parameter Python loop. The foreach form
    applies the same element-wise operations to every parameter (the same kernels
    in the same order per tensor, so the same steps to the bit) in a few calls,
    which saves the per-parameter overhead of small models (tests:
    ``tests/unit/training/test_optim.py``; timing:
    ``benchmarks/bench_vae_step.py``). On other devices torch's own default
    (already foreach on CUDA) is kept.

    Parameters
    ----------
    name : {"adam", "adamw", "sgd"}
    params : list of Parameter
    lr, weight_decay : float
    capturable : bool, default=False
        Adam or AdamW for replayed CUDA graphs (:mod:`identrep.training._graphs`):
        ``capturable``, multi-tensor, the learning rate a tensor on the
        parameters' device (set it with ``fill_``).

    Returns
    -------
    torch.optim.Optimizer
    """
    extra: dict = {}
    if capturable:
        lr = torch.tensor(float(lr), device=params[0].device)
        extra.update(capturable=True, foreach=True)
    elif params and all(p.device.type == "cpu" for p in params):
        extra["foreach"] = True
    return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay, **extra)
