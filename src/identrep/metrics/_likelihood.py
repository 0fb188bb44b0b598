"""Held-out negative log-likelihoods, named for what they are (pure numpy).

The models compute distribution parameters (or log importance weights) for
held-out rows; these functions turn arrays into numbers:

* :func:`reconstruction_nll` -- ``-log p(x | z)`` at one sampled (or mean) z per
  row, averaged over rows. This is what the Sparse VAE paper reports as "held-out
  NLL" (baselines.md 6.4); it is **not** a bound on ``-log p(x)`` (the KL term is
  missing), so it rewards models whose posterior is sharp.
* :func:`importance_weighted_nll` -- ``-log (1/S) sum_s w_s`` averaged over rows,
  with ``log w_s = log p(x, z_s) - log q(z_s | x)`` for S draws from q (Burda et
  al., 2016): an upper bound on ``-log p(x)`` that tightens as S grows (S = 1 is
  the negative ELBO).

Likelihoods: ``"gaussian"`` (mean and variance per entry), ``"bernoulli"``
(probabilities), ``"multinomial"`` (probabilities over the columns of each row,
counts in ``X``; without the count-only multinomial coefficient, as the
topic-model literature reports it).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.special import logsumexp

from identrep._typing import ArrayLike
from identrep.exceptions import DataError
from identrep.utils._param_validation import Interval, StrOptions, validate_params
from identrep.utils.validation import check_array

__all__ = ["importance_weighted_nll", "reconstruction_nll"]

_LOG_2PI = float(np.log(2.0 * np.pi))
_TINY = 1e-300


def _same_shape(A: np.ndarray, B: np.ndarray, name: str) -> np.ndarray:
    if B.shape != A.shape:
        try:
            return np.broadcast_to(B, A.shape)
        except ValueError:
            raise DataError(
                f"{name} must have the shape of X {A.shape} (or broadcast to it); "
                f"got {B.shape}."
            ) from None
    return B


def _probabilities(P: np.ndarray, name: str) -> np.ndarray:
    if (P < 0).any() or (P > 1).any():
        raise DataError(
            f"{name} must be probabilities in [0, 1]; got values in "
            f"[{P.min():.3g}, {P.max():.3g}]."
        )
    return P


@validate_params(
    {
        "likelihood": [StrOptions({"gaussian", "bernoulli", "multinomial"})],
        "per_row": ["boolean"],
    }
)
def reconstruction_nll(
    X: ArrayLike,
    params: ArrayLike,
    *,
    likelihood: str = "gaussian",
    var: ArrayLike | None = None,
    per_row: bool = False,
) -> float | np.ndarray:
    """Reconstruction negative log-likelihood ``-log p(x | z)`` per row, averaged.

    Per row: Gaussian ``sum_j 0.5 [log 2 pi var_j + (x_j - m_j)^2 / var_j]``;
    Bernoulli ``-sum_j [x_j log p_j + (1 - x_j) log(1 - p_j)]``; multinomial
    ``-sum_j x_j log p_j``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Held-out data (counts for the multinomial, 0/1 or [0, 1] for Bernoulli).
    params : array-like of shape (n_samples, n_features)
        Decoder output at the sampled z: Gaussian means, Bernoulli probabilities,
        or multinomial probabilities (each row sums to 1).
    likelihood : {"gaussian", "bernoulli", "multinomial"}, default="gaussian"
    var : array-like broadcastable to (n_samples, n_features), optional
        Gaussian variances (required for the Gaussian; e.g. the per-feature noise
        variances, shape (n_features,)).
    per_row : bool, default=False
        Return the per-row values instead of their mean.

    Returns
    -------
    float, or ndarray of shape (n_samples,)
        In nats (per row, summed over features).

    Raises
    ------
    DataError
        Shapes that do not match, probabilities outside [0, 1], multinomial rows
        that do not sum to 1, non-positive variances, or a missing ``var``.

    Examples
    --------
    >>> reconstruction_nll(np.array([[1.0, 0.0]]), np.array([[0.5, 0.5]]),
    ...                    likelihood="multinomial")
    0.6931471805599453
    """
    Xa = check_array(X, "X")
    P = _same_shape(Xa, check_array(params, "params"), "params")
    if likelihood == "gaussian":
        if var is None:
            raise DataError(
                "var is required for the Gaussian likelihood: pass the noise "
                "variances (per feature or per entry)."
            )
        V = np.asarray(var, dtype=np.float64)
        V = _same_shape(Xa, V if V.ndim else np.full(Xa.shape, float(V)), "var")
        if not np.isfinite(V).all() or (V <= 0).any():
            raise DataError("var must be positive and finite.")
        rows = 0.5 * (_LOG_2PI + np.log(V) + (Xa - P) ** 2 / V).sum(axis=1)
    elif likelihood == "bernoulli":
        P = _probabilities(P, "params")
        rows = -(
            Xa * np.log(np.maximum(P, _TINY))
            + (1.0 - Xa) * np.log(np.maximum(1.0 - P, _TINY))
        ).sum(axis=1)
    else:
        P = _probabilities(P, "params")
        sums = P.sum(axis=1)
        if not np.allclose(sums, 1.0, atol=1e-6):
            bad = int(np.argmax(np.abs(sums - 1.0)))
            raise DataError(
                "params must be multinomial probabilities whose rows sum to 1; row "
                f"{bad} sums to {sums[bad]:.6g}."
            )
        if (Xa < 0).any():
            raise DataError("X must be non-negative counts for the multinomial.")
        rows = -(Xa * np.log(np.maximum(P, _TINY))).sum(axis=1)
    return rows if per_row else float(rows.mean())


@validate_params(
    {
        "per_row": ["boolean"],
        "n_particles": [Interval(Integral, 1, None, closed="left"), None],
    }
)
def importance_weighted_nll(
    log_weights: ArrayLike, *, per_row: bool = False, n_particles: int | None = None
) -> float | np.ndarray:
    """Importance-weighted bound on the negative log marginal likelihood.

    ``-log p(x) <= -log (1/S) sum_s exp(log_w_s)``, ``log_w_s = log p(x | z_s) +
    log p(z_s) - log q(z_s | x)``, ``z_s ~ q(z | x)``; computed with a stable
    log-sum-exp.

    Parameters
    ----------
    log_weights : array-like of shape (n_samples, n_particles)
        One row per held-out sample, one column per draw from q.
    per_row : bool, default=False
        Return the per-row bounds instead of their mean.
    n_particles : int, optional
        Use only the first ``n_particles`` columns (to compare S within one run).

    Returns
    -------
    float, or ndarray of shape (n_samples,)
        In nats; never below the true ``-log p(x)`` in expectation, and equal to
        the mean negative ELBO estimate for one particle.

    Examples
    --------
    >>> importance_weighted_nll(np.log([[0.5, 0.5]]))   # p(x) = 0.5 exactly
    0.6931471805599453
    """
    L = check_array(log_weights, "log_weights")
    if n_particles is not None:
        if n_particles > L.shape[1]:
            raise DataError(
                f"n_particles={n_particles} exceeds the {L.shape[1]} columns of "
                "log_weights."
            )
        L = L[:, :n_particles]
    rows = -(logsumexp(L, axis=1) - np.log(L.shape[1]))
    return rows if per_row else float(rows.mean())
