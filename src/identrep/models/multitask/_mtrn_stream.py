"""MTRN's input kept where it is: rows gathered on demand, moments in a streaming pass.

:class:`~identrep.models.multitask.mtrn.MTRN` used to copy all of ``X`` into a
float64 torch tensor (and ``column_moments`` made two more full float64 copies)
before training. Here ``X`` stays the checked numpy array (possibly a read-only
``np.memmap``): :class:`HostRows` stands in for that tensor in the batch
collation of :mod:`identrep.models.multitask._mtrn_batches` (``Xt[i]`` gathers
only the rows of one minibatch) and computes features for the head refit in
chunks of :data:`STREAM_CHUNK` rows; :func:`streaming_column_moments` computes
the input standardisation in three chunked float64 passes.

What still grows with the number of observations N (all O(N), none O(N p)): the
targets and task codes of the checked data, the row index of each observation,
the train/validation split, one permutation per epoch, and the features (N x d)
of the head refit and of the final heads.

For inputs of at most :data:`STREAM_CHUNK` rows every result is bit-identical to
the former full-tensor path (one chunk computes exactly what the full array
did); for longer inputs the moments are summed chunk by chunk (float64 rounding
of order 1e-16 relative) and the refit's features are computed per chunk.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from identrep.utils.numerics import column_moments, safe_scale

__all__ = ["STREAM_CHUNK", "HostRows", "streaming_column_moments"]

STREAM_CHUNK = 65536  # rows per streamed chunk (8 MiB at 16 float64 features)


class HostRows:
    """Rows of a host numpy array, indexed by torch index tensors like a tensor.

    ``rows[i]`` (``i`` an integer tensor on any device) returns those rows of
    ``X`` as a new tensor of ``dtype`` on ``device``: only the batch is copied.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Read-only and memory-mapped arrays are fine (never written).
    dtype : torch.dtype
    device : torch.device or str
    chunk_size : int, default=STREAM_CHUNK
        Rows per forward pass in :meth:`features`.
    """

    def __init__(self, X: np.ndarray, dtype: torch.dtype, device, *, chunk_size=None):
        self.X = X
        self.dtype = dtype
        self.device = torch.device(device)
        self.shape = X.shape
        self.chunk_size = int(chunk_size or STREAM_CHUNK)

    def _to_tensor(self, rows: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(rows)).to(
            device=self.device, dtype=self.dtype
        )

    def __getitem__(self, index) -> Tensor:
        if isinstance(index, Tensor):
            index = index.cpu().numpy()
        # np.take copies just the selected rows (also from a memmap)
        return self._to_tensor(np.asarray(np.take(self.X, index, axis=0)))

    def __len__(self) -> int:
        return self.shape[0]

    def features(self, module) -> Tensor:
        """``module.features`` of every row, ``chunk_size`` rows per forward pass
        (the activations of one chunk at a time), concatenated."""
        n, c = self.shape[0], self.chunk_size
        parts = [
            module.features(self._to_tensor(np.array(self.X[s : s + c])))
            for s in range(0, n, c)
        ]
        return parts[0] if len(parts) == 1 else torch.cat(parts)


def streaming_column_moments(
    X: np.ndarray, chunk_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~identrep.utils.numerics.column_moments` in chunked float64 passes.

    Three passes over ``X`` (largest magnitude, mean, centred second moment), each
    holding one chunk of ``chunk_size`` rows at a time, so the memory is
    O(chunk_size * n_features) whatever the number of rows. With at most one
    chunk the result is that of ``column_moments`` exactly.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    chunk_size : int, optional
        Rows per chunk (default :data:`STREAM_CHUNK`).

    Returns
    -------
    mean, scale : ndarray of shape (n_features,)
    """
    c = int(chunk_size or STREAM_CHUNK)
    n, p = X.shape
    if n <= c:
        return column_moments(X)
    chunks = [slice(s, s + c) for s in range(0, n, c)]
    amax = np.zeros(p)
    for s in chunks:
        np.maximum(amax, np.abs(np.asarray(X[s], dtype=float)).max(axis=0), out=amax)
    unit = np.where(amax > 0, amax, 1.0)  # as in column_moments
    total = np.zeros(p)
    for s in chunks:
        total += (np.asarray(X[s], dtype=float) / unit).sum(axis=0)
    mean_u = total / n
    sq = np.zeros(p)
    for s in chunks:
        sq += ((np.asarray(X[s], dtype=float) / unit - mean_u) ** 2).sum(axis=0)
    sd_u = np.sqrt(sq / n)
    return mean_u * unit, safe_scale(sd_u, mean_u) * unit
