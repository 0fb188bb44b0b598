"""Random-state helpers: numpy generators, derived seeds, scoped torch seeding."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import numpy as np

from identrep._typing import Seed


def check_random_state(random_state: Seed) -> np.random.Generator:
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    ``None`` gives fresh OS entropy, an int (or SeedSequence) a reproducible
    generator, and a Generator is returned unchanged (shared, not copied).
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(
        random_state, (int, np.integer, np.random.SeedSequence)
    ):
        return np.random.default_rng(random_state)
    raise TypeError(
        "random_state must be None, an int, a numpy SeedSequence or a numpy "
        f"Generator; got {type(random_state).__name__}."
    )


def derive_seed(*parts: object) -> int:
    """A 32-bit seed derived from ``parts`` (ints, strings, ...), stable across runs.

    Used by sweeps so that a run's seed depends on its configuration and seed index
    only, never on the order runs execute in or on the number of workers.
    """
    key = "\x1f".join(repr(p) for p in parts).encode()
    digest = hashlib.sha256(key).digest()
    entropy = int.from_bytes(digest[:16], "little")
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def torch_seed_from(rng: np.random.Generator) -> int:
    """Draw a 63-bit seed for torch from a numpy generator."""
    return int(rng.integers(0, 2**63 - 1))


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG inside the block and restore its state afterwards."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
