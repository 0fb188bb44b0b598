"""What the Moran et al. (2022) probes share: the validation carving of a table's
training rows (``moran2022_prior_weight_sweep.py``, ``moran2022_oivae_probe.py``,
``moran2022_vsc_probe.py``), the fit-and-score line of a probe, and the item /
word popularity baseline (``moran2022_oivae_popularity.py``,
``moran2022_table1a_users_probe.py``)."""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from identrep.utils.seeding import derive_seed

VAL_FRACTION = 0.2


def validation_rows(n: int, cfg) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows) of ``n`` training rows: a seeded fifth held out,
    the same for every probe of one table and split."""
    rng = np.random.default_rng(derive_seed("validation", cfg.table, cfg.seed))
    perm = rng.permutation(n)
    n_val = int(round(VAL_FRACTION * n))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def fit_and_score(est, X_fit, X_val, X_test) -> str:
    """Fit ``est`` on the fit rows and return its CPU time and the held-out NLL
    on the fit, validation and test rows as one line of text."""
    from identrep.experiments.studies import _moran2022 as mo

    t0 = time.process_time()
    est.fit(mo.as_input(est, X_fit))
    cpu = time.process_time() - t0
    return (
        f"cpu={cpu:.1f}s NLL fit={mo.heldout_nll(est, X_fit):.2f} "
        f"val={mo.heldout_nll(est, X_val):.2f} "
        f"test={mo.heldout_nll(est, X_test):.2f}"
    )


def dense(M) -> np.ndarray:
    """``M`` as a dense float array (CSR rows are densified)."""
    return M.toarray() if sp.issparse(M) else np.asarray(M, float)


def item_frequencies(X_train) -> np.ndarray:
    """The training rows' item (word) frequencies, summing to 1."""
    Xtr = dense(X_train)
    return Xtr.sum(0) / Xtr.sum()


def popularity_nll(X_train, X_test) -> float:
    """Multinomial NLL per test row when every row is scored with the training
    rows' item frequencies (the authors' +1e-6 inside the log)."""
    freq = item_frequencies(X_train)
    return float(-(dense(X_test) * np.log(freq + 1e-6)).sum(1).mean())
