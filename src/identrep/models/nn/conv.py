"""Convolutional encoder of flat image rows (the encoder of Lachapelle et al., 2023)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

__all__ = ["ConvEncoder"]


class ConvEncoder(nn.Module):
    """Four strided convolutions and a two-layer head, on flattened images.

    The architecture of the authors' 3D Shapes encoder::

        conv 32 (k4, s2) -> ReLU -> conv 32 (k4, s2) -> ReLU
        -> conv 64 (k2, s2) -> ReLU -> conv 64 (k2, s2) -> ReLU
        -> flatten -> Linear 256 -> ReLU -> Linear n_latents

    The 4x4 convolutions are padded by 1 ("same" padding as in their haiku
    code), so a 64 x 64 image becomes 32, 16, 8 and 4 pixels a side (1024
    features before the head). Rows of ``X`` are images flattened in
    (height, width, channels) C order, as :func:`~identrep.datasets.
    make_shapes_tasks` writes them, so the encoder plugs into
    :class:`~identrep.MTRN` as ``extractor=lambda p, d: ConvEncoder(d)``.
    PyTorch's default initialisation; seed it with
    :func:`identrep.utils.seeding.seeded`.

    Parameters
    ----------
    n_latents : int
        Output dimension d.
    image_shape : (int, int, int), default=(64, 64, 3)
        (height, width, channels) of one image; height and width must be
        multiples of 16.
    channels : sequence of 4 int, default=(32, 32, 64, 64)
    hidden : int, default=256
        Width of the hidden linear layer.

    Examples
    --------
    >>> import torch
    >>> net = ConvEncoder(6)
    >>> net(torch.zeros(2, 64 * 64 * 3)).shape
    torch.Size([2, 6])
    """

    def __init__(
        self,
        n_latents: int,
        image_shape: Sequence[int] = (64, 64, 3),
        channels: Sequence[int] = (32, 32, 64, 64),
        hidden: int = 256,
    ):
        super().__init__()
        h, w, c = (int(v) for v in image_shape)
        if len(tuple(image_shape)) != 3 or h % 16 or w % 16 or h < 16 or w < 16:
            raise ValueError(
                "image_shape must be (height, width, channels) with height and width "
                f"positive multiples of 16; got {tuple(image_shape)}."
            )
        chans = [int(v) for v in channels]
        if len(chans) != 4 or min(chans) < 1 or int(n_latents) < 1 or int(hidden) < 1:
            raise ValueError(
                "channels must be 4 positive ints and n_latents, hidden positive; got "
                f"channels={tuple(channels)}, n_latents={n_latents}, hidden={hidden}."
            )
        self.image_shape = (h, w, c)
        self.in_features, self.out_features = h * w * c, int(n_latents)
        self.convs = nn.Sequential(
            nn.Conv2d(c, chans[0], kernel_size=4, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(chans[0], chans[1], kernel_size=4, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(chans[1], chans[2], kernel_size=2, stride=2),
            nn.ReLU(),
            nn.Conv2d(chans[2], chans[3], kernel_size=2, stride=2),
            nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(chans[3] * (h // 16) * (w // 16), int(hidden)),
            nn.ReLU(),
            nn.Linear(int(hidden), int(n_latents)),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Features of shape (batch, n_latents) for ``x`` of shape
        (batch, height * width * channels) (or (batch, height, width, channels))."""
        h, w, c = self.image_shape
        if x.shape[-1] != self.in_features and tuple(x.shape[1:]) != (h, w, c):
            raise ValueError(
                f"ConvEncoder expects rows of {self.in_features} = {h}x{w}x{c} "
                f"values; got input of shape {tuple(x.shape)}."
            )
        img = x.reshape(x.shape[0], h, w, c).permute(0, 3, 1, 2)
        return self.head(self.convs(img))
