"""Shared fixtures (STYLE.md rule 11).

``seed``
    The random seed(s) a test runs with. Set ``IDENTREP_TEST_SEEDS`` to run every test
    that requests ``seed`` (directly or through another fixture such as ``rng``) once
    per seed: ``"3"`` (one seed), ``"0-9"`` (an inclusive range), ``"0,4,7"`` (a list)
    or a mix such as ``"0-2,7"``. The default is ``"0"``. Tests must pass for any seed,
    as in scikit-learn's ``SKLEARN_TESTS_GLOBAL_RANDOM_SEED``.
``rng``
    ``numpy.random.default_rng(seed)``.
``dtype``, ``device``
    torch float32/float64 and cpu (+ cuda when available) grids, BoTorch-style.

Tests marked ``gpu`` are skipped when CUDA is not available.

Threads: unless already set, ``OMP_NUM_THREADS``/``MKL_NUM_THREADS``/
``OPENBLAS_NUM_THREADS`` default to 1 for the test session. The MTLCM likelihood runs
many tiny batched factorisations; with OpenMP threads on a small, shared machine each
one pays thread wake-up (and busy-wait under oversubscription) costs, which made a
tiny fit 10-40x slower. Export the variables to test with more threads.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy/torch load their thread pools

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SEEDS_ENV = "IDENTREP_TEST_SEEDS"


def parse_seeds(spec: str) -> list[int]:
    """Parse ``"3"``, ``"0-9"``, ``"0,4,7"`` or ``"0-2,7"`` into a list of seeds."""
    seeds: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise pytest.UsageError(
                f"{SEEDS_ENV} must look like '3', '0-9' or '0,4,7'; got {spec!r}."
            ) from None
        if first < 0 or last < first:
            raise pytest.UsageError(
                f"{SEEDS_ENV}: range {part!r} must be 'low-high' with 0 <= low <= high."
            )
        seeds.extend(s for s in range(first, last + 1) if s not in seeds)
    if not seeds:
        raise pytest.UsageError(f"{SEEDS_ENV} names no seed; got {spec!r}.")
    return seeds


def _test_seeds() -> list[int]:
    return parse_seeds(os.environ.get(SEEDS_ENV, "0"))


def _explicitly_parametrized(metafunc, name: str) -> bool:
    for marker in metafunc.definition.iter_markers("parametrize"):
        argnames = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        if name in argnames:
            return True
    return False


def pytest_generate_tests(metafunc):
    # Parametrise ``seed`` wherever it is needed, also indirectly (e.g. via ``rng``),
    # unless the test parametrises it itself.
    if "seed" in metafunc.fixturenames and not _explicitly_parametrized(
        metafunc, "seed"
    ):
        seeds = _test_seeds()
        metafunc.parametrize(
            "seed", seeds, indirect=True, ids=[f"seed{s}" for s in seeds]
        )


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def seed(request) -> int:
    """Random seed; parametrised from ``IDENTREP_TEST_SEEDS`` (default ``"0"``).

    Session-scoped so that module-scoped fixtures (e.g. one fitted model shared by
    several tests) can depend on it.
    """
    return getattr(request, "param", 0)


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A fresh numpy generator seeded with ``seed``."""
    return np.random.default_rng(seed)


@pytest.fixture
def unsorted_csr():
    """Builds ``X`` as float32 CSR whose column indices run backwards within each
    row (valid CSR, ``has_sorted_indices`` False), as some loaders build them."""
    import scipy.sparse as sp

    def build(X):
        A = sp.csr_matrix(X, dtype=np.float32)
        for i in range(A.shape[0]):
            s, e = A.indptr[i], A.indptr[i + 1]
            A.indices[s:e] = A.indices[s:e][::-1].copy()
            A.data[s:e] = A.data[s:e][::-1].copy()
        A.has_sorted_indices = False
        return A

    return build


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """torch float32 and float64."""
    import torch

    return getattr(torch, request.param)


def _devices() -> list:
    devices = ["cpu"]
    try:
        import torch

        if torch.cuda.is_available():
            devices.append(pytest.param("cuda", marks=pytest.mark.gpu))
    except ImportError:  # pragma: no cover
        pass
    return devices


@pytest.fixture(params=_devices())
def device(request):
    """torch devices: cpu, plus cuda when available."""
    import torch

    return torch.device(request.param)
