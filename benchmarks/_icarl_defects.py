"""Known defects of third-party iCaRL code, replayed on identrep's iCaRL for probes.

No official iCaRL code exists (Lu et al., 2022); Chen et al. (2024) do not say
which implementation gave their iCaRL and MT-iCaRL rows. One public NF-iVAE
re-implementation (``../shared/reference/baselines.md``, section 2.4) computes the
second-order term of the score-matching objective as ``grad(sum(grad log p~), z)``:
the Hessian's *row sums* ``(H 1)_j`` instead of its diagonal ``H_jj``. Per sample
its objective is

    J_rows(z) = sum_j (H 1)_j + 0.5 |s(z)|^2 = 1^T H 1 + 0.5 |s(z)|^2,

the correct ``tr H + 0.5 |s|^2`` plus the sum of the off-diagonal entries of H.
With a factorised prior the two agree; with T_NN's coupling the extra term rewards
negative curvature along the all-ones direction, so the prior is fitted to the
wrong target and the encoder, trained against that prior, follows it.

:func:`use_hessian_row_sums` swaps identrep's exact objective for this one in the
iCaRL loss (``identrep.models.vae._icarl_loss``); nothing in ``src`` changes.

The objective's other stop-gradient is a second place where an implementation can
depart: the ELBO's prior term log p~(z | u) has no normaliser C(u), so it may
train the encoder and decoder only (identrep: the prior's parameters and u
detached there, the gradient-correct two-part objective of Lu et al.). The
reference notes that re-implementations update the two parts "alternating or
joint"; a joint update that forgets the stop-gradient lets the unnormalised log
prior pull the prior's parameters towards higher p~ at the encoder's samples,
which nothing normalises (a flatter or shifted prior), against score matching.
:func:`use_undetached_elbo_prior` replays that: the ELBO's prior term then trains
the prior and its conditioner too. It is a candidate, not a defect read in any
named code.

The reference also names the other way to update the two parts: a
re-implementation that trains them in turn (``optimization_freezer('elbo' /
'score_matching')``), so that for a stretch the encoder and decoder train against
a prior that is not updated, and then the prior is fitted to a posterior that
does not move. :func:`use_alternating_phases` replays that on identrep's iCaRL:
training passes of ``n_epochs`` epochs take the ELBO term only (the prior and its
conditioner get no gradient, so Adam leaves them), then ``n_epochs`` the score
matching term only (the encoder and decoder get none), and so on, starting with
the ELBO. Validation (no gradients) still scores the whole objective, so the
best epoch is chosen as in the study. Phase lengths are not known from any code.
"""

from __future__ import annotations

import torch
from torch import Tensor

from identrep.models.vae import _icarl_loss

__all__ = [
    "ELBO_PRIOR_CHOICES",
    "HESSIAN_CHOICES",
    "row_sum_score_matching",
    "use_alternating_phases",
    "use_hessian_row_sums",
    "use_undetached_elbo_prior",
]

HESSIAN_CHOICES = ("diagonal", "row-sums")
ELBO_PRIOR_CHOICES = ("detached", "undetached")


def row_sum_score_matching(prior, z: Tensor, u: Tensor) -> Tensor:
    """``1^T H 1 + 0.5 |s|^2`` per sample, shape (batch,): the defective objective.

    Gradients reach the prior's parameters and u (``create_graph``), never z's
    producer (z is detached), as in identrep's exact objective.
    """
    with torch.enable_grad():
        z = z.detach().requires_grad_(True)
        log_p = prior.log_prob(z, u)
        (score,) = torch.autograd.grad(log_p.sum(), z, create_graph=True)
        (rows,) = torch.autograd.grad(score.sum(), z, create_graph=True)
    return rows.sum(-1) + 0.5 * score.square().sum(-1)


def use_hessian_row_sums() -> None:
    """Make every iCaRL / MT-iCaRL fit in this process use
    :func:`row_sum_score_matching` (both ``score_matching`` methods are replaced;
    the probes use the exact one)."""

    def patched(prior, z, u, *, method="exact", projections=None):
        return row_sum_score_matching(prior, z, u)

    _icarl_loss.expfam_score_matching = patched


def use_undetached_elbo_prior() -> None:
    """Make every iCaRL / MT-iCaRL fit in this process evaluate the ELBO's prior
    term with live prior parameters and u (``detach_params`` ignored), so the
    unnormalised log prior trains the prior and its conditioner as well as the
    encoder and decoder. Score matching is unchanged."""
    from identrep.models.nn.icarl import ExpFamPrior

    original = ExpFamPrior.log_prob

    def log_prob(self, z, u, *, detach_params=False):
        return original(self, z, u, detach_params=False)

    ExpFamPrior.log_prob = log_prob


def use_alternating_phases(n_epochs: int) -> None:
    """Make every iCaRL / MT-iCaRL fit in this process train its two parts in
    turn, ``n_epochs`` epochs each, ELBO first (see the module docstring). The
    study's coupling warm-up hook still runs after every epoch."""
    from identrep.models.vae.icarl import ICaRL

    if n_epochs < 1:
        raise ValueError(f"n_epochs must be a positive integer; got {n_epochs}.")
    original = ICaRL._make_loss

    def _make_loss(self, n_train: int):
        loss_fn, hook = original(self, n_train)
        options = dict(loss_fn.keywords)  # score_matching, n_projections
        done = [0]  # finished training epochs

        def phased(module, batch):
            neg_elbo, sm = _icarl_loss.icarl_loss_terms(module, batch, **options)
            if not torch.is_grad_enabled():  # validation: the whole objective
                return (neg_elbo + sm).mean(), batch.x.shape[0]
            elbo_phase = (done[0] // n_epochs) % 2 == 0
            return (neg_elbo if elbo_phase else sm).mean(), batch.x.shape[0]

        def post_epoch(module) -> None:
            done[0] += 1
            if hook is not None:
                hook(module)

        return phased, post_epoch

    ICaRL._make_loss = _make_loss
