"""What the Moran et al. (2022) probes share: the validation carving of a table's
training rows (``moran2022_prior_weight_sweep.py``, ``moran2022_oivae_probe.py``)."""

from __future__ import annotations

import numpy as np

from identrep.utils.seeding import derive_seed

VAL_FRACTION = 0.2


def validation_rows(n: int, cfg) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows) of ``n`` training rows: a seeded fifth held out,
    the same for every probe of one table and split."""
    rng = np.random.default_rng(derive_seed("validation", cfg.table, cfg.seed))
    perm = rng.permutation(n)
    n_val = int(round(VAL_FRACTION * n))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])
