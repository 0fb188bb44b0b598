"""Reconstructions and held-out likelihoods of the unconditional VAEs (model side).

:class:`ReconstructMixin` gives ``reconstruct(X)``: the decoder's mean at the
posterior mean of z, in the units of X (Gaussian), as probabilities (Bernoulli) or
as probabilities over the features (categorical), e.g. to rank held-out items.
:class:`HeldoutNLLMixin` adds the held-out likelihoods. The model draws z from
q(z | x) for every held-out row and decodes it; the metric side
(:func:`identrep.metrics.reconstruction_nll`,
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

import contextlib
import math
from numbers import Integral

import numpy as np
import scipy.sparse as sp
import torch

from identrep.exceptions import InvalidParameterError
from identrep.metrics import importance_weighted_nll, reconstruction_nll
from identrep.models.vae._elbo import observation_log_prob, prior_log_prob
from identrep.utils.seeding import seeded

__all__ = ["HeldoutNLLMixin", "ReconstructMixin"]

#: Rows (times draws) encoded and decoded at a time.
_ROWS = 2048


def _likelihood(module) -> str:
    return getattr(module, "likelihood", "gaussian")


def _decode(module, z):
    """Decoder output and the Gaussian log-variance: a
    :class:`~identrep.models.nn.vae.GaussianDecoder` returns both, the other
    decoders their output only (the log-variance is the module's)."""
    out = module.decoder(z)
    if isinstance(out, tuple):
        return out
    return out, module.log_var


def _target(module, x):
    if hasattr(module, "target"):
        return module.target(x)
    return module.standardize(x)


def _correlated_gaussian_log_prob(z, L):
    """log N(z; 0, L L^T) over the last dimension of z (..., K), L (K, K) lower
    triangular: ``-0.5 (K log 2 pi + ||L^-1 z||^2) - sum_k log L_kk``."""
    K = z.shape[-1]
    flat = z.reshape(-1, K).T  # (K, n)
    white = torch.linalg.solve_triangular(L, flat, upper=False)
    maha = white.square().sum(0).reshape(z.shape[:-1])
    logdet = torch.log(torch.diagonal(L)).sum()
    return -0.5 * (K * math.log(2 * math.pi) + maha) - logdet


def _dense(block) -> np.ndarray:
    """A block of rows of checked input as a dense array (sparse rows densified
    one block at a time)."""
    return block.toarray() if sp.issparse(block) else block


class ReconstructMixin:
    """``reconstruct`` for an unconditional VAE: a module with ``encode(x, y,
    task)``, ``decoder`` and ``standardize`` (and ``likelihood`` when not
    Gaussian); the input as :meth:`_check_transform_data` checks it (dense, or
    sparse rows for the estimators that accept them)."""

    def _encode_mean(self, x):
        """Posterior mean E_q[z | x] (B, K) of raw rows x."""
        n = x.shape[0]
        y0 = x.new_zeros(n, dtype=torch.float64)
        t0 = torch.zeros(n, dtype=torch.int64, device=x.device)
        return self.module_.encode(x, y0, t0)[0]

    def _raw_params(self, out, log_var) -> tuple[np.ndarray, np.ndarray | None]:
        """Decoder output as the likelihood's parameters on the raw features:
        Gaussian means and variances, or probabilities (and None)."""
        m = self.module_
        lik = _likelihood(m)
        if lik == "gaussian":
            scale = m.standardize.scale.to(torch.float64)
            mean = out.to(torch.float64) * scale + m.standardize.mean
            var = torch.exp(log_var.to(torch.float64)) * scale.square()
            return mean.cpu().numpy(), var.cpu().numpy()
        if lik == "bernoulli":
            return torch.sigmoid(out.double()).cpu().numpy(), None
        return torch.softmax(out.double(), dim=-1).cpu().numpy(), None

    def reconstruct(
        self, X, *, sample: bool = False, random_state: int = 0
    ) -> np.ndarray:
        """The decoder's mean at the posterior mean of z (or at one draw from
        q(z | x)), for every row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)
        sample : bool, default=False
            Decode one draw of z from q(z | x) per row instead of its mean (the
            Sparse VAE authors' held-out MSE in their Figure 3a, a forward pass
            of the model; the draws of :meth:`HeldoutNLLMixin._posterior_draws`,
            which every estimator with this method has).
        random_state : int, default=0
            Seed of the draws when ``sample`` (the same seed gives the same
            reconstruction).

        Returns
        -------
        ndarray of shape (n_samples, n_features_in_), float64
            Gaussian: the reconstructed features in the units of X (the
            standardisation undone); Bernoulli: the probabilities of 1;
            categorical: the probabilities over the features (each row sums to 1),
            which rank a user's items or a document's words.

        Raises
        ------
        NotFittedError
            Before fit.
        DataError
            A feature-count mismatch or non-finite values.
        """
        Xc, _, _ = self._check_transform_data(X, None, None)
        parts = []
        draws = seeded(random_state) if sample else contextlib.nullcontext()
        with torch.no_grad(), draws:
            for s in range(0, Xc.shape[0], _ROWS):
                x = self._tensor(_dense(Xc[s : s + _ROWS]), self._x_dtype())
                if sample:
                    z = self._posterior_draws(x, 1)[0][0]
                else:
                    z = self._encode_mean(x)
                out, log_var = _decode(self.module_, z)
                parts.append(self._raw_params(out, log_var)[0])
        return np.concatenate(parts)


class HeldoutNLLMixin(ReconstructMixin):
    """``heldout_nll`` and ``score`` (and ``reconstruct``) for an unconditional
    VAE: a module with ``encode(x, y, task)``, ``decoder`` and ``standardize``
    (and ``likelihood``, ``target`` and ``log_var`` when not Gaussian with a
    :class:`~identrep.models.nn.vae.GaussianDecoder`); the posterior draws come
    from :meth:`_posterior_draws` (Gaussian q, standard normal prior by default).
    """

    def _posterior_draws(self, x, n_particles: int):
        """Draws (S, B, K) from q(z | x) and ``log p(z) - log q(z | x)`` (S, B)."""
        n = x.shape[0]
        y0 = x.new_zeros(n, dtype=torch.float64)
        t0 = torch.zeros(n, dtype=torch.int64, device=x.device)
        mean, log_var = self.module_.encode(x, y0, t0)
        eps = torch.randn((n_particles, *mean.shape), dtype=mean.dtype)
        eps = eps.to(mean.device)
        z = mean + torch.exp(0.5 * log_var) * eps
        log_q = -0.5 * (math.log(2 * math.pi) + log_var + eps.square()).sum(-1)
        return z, self._prior_log_prob(z) - log_q

    def _prior_log_prob(self, z):
        """log p(z) (S, B): the module's fixed standard prior (Gaussian or
        Laplace, unit variance), or N(0, L L^T) where the module learns a prior
        correlation (``prior_scale_tril()`` returns its Cholesky factor L)."""
        tril = getattr(self.module_, "prior_scale_tril", None)
        L = None if tril is None else tril()
        if L is not None:
            return _correlated_gaussian_log_prob(z, L.to(z.dtype))
        dist = getattr(getattr(self.module_, "prior", None), "dist", "gaussian")
        zeros = torch.zeros_like(z)
        return prior_log_prob(dist, z, zeros, zeros)  # standard, unit variance

    def _decode_draws(self, x, n_particles):
        m = self.module_
        z, log_ratio = self._posterior_draws(x, n_particles)
        S, B, K = z.shape
        out, log_var = _decode(m, z.reshape(S * B, K))
        out = out.reshape(S, B, -1)
        target = _target(m, x).to(out.dtype)
        lik = _likelihood(m)
        log_px = observation_log_prob(lik, target, out, log_var)
        if lik == "gaussian":  # to the raw features
            log_px = log_px - torch.log(m.standardize.scale).sum().to(out.dtype)
        return out, log_var, log_px, log_ratio

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
        own = _likelihood(self.module_)
        lik = {"categorical": "multinomial"}.get(own, own)
        rows = []
        S = 1 if n_particles is None else int(n_particles)
        step = max(1, _ROWS // S)  # S x step decoded rows at a time
        with torch.no_grad(), seeded(random_state):
            for s in range(0, Xc.shape[0], step):
                block = _dense(Xc[s : s + step])
                x = self._tensor(block, self._x_dtype())
                out, log_var, log_px, log_ratio = self._decode_draws(x, S)
                if n_particles is None:
                    params, var = self._raw_params(out[0], log_var)
                    rows.append(
                        reconstruction_nll(
                            block,
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
