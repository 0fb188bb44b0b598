"""Shared helpers: input validation, seeding, torch device/dtype resolution."""

from identrep.utils.seeding import check_random_state, derive_seed, seeded
from identrep.utils.validation import (
    check_array,
    check_multitask,
    check_task_ids,
    long_to_wide,
    wide_to_long,
)

__all__ = [
    "check_array",
    "check_multitask",
    "check_random_state",
    "check_task_ids",
    "derive_seed",
    "long_to_wide",
    "seeded",
    "wide_to_long",
]
