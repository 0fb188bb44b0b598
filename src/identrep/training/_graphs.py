"""Training steps replayed as CUDA graphs, for small models whose GPU step is bound
by the host.

An EGNN-MTRN step on QM9 (batches of 128) launches hundreds of small kernels; on an
H100 the host needs several times the GPU's time to launch them (docs/notes.md,
stop 31). Inside :func:`cuda_graphs`, :func:`~identrep.training.fit_module` records
the whole step (loss, backward, gradient clipping, optimiser step) once as a CUDA
graph and then replays it for every batch of the same shapes: the host launches
one graph instead of every kernel. Batches of other shapes (the last, smaller batch
of an epoch) run the ordinary step.

The optimiser is then built ``capturable`` with a learning rate held in a device
tensor (what a replayed step can read); its arithmetic differs from the default
optimiser in the last bits, so a run is reproducible within its mode, not across
modes. ``cuda_graphs(capture=False)`` is that optimiser without graphs, the
reference a replayed run equals (tests/unit/training/test_graphs.py, on CUDA).
On a CPU module the context changes nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["GraphedStep", "cuda_graphs", "graph_mode"]

_MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "identrep_cuda_graphs", default=None
)
_GRAPHABLE = ("adam", "adamw")


@contextmanager
def cuda_graphs(enabled: bool = True, *, capture: bool = True) -> Iterator[None]:
    """Train CUDA modules with replayed step graphs inside this context.

    Parameters
    ----------
    enabled : bool, default=True
        False: the ordinary step (for nesting).
    capture : bool, default=True
        False: the capturable optimiser without graphs (the reference a replayed
        run equals to the bit; for tests and benchmarks).
    """
    token = _MODE.set(("replay" if capture else "eager") if enabled else None)
    try:
        yield
    finally:
        _MODE.reset(token)


def graph_mode(params: list[nn.Parameter], optimizer: str) -> str | None:
    """``"replay"``, ``"eager"`` or None (the ordinary step) for these parameters.

    Raises
    ------
    ValueError
        Inside :func:`cuda_graphs`, for CUDA parameters and an optimiser whose state
        a replayed step cannot restart (only Adam and AdamW are supported).
    """
    mode = _MODE.get()
    if mode is None or not params or not all(p.is_cuda for p in params):
        return None
    if optimizer not in _GRAPHABLE:
        raise ValueError(
            f"cuda_graphs supports the optimizers {list(_GRAPHABLE)}; got "
            f"{optimizer!r}. Leave the cuda_graphs context for this fit."
        )
    return mode


_CONSTANTS = (type(None), bool, int, float, str)


def _flatten(batch: Any) -> tuple[list, Callable[[list], Any]]:
    """Leaves of a batch (tensors and constants) and the function rebuilding it.

    Raises
    ------
    TypeError
        For a leaf that is neither a tensor nor a constant (None, bool, int, float,
        str): a replayed step would keep reading the first batch's copy of it.
    """
    if isinstance(batch, dict):
        keys = list(batch)
        leaves, rebuild = _flatten([batch[k] for k in keys])
        return leaves, lambda values: dict(zip(keys, rebuild(values), strict=True))
    if isinstance(batch, tuple | list):
        parts = [_flatten(b) for b in batch]
        sizes = [len(leaves) for leaves, _ in parts]

        def build(leaves: list) -> Any:
            out, at = [], 0
            for (_, rebuild), n in zip(parts, sizes, strict=True):
                out.append(rebuild(leaves[at : at + n]))
                at += n
            if hasattr(batch, "_fields"):  # NamedTuple
                return type(batch)(*out)
            return type(batch)(out)

        return [leaf for leaves, _ in parts for leaf in leaves], build
    if not isinstance(batch, (Tensor, *_CONSTANTS)):
        raise TypeError(
            "cuda_graphs replays batches made of tensors, tuples, lists, dicts and "
            f"constants (None, bool, int, float, str); got a {type(batch).__name__}. "
            "Train without cuda_graphs, or make the batch of tensors."
        )
    return [batch], lambda leaves: leaves[0]


def _signature(leaves: list) -> tuple:
    return tuple(
        (tuple(x.shape), x.dtype, x.device) if isinstance(x, Tensor) else ("const", x)
        for x in leaves
    )


class GraphedStep:
    """One training step recorded as a CUDA graph and replayed for every batch of
    the same structure.

    Parameters
    ----------
    step : callable
        ``step(batch) -> (loss, weight)`` tensors: the loss and backward pass, the
        clipping and the optimiser step, everything but ``zero_grad``.
    params : list of Parameter
    optimizer : torch.optim.Optimizer
        Built ``capturable`` (Adam or AdamW).
    warmup : int, default=3
        Steps run on a side stream before the capture (CUDA's lazy initialisation
        must not happen inside it); the parameters and the optimiser state are put
        back afterwards, so they change nothing.
    """

    def __init__(
        self,
        step: Callable[[Any], tuple[Tensor, Tensor]],
        params: list[nn.Parameter],
        optimizer: torch.optim.Optimizer,
        *,
        warmup: int = 3,
    ):
        self.step, self.params, self.opt = step, params, optimizer
        self.warmup = int(warmup)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.signature: tuple | None = None
        self.static: list = []
        self.out: tuple[Tensor, Tensor] | None = None

    def __call__(self, batch: Any) -> tuple[Tensor, Tensor] | None:
        """Run the step on ``batch`` by replay; None when its structure differs
        from the recorded one (run the ordinary step then)."""
        leaves, build = _flatten(batch)
        sig = _signature(leaves)
        if self.graph is None:
            self._capture(leaves, build, sig)
        elif sig != self.signature:
            return None
        for dst, src in zip(self.static, leaves, strict=True):
            if isinstance(dst, Tensor):
                dst.copy_(src)
        self.graph.replay()
        return self.out

    def _capture(self, leaves: list, build: Callable, sig: tuple) -> None:
        self.signature = sig
        self.static = [x.clone() if isinstance(x, Tensor) else x for x in leaves]
        batch = build(self.static)
        opt = self.opt
        saved = [p.detach().clone() for p in self.params]
        state = {
            p: {k: v.clone() for k, v in opt.state[p].items() if isinstance(v, Tensor)}
            for p in self.params
            if p in opt.state
        }
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                opt.zero_grad(set_to_none=True)
                self.step(batch)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():  # undo the warm-up steps
            for p, v in zip(self.params, saved, strict=True):
                p.copy_(v)
            for p in self.params:
                for k, v in opt.state[p].items():
                    if not isinstance(v, Tensor):
                        continue
                    if p in state:
                        v.copy_(state[p][k])
                    else:  # a fresh Adam state is all zeros, step 0
                        v.zero_()
        opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out = self.step(batch)
        self.graph = graph
