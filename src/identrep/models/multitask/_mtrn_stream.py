"""MTRN's input kept where it is: rows gathered on demand, moments in a streaming pass.

:class:`~identrep.models.multitask.mtrn.MTRN` used to copy all of ``X`` into a
float64 torch tensor (and ``column_moments`` made two more full float64 copies)
before training. Here ``X`` stays the checked numpy array (possibly a read-only
``np.memmap``): :class:`HostRows` stands in for that tensor in the batch
collation of :mod:`identrep.models.multitask._mtrn_batches` (``Xt[i]`` gathers
only the rows of one minibatch) and computes features for the head refit in
chunks of :data:`STREAM_CHUNK` rows; :func:`streaming_column_moments` computes
the input standardisation in three chunked float64 passes, and
:class:`StreamedRidgeRefit` refits the joint heads of the long layout from
per-task sums accumulated chunk by chunk.

What still grows with the number of observations N (all O(N), none O(N p)): the
targets and task codes of the checked data, the row index of each observation,
the train/validation split, one permutation per epoch, and the features (N x d)
of the final heads (O(N d); the refit streams them for inputs of more than one
chunk, except in the wide layout, whose (rows x tasks) targets and masks are
O(N T) anyway).

For inputs of at most :data:`STREAM_CHUNK` rows every result is bit-identical to
the former full-tensor path (one chunk computes exactly what the full array
did); for longer inputs the moments are summed chunk by chunk (float64 rounding
of order 1e-16 relative) and the refit sums per chunk (float64 rounding of
the per-task normal equations).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from identrep.models.multitask.heads.ridge import (
    _moments_from_sums,
    _sums_long,
    ridge_from_moments,
)
from identrep.utils.numerics import column_moments, safe_scale

__all__ = ["STREAM_CHUNK", "HostRows", "StreamedRidgeRefit", "streaming_column_moments"]

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


class StreamedRidgeRefit:
    """Exact ridge heads of the training observations, features streamed in chunks.

    The long-layout head refit (``post_epoch``) for inputs of more than one chunk:
    the per-task float64 sums of features, targets and their products are
    accumulated chunk of rows by chunk of rows (features of one chunk at a time,
    sums over at most ``sub_size`` observations at a time), so the memory is
    O(chunk_size * width + T d^2) instead of the features and their task-padded
    copies of all N observations. The same normal equations as
    :func:`~identrep.models.multitask.heads.fit_ridge_heads`, summed in another
    order (float64 rounding), shifted by the mean feature of the first chunk.

    Parameters
    ----------
    X : HostRows
    rows, y, task_ids : ndarray of shape (n_obs,)
        Row of ``X``, standardised target and task code of every training
        observation.
    n_tasks : int
    alpha : float
    """

    def __init__(self, X: HostRows, rows, y, task_ids, n_tasks, alpha, sub_size=8192):
        c = X.chunk_size
        order = np.argsort(rows // c, kind="stable")
        self.X, self.n_tasks, self.alpha, self.sub = X, int(n_tasks), alpha, sub_size
        self.rows = rows[order]
        self.y = torch.as_tensor(y[order], dtype=torch.float64)
        self.t = torch.as_tensor(task_ids[order])
        self.bounds = np.searchsorted(self.rows, np.arange(0, X.shape[0] + c, c))

    def __call__(self, module) -> None:
        X, c, dev = self.X, self.X.chunk_size, self.X.device
        shift, total = None, None
        for k, s in enumerate(range(0, X.shape[0], c)):
            a, b = int(self.bounds[k]), int(self.bounds[k + 1])
            if a == b:
                continue
            Fc = module.features(X._to_tensor(np.array(X.X[s : s + c]))).double()
            if shift is None:
                shift = Fc.mean(0)
            local = torch.as_tensor(self.rows[a:b] - s, device=dev)
            for u in range(0, b - a, self.sub):
                sl = slice(u, u + self.sub)
                part = _sums_long(
                    Fc[local[sl]] - shift,
                    self.y[a:b][sl].to(dev),
                    self.t[a:b][sl].to(dev),
                    self.n_tasks,
                    None,
                )
                total = (
                    part
                    if total is None
                    else tuple(p + q for p, q in zip(total, part, strict=True))
                )
        W, bias = ridge_from_moments(_moments_from_sums(*total, shift), self.alpha)
        heads = module.heads
        heads.weight.copy_(W.to(heads.weight.dtype))
        heads.bias.copy_(bias.to(heads.bias.dtype))
