"""Type aliases shared across identrep."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

Seed = int | np.integer | np.random.Generator | np.random.SeedSequence | None

__all__ = ["ArrayLike", "Seed"]
