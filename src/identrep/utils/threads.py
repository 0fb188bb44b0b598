"""Thread counts inside fits: small batched linear algebra runs on one thread.

MTLCM's likelihood is many tiny batched factorisations (T Cholesky factorisations of
p x p matrices per evaluation), and the networks train on small batches. With the
default thread pools every such call pays thread wake-up and, on a shared machine,
busy-waiting: on a 2-core machine the MTLCM demo fit ran 4.5x slower in wall time with
the default threads than with one (``benchmarks/bench_threads.py``). So a fit runs
those parts inside :func:`fit_threads`, which sets torch's intra-op threads and the
BLAS/OpenMP pools (threadpoolctl) for the duration of the fit and restores them
afterwards: no global side effect.

A thread count the user chose is respected: when ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS`` or ``IDENTREP_NUM_THREADS`` is set in the environment, or when
``torch.set_num_threads`` was called after identrep was imported, fits leave the
thread pools alone (``IDENTREP_NUM_THREADS=N`` asks fits to use N threads).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

__all__ = ["SMALL_WORK", "fit_threads"]

#: Multiply-adds per training batch under which fits use one thread. A chosen
#: bound, not a calibrated one: it puts the small networks of the demos, tests and
#: paper tables (a 100 x 200 layer on a batch of 1,000 rows is 2e7) on one thread and
#: leaves larger work to the default pools; only the MTLCM fit was measured
#: (benchmarks/bench_threads.py).
SMALL_WORK = 5e7

_USER_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_TORCH_AT_IMPORT = torch.get_num_threads()


def _wanted() -> tuple[int | None, bool]:
    """``(count, explicit)``: ``IDENTREP_NUM_THREADS`` as asked (explicit), None
    when the user chose their own threads (environment or ``torch.set_num_threads``
    after import), else 1."""
    wanted = os.environ.get("IDENTREP_NUM_THREADS", "").strip()
    if wanted:
        try:
            return max(1, int(wanted)), True
        except ValueError:
            raise ValueError(
                f"IDENTREP_NUM_THREADS must be a positive integer; got {wanted!r}."
            ) from None
    if any(os.environ.get(v) for v in _USER_ENV):
        return None, False
    if torch.get_num_threads() != _TORCH_AT_IMPORT:  # set_num_threads after import
        return None, False
    return 1, False


@contextlib.contextmanager
def fit_threads(work: float = 0.0) -> Iterator[int]:
    """Run the body on one thread when its calls are small (under
    :data:`SMALL_WORK` multiply-adds each), on ``IDENTREP_NUM_THREADS`` threads
    when that is set, and untouched when the user chose their own threads or the
    calls are large; everything is restored on exit. Yields torch's thread count
    inside."""
    from threadpoolctl import threadpool_limits

    n, explicit = _wanted()
    if n is None or (work >= SMALL_WORK and not explicit):
        yield torch.get_num_threads()
        return
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        with threadpool_limits(limits=n):
            yield n
    finally:
        torch.set_num_threads(before)
