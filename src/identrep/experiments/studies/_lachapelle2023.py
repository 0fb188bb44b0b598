"""Pieces shared by the Lachapelle et al. (2023) studies. Not a study itself (no
``register_study`` here)."""

from __future__ import annotations

import numpy as np

__all__ = ["check_fields", "seed_list"]


def check_fields(config, ints: tuple[str, ...], pcts: tuple[str, ...]) -> None:
    for name in ints:
        v = getattr(config, name)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer; got {v!r}.")
    for name in pcts:
        v = getattr(config, name)
        if not isinstance(v, (int, np.integer)) or not 0 <= v <= 100:
            raise ValueError(f"{name} must be an integer percentage; got {v!r}.")


def seed_list(seeds) -> list[int]:
    out = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not out or len(set(out)) != len(out) or min(out) < 0:
        raise ValueError(
            f"seeds must be a positive int or distinct ints; got {seeds!r}."
        )
    return out
