"""The smooth parts of the group-lasso inner problems (pure, batched over tasks).

Each loss is a namespace of static functions of W (T, m, k) and its inputs: the
gradient, a Hessian-vector product, a Lipschitz constant of the gradient (the FISTA
step) and the gauge term of the implicit system (see
:mod:`identrep.models.multitask.heads.group_lasso`).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["MultinomialLoss", "QuadraticLoss"]


class QuadraticLoss:
    r"""L(W) = 0.5 tr(W^T G W) - tr(W^T C), inputs ``(G, C)``: G (T, d, d) symmetric
    PSD, C (T, d, k). grad = G W - C, hess u = G u, Lipschitz = lambda_max(G)."""

    n_inputs = 2

    @staticmethod
    def grad(W: Tensor, G: Tensor, C: Tensor) -> Tensor:
        return G @ W - C

    @staticmethod
    def hvp(W: Tensor, U: Tensor, G: Tensor, C: Tensor) -> Tensor:
        return G @ U

    @staticmethod
    def lipschitz(G: Tensor, C: Tensor) -> Tensor:
        return torch.linalg.eigvalsh(G)[..., -1]

    @staticmethod
    def gauge(U: Tensor, penalized: Tensor | None) -> Tensor:
        return torch.zeros_like(U)


class MultinomialLoss:
    r"""Weighted mean softmax cross-entropy, inputs ``(F, Y, omega)``: F (T, n, m)
    (last column ones for an intercept), Y (T, n, K) one-hot, omega (T, n) 0/1.

    With P = softmax(F W) and n_t = sum_i omega_i:
    grad = F^T diag(omega) (P - Y) / n_t;
    hess u = F^T diag(omega) (P * A - P sum_c(P * A)) / n_t with A = F u;
    Lipschitz <= lambda_max(F^T diag(omega) F / n_t) / 2 (Boehning's bound).

    The loss is invariant to adding c 1^T to the intercept row (softmax gauge), so
    its Hessian is singular there; :meth:`gauge` adds the projection onto that
    direction to the implicit system. The solver never leaves the gauge (the
    intercept gradient sums to zero over classes, so a zero-sum start stays
    zero-sum) and the VJP is blind to it, so the gradient is unchanged.
    """

    n_inputs = 3

    @staticmethod
    def _n(omega: Tensor) -> Tensor:
        return omega.sum(-1).clamp_min(1)[:, None, None]

    @staticmethod
    def grad(W: Tensor, F: Tensor, Y: Tensor, omega: Tensor) -> Tensor:
        P = torch.softmax(F @ W, dim=-1)
        return (
            F.transpose(1, 2) @ ((P - Y) * omega[..., None]) / MultinomialLoss._n(omega)
        )

    @staticmethod
    def hvp(W: Tensor, U: Tensor, F: Tensor, Y: Tensor, omega: Tensor) -> Tensor:
        P = torch.softmax(F @ W, dim=-1)
        PA = P * (F @ U)
        inner = (PA - P * PA.sum(-1, keepdim=True)) * omega[..., None]
        return F.transpose(1, 2) @ inner / MultinomialLoss._n(omega)

    @staticmethod
    def lipschitz(F: Tensor, Y: Tensor, omega: Tensor) -> Tensor:
        Fw = F * omega[..., None]
        gram = F.transpose(1, 2) @ Fw / MultinomialLoss._n(omega)
        return 0.5 * torch.linalg.eigvalsh(gram)[..., -1]

    @staticmethod
    def gauge(U: Tensor, penalized: Tensor | None) -> Tensor:
        free = torch.ones(U.shape[-2], dtype=torch.bool, device=U.device)
        if penalized is not None:
            free = ~penalized
        return U.mean(-1, keepdim=True).expand_as(U) * free[None, :, None].to(U.dtype)

    @staticmethod
    def value(W: Tensor, F: Tensor, Y: Tensor, omega: Tensor) -> Tensor:
        """Per-task loss, shape (T,)."""
        logp = torch.log_softmax(F @ W, dim=-1)
        nll = -(logp * Y).sum(-1) * omega
        return nll.sum(-1) / omega.sum(-1).clamp_min(1)
