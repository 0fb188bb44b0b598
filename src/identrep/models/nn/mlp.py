"""Neural-network building blocks (``nn.Module``s); ``forward`` never returns losses."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "MLP", "MultiTaskNet", "Standardize"]

#: Hidden activations of :class:`MLP` by name.
ACTIVATIONS = {
    "relu": nn.ReLU,
    "leaky_relu": nn.LeakyReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
}
_ACTIVATIONS = ACTIVATIONS  # the former private name


class MLP(nn.Module):
    """Fully connected network: (Linear -> activation) per hidden layer, then Linear.

    The output layer has no activation, so the output is an unconstrained feature
    vector (the representation h(x) of a multi-task regression network). Layers use
    PyTorch's default initialisation; seed it with
    :func:`identrep.utils.seeding.seeded`.

    Parameters
    ----------
    in_features : int
        Input dimension p.
    hidden_sizes : sequence of int
        Widths of the hidden layers; empty for a linear map.
    out_features : int
        Output dimension d.
    activation : {"relu", "leaky_relu", "elu", "gelu", "silu", "tanh"}, default="relu"

    Examples
    --------
    >>> import torch
    >>> net = MLP(10, [32], 3)
    >>> net(torch.zeros(5, 10)).shape
    torch.Size([5, 3])
    """

    def __init__(
        self,
        in_features: int,
        hidden_sizes: Sequence[int],
        out_features: int,
        activation: str = "relu",
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}."
            )
        sizes = [int(in_features), *(int(h) for h in hidden_sizes), int(out_features)]
        if any(s < 1 for s in sizes):
            raise ValueError(
                "in_features, hidden_sizes and out_features must be positive; got "
                f"{sizes}."
            )
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(ACTIVATIONS[activation]())
        self.layers = nn.Sequential(*layers)
        self.in_features, self.out_features = sizes[0], sizes[-1]

    def forward(self, x: Tensor) -> Tensor:
        """Features of shape (batch, out_features) for ``x`` of shape (batch, in)."""
        return self.layers(x)


class Standardize(nn.Module):
    """Fixed affine map ``(x - mean) / scale`` computed in float64 (buffers, not
    trained).

    The statistics stay float64 whatever dtype the module is moved to, and the map
    is evaluated in float64 before the result is cast to the module's dtype, so an
    input fed as float64 keeps its signal however large its offset or units are
    (a float32 cast first would erase the signal under an offset of 1e8 and
    overflow beyond 3.4e38). The output dtype follows ``.to(dtype)`` as for any
    module (float32 by default); it is clipped to +-sqrt of that dtype's largest
    value (1.8e19 standard deviations in float32), so an input far outside the
    training range gives large but finite network outputs, never inf or NaN.

    Parameters
    ----------
    mean : Tensor of shape (n_features,)
    scale : Tensor of shape (n_features,), positive

    Examples
    --------
    >>> import torch
    >>> s = Standardize(torch.tensor([1e8]), torch.tensor([2.0]))
    >>> s(torch.tensor([[1e8 + 2.0]], dtype=torch.float64))
    tensor([[1.]])
    """

    _STATS = ("mean", "scale")

    def __init__(self, mean: Tensor, scale: Tensor):
        super().__init__()
        for name, value in zip(self._STATS, (mean, scale), strict=True):
            stat = torch.as_tensor(value).detach().clone().to(torch.float64)
            self.register_buffer(name, stat)
        # follows .to(dtype): the dtype of the output
        self.register_buffer("_out", torch.zeros(0), persistent=False)

    def _apply(self, fn, recurse=True):
        stats = {k: self._buffers[k] for k in self._STATS}
        super()._apply(fn, recurse)
        device = self._buffers["_out"].device
        for k, v in stats.items():  # moved, never cast
            self._buffers[k] = v.to(device=device)
        return self

    @property
    def out_dtype(self) -> torch.dtype:
        """The dtype of the output (the module's dtype)."""
        return self._out.dtype

    def forward(self, x: Tensor) -> Tensor:
        """Standardised input of the same shape as ``x``, in :attr:`out_dtype`."""
        z = (x.to(torch.float64) - self.mean) / self.scale
        bound = torch.finfo(self._out.dtype).max ** 0.5
        return z.clamp(-bound, bound).to(self._out.dtype)


class MultiTaskNet(nn.Module):
    """Shared feature extractor plus optional learnable task heads.

    ``forward(x)`` returns the shared features h(x) of shape (batch, n_features); the
    heads (e.g. :class:`~identrep.models.multitask.heads.JointHeads`) are applied by
    the loss or by the estimator, and are ``None`` when they are solved in closed
    form (ridge).

    Parameters
    ----------
    extractor : nn.Module
        Maps (batch, n_inputs) to (batch, n_features).
    heads : nn.Module or None
        Task heads with learnable parameters, or None.
    """

    def __init__(self, extractor: nn.Module, heads: nn.Module | None = None):
        super().__init__()
        self.extractor = extractor
        self.heads = heads

    def forward(self, x: Tensor) -> Tensor:
        """Shared features of shape (batch, n_features)."""
        return self.extractor(x)

    @torch.no_grad()
    def features(self, x: Tensor, chunk_size: int = 4096) -> Tensor:
        """Features of a large input, computed in chunks without gradients.

        Chunks of a few thousand rows keep the hidden activations in cache
        (measurements: docs/notes.md, "Chunked feature extraction").
        """
        return torch.cat([self.extractor(c) for c in x.split(chunk_size)])
