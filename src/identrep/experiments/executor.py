"""One executor for every sweep: joblib on local processes or on a Dask cluster.

:func:`make_executor` returns an :class:`Executor` whose ``map_unordered(fn, items)``
yields ``fn(item)`` as the runs finish. Backends:

* ``"loky"`` (default): ``jobs`` local worker processes through joblib; with
  ``jobs=1`` the runs execute in this process, one after the other.
* ``"dask"``: joblib's Dask backend on a ``dask.distributed`` cluster: the one at
  ``scheduler`` (an address such as ``tcp://10.0.0.5:8786``) or, without one, a
  ``LocalCluster`` of ``jobs`` single-threaded worker processes on the loopback
  interface. Needs the optional extra ``identrep[dask]``.

The executor only moves work; what a run computes depends on its item alone (seeds
are derived from the configuration), so results are identical for every backend and
every number of jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["BACKENDS", "Executor", "make_executor"]

BACKENDS = ("loky", "dask")


class Executor:
    """Runs a function over items on a backend; use as a context manager.

    Parameters
    ----------
    backend : {"loky", "dask"}
    jobs : int
        Worker processes (local processes, or LocalCluster workers); ignored for
        a remote Dask scheduler, whose workers decide.
    scheduler : str, optional
        Address of a running Dask scheduler (``backend="dask"`` only).
    """

    def __init__(
        self, backend: str = "loky", jobs: int = 1, scheduler: str | None = None
    ):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}.")
        if not (isinstance(jobs, int) and jobs >= 1):
            raise ValueError(f"jobs must be a positive integer; got {jobs!r}.")
        if scheduler is not None and backend != "dask":
            raise ValueError(
                "scheduler is an address of a Dask scheduler; use "
                "backend='dask' with it."
            )
        self.backend, self.jobs, self.scheduler = backend, jobs, scheduler
        self._client = self._cluster = None

    @property
    def shared_filesystem(self) -> bool:
        """Whether workers see this machine's files (local processes)."""
        return self.scheduler is None

    def __enter__(self) -> Executor:
        if self.backend == "dask":
            try:
                from dask.distributed import Client, LocalCluster
            except ImportError as exc:
                raise ImportError(
                    "backend='dask' needs dask.distributed: "
                    'pip install "identrep[dask]".'
                ) from exc
            if self.scheduler is None:
                self._cluster = LocalCluster(
                    n_workers=self.jobs,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                )
                self._client = Client(self._cluster)
            else:
                self._client = Client(self.scheduler)
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    def describe(self) -> str:
        if self.backend == "dask":
            where = self.scheduler or f"LocalCluster of {self.jobs} worker(s)"
            return f"dask ({where})"
        return f"loky ({self.jobs} process(es))" if self.jobs > 1 else "in-process"

    def map_unordered(self, fn: Callable[[Any], Any], items: Iterable) -> Iterator:
        """Yield ``fn(item)`` for every item, in the order the runs finish."""
        items = list(items)
        if not items:
            return
        if self.backend == "loky" and (self.jobs == 1 or len(items) == 1):
            for item in items:
                yield fn(item)
            return
        from joblib import Parallel, delayed, parallel_config

        if self.backend == "dask":
            if self._client is None:
                raise RuntimeError("Use the dask Executor inside a `with` block.")
            n_jobs = -1 if self.scheduler else self.jobs
            with parallel_config(backend="dask"):
                par = Parallel(n_jobs=n_jobs, return_as="generator_unordered")
                yield from par(delayed(fn)(item) for item in items)
        else:
            par = Parallel(
                n_jobs=self.jobs, backend="loky", return_as="generator_unordered"
            )
            yield from par(delayed(fn)(item) for item in items)


def make_executor(
    backend: str = "loky", jobs: int = 1, scheduler: str | None = None
) -> Executor:
    """An :class:`Executor` (enter it with ``with`` before mapping)."""
    return Executor(backend=backend, jobs=jobs, scheduler=scheduler)
