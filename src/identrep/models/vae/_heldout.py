"""Held-out likelihoods of the VSC and OI-VAE estimators (model side).

The model draws z from q(z | x) for every held-out row and decodes it; the metric
side (:func:`identrep.metrics.reconstruction_nll`,
:func:`identrep.metrics.importance_weighted_nll`) turns the arrays into numbers:

* ``heldout_nll(X)``: the reconstruction NLL ``-log p(x | z)`` at one sampled z
  (what the Sparse VAE paper reports as held-out NLL);
* ``heldout_nll(X, n_particles=S)``: the importance-weighted bound on
  ``-log p(x)`` with S draws (Burda et al., 2016);
* ``score(X)``: the mean one-draw ELBO (higher is better).

Gaussian NLLs are on the raw features (the standardisation's Jacobian included);
the categorical one omits the multinomial coefficient.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
import torch

from identrep.exceptions import InvalidParameterError
from identrep.metrics import importance_weighted_nll, reconstruction_nll
from identrep.models.vae._ssl import observation_log_prob
from identrep.utils.seeding import seeded

__all__ = ["HeldoutNLLMixin"]

_ROWS = 2048


class HeldoutNLLMixin:
    """``heldout_nll`` and ``score`` for modules with ``encode``, ``decoder``,
    ``likelihood``, ``log_var``, ``target`` and ``standardize``; the posterior
    draws come from :meth:`_posterior_draws` (Gaussian by default)."""

    def _posterior_draws(self, x, n_particles: int, alpha_gen=None):
        """Draws (S, B, K) from q(z | x) and ``log p(z) - log q(z | x)`` (S, B)."""
        mean, log_var = self.module_.encode(x)
        eps = torch.randn((n_particles, *mean.shape), dtype=mean.dtype)
        eps = eps.to(mean.device)
        z = mean + torch.exp(0.5 * log_var) * eps
        log_p = -0.5 * (math.log(2 * math.pi) + z.square()).sum(-1)
        log_q = -0.5 * (math.log(2 * math.pi) + log_var + eps.square()).sum(-1)
        return z, log_p - log_q

    def _decode_draws(self, x, n_particles):
        m = self.module_
        z, log_ratio = self._posterior_draws(x, n_particles)
        S, B, K = z.shape
        out = m.decoder(z.reshape(S * B, K)).reshape(S, B, -1)
        target = m.target(x).to(out.dtype)
        log_px = observation_log_prob(m.likelihood, target, out, m.log_var)
        if m.likelihood == "gaussian":  # to the raw features
            log_px = log_px - torch.log(m.standardize.scale).sum().to(out.dtype)
        return out, log_px, log_ratio

    def _raw_params(self, out: torch.Tensor) -> tuple[np.ndarray, np.ndarray | None]:
        m = self.module_
        if m.likelihood == "gaussian":
            scale = m.standardize.scale.to(torch.float64)
            mean = out.to(torch.float64) * scale + m.standardize.mean
            var = torch.exp(m.log_var.to(torch.float64)) * scale.square()
            return mean.cpu().numpy(), var.cpu().numpy()
        if m.likelihood == "bernoulli":
            return torch.sigmoid(out.double()).cpu().numpy(), None
        return torch.softmax(out.double(), dim=-1).cpu().numpy(), None

    def heldout_nll(
        self, X, *, n_particles: int | None = None, random_state: int = 0
    ) -> float:
        """Held-out negative log-likelihood of ``X`` in nats per row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)
        n_particles : int, optional
            None: the reconstruction NLL at one sampled z. An int S: the
            importance-weighted bound on ``-log p(x)`` with S draws.
        random_state : int, default=0
            Seed of the draws (the same seed gives the same number).

        Returns
        -------
        float
        """
        if n_particles is not None and (
            isinstance(n_particles, bool)
            or not isinstance(n_particles, Integral)
            or n_particles < 1
        ):
            raise InvalidParameterError(
                "The 'n_particles' parameter of heldout_nll must be an int >= 1 or "
                f"None; got {n_particles!r}."
            )
        Xc, _, _ = self._check_transform_data(X, None, None)
        lik = {"categorical": "multinomial"}.get(self.likelihood, self.likelihood)
        rows = []
        with torch.no_grad(), seeded(random_state):
            for s in range(0, Xc.shape[0], _ROWS):
                x = self._tensor(Xc[s : s + _ROWS], self._x_dtype())
                S = 1 if n_particles is None else int(n_particles)
                out, log_px, log_ratio = self._decode_draws(x, S)
                if n_particles is None:
                    params, var = self._raw_params(out[0])
                    rows.append(
                        reconstruction_nll(
                            Xc[s : s + _ROWS],
                            params,
                            likelihood=lik,
                            var=var,
                            per_row=True,
                        )
                    )
                else:
                    logw = (log_px + log_ratio).T.double().cpu().numpy()
                    rows.append(importance_weighted_nll(logw, per_row=True))
        return float(np.concatenate(rows).mean())

    def score(self, X, y=None) -> float:
        """Mean one-draw ELBO per row in nats (``-heldout_nll(X, n_particles=1)``;
        higher is better)."""
        return -self.heldout_nll(X, n_particles=1)
