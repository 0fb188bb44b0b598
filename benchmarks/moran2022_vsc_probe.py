"""VSC on a Moran et al. (2022) count table at the authors' KL weight 1/K: does
its selector schedule or prior rate explain its distance to the VAE?

The study's ``VSC_KL1overK`` row uses the VSC paper's settings (alpha 0.1, the
selector's inverse temperature c annealed 50 -> 200, spike warm-up over the
first 20% of epochs). The Sparse VAE authors' VSC (gemoran's PyTorch port,
``../shared/reference/baselines.md`` 3.4) has alpha 0.01, c fixed at 10 and no
warm-up, a pseudo-input prior (``VSC(prior="pseudo_inputs")``), and its KL is
summed over the latents, not averaged (weight 1, where its VAE's is 1/K), with
the prior's sparsity penalty weighted by the feature count. For one
split, each setting is fitted on 80% of the training rows (the validation
carving of the other probes) with the row's model seed, and the reconstruction
NLL (one sampled z) is printed on those rows, on the validation rows and on the
test rows (reported, not used to choose), with ``VAE_KL1overK`` beside them.
``--relaxed`` adds the NLL on the validation and test rows with z drawn from the
relaxed selector at the final c (the authors' evaluation: their held-out NLL
decodes the training-time sample; identrep's draws the exact spike and slab, which
is the same at c 200 but not at c 10). ``--port-kl`` fits every VSC setting with
the port's Gaussian part of the KL instead of the paper's (:func:`port_pair_kl`);
``--port-gamma`` with the port's spike probability ``gamma = exp(-relu(-v))``
instead of ``sigmoid(v)`` (:func:`port_logits`). ``--port-frozen-prior`` keeps the
pseudo-inputs and the selector of the pseudo-input prior at their random
initialisation, as the port's count-table trainer does (its optimiser lists for
``vsc`` leave them out; :func:`frozen_prior`).

Usage (data home with ml_abstracts)::

    IDENTREP_DATA=/work/shared/data PYTHONPATH=src:benchmarks OMP_NUM_THREADS=1 \
        python benchmarks/moran2022_vsc_probe.py --table table1b --epochs 40
"""

from __future__ import annotations

import argparse
import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F

from _moran2022_probes import fit_and_score, validation_rows
from identrep.experiments.studies import _moran2022 as mo
from identrep.models.nn.sparse_coding import VSCModule
from identrep.models.vae import _vsc_loss
from identrep.models.vae._vsc_loss import spike_slab_sample


def port_pair_kl(mean, log_var, spike_logits, prior_mean, prior_log_var, prior_logits):
    """The port's per-latent KL of two spike-and-slab distributions, summed over
    the last dimension (gemoran/sparse-vae-code ``model/models.py``, ``VSC.kld_z``,
    read, not copied; its 1e-6 guards left out). With s, t the slab standard
    deviations of q and of the prior component::

        gamma log(t / s) + (s + (mu - m)^2) / (2 t) - 1/2 + KL(Bern(gamma) || Bern(pi))

    where the paper's Gaussian part is ``gamma [log(t / s) + (s^2 + (mu - m)^2) /
    (2 t^2) - 1/2]``: standard deviations stand where variances belong, and only
    the log term is multiplied by gamma, so an inactive latent (gamma 0) still
    pays ``(s + (mu - m)^2) / (2 t) - 1/2``, which is least (-1/2) at s = 0.
    """
    gamma = torch.sigmoid(spike_logits)
    s, t = torch.exp(0.5 * log_var), torch.exp(0.5 * prior_log_var)
    gauss = gamma * 0.5 * (prior_log_var - log_var)
    gauss = gauss + (s + (mean - prior_mean).square()) / (2.0 * t) - 0.5
    bern = gamma * (F.logsigmoid(spike_logits) - F.logsigmoid(prior_logits)) + (
        1.0 - gamma
    ) * (F.logsigmoid(-spike_logits) - F.logsigmoid(-prior_logits))
    return (gauss + bern).sum(-1)


def port_kl(mean, log_var, spike_logits, alpha):
    """:func:`port_pair_kl` against the fixed prior N(0, 1) with rate alpha."""
    zero = torch.zeros_like(mean)
    logit = torch.full_like(mean, math.log(alpha) - math.log1p(-alpha))
    return port_pair_kl(mean, log_var, spike_logits, zero, zero, logit)


def port_logits(v):
    """logit(gamma) for the port's ``gamma = exp(-relu(-v))`` (Tonolini et al.'s
    appendix A2): gamma is 1, with no gradient, wherever v >= 0, so a latent
    switched fully on by the encoder's initial weights gets no push towards the
    prior's rate from that datum. Held 1e-6 below 0 on the log scale to keep the
    logit finite (gamma at most 1 - 1e-6)."""
    log_g = torch.clamp(-F.relu(-v), max=-1e-6)
    return log_g - torch.log(-torch.expm1(log_g))


@contextlib.contextmanager
def port_patched(kl: bool, gamma: bool):
    """Within the block VSC uses the port's KL and / or spike probability (this
    process only)."""
    saved = _vsc_loss.spike_slab_pair_kl, _vsc_loss.spike_slab_kl, VSCModule._parts
    if kl:
        _vsc_loss.spike_slab_pair_kl, _vsc_loss.spike_slab_kl = port_pair_kl, port_kl
    if gamma:
        parts = VSCModule._parts

        def _parts(self, xs):
            mean, log_var, v = parts(self, xs)
            return mean, log_var, port_logits(v)

        VSCModule._parts = _parts
    try:
        yield
    finally:
        _vsc_loss.spike_slab_pair_kl, _vsc_loss.spike_slab_kl, VSCModule._parts = saved


@contextlib.contextmanager
def frozen_prior(on: bool):
    """Within the block every new :class:`VSCModule` has its pseudo-inputs and
    its selector frozen at their random initialisation (``requires_grad`` off,
    so Adam never steps them): the port's ``ModelTrainer`` builds its optimiser
    for ``vsc`` from the encoder and decoder only (this process only)."""
    saved = VSCModule.__init__
    if on:

        def __init__(self, *args, **kwargs):
            saved(self, *args, **kwargs)
            if self.n_pseudo_inputs > 0:
                self.pseudo_inputs.requires_grad_(False)
                self.selector.requires_grad_(False)

        VSCModule.__init__ = __init__
    try:
        yield
    finally:
        VSCModule.__init__ = saved


#: The port's selector: c fixed at 10, no spike warm-up.
C10 = {"c_start": 10.0, "c_end": 10.0, "warmup_end": 0.0}


def _port(kl_weight_one: bool):
    """The port's VSC: pseudo-input prior (10), alpha 0.01, c 10, no warm-up,
    sparsity penalty weight G (ours multiplies K: G / K), KL weight 1 or 1/K."""

    def params(config, n_features):
        out = {
            "prior": "pseudo_inputs",
            "n_pseudo_inputs": 10,
            "prior_sparsity_weight": n_features / config.n_latents,
            "alpha": 0.01,
            **C10,
        }
        if kl_weight_one:
            out["kl_weight"] = 1.0
        return out

    return params


#: name -> VSC parameters set over the study's VSC_KL1overK estimator (or a
#: function of the configuration and the feature count returning them).
SETTINGS = {
    "study (alpha 0.1, c 50->200, warm-up 20%)": {},
    "c 10, no warm-up": C10,
    "alpha 0.01": {"alpha": 0.01},
    "alpha 0.01, c 10, no warm-up (the port's)": {"alpha": 0.01, **C10},
    "pseudo-input prior (study's alpha and schedules)": {"prior": "pseudo_inputs"},
    "the port's whole VSC (pseudo-inputs, alpha 0.01, c 10, KL weight 1)": _port(True),
    "the port's VSC at KL weight 1/K": _port(False),
    "c 10, no warm-up, pseudo-input prior": {**C10, "prior": "pseudo_inputs"},
}


def _config(table: str, model: str, epochs: int, split: int, shift: str):
    if table == "table1b":
        from identrep.experiments.studies import moran2022_table1b as t

        cfgs = t.grid(seeds=split + 1, models=(model,), max_epochs=epochs)
    elif table == "table2":
        from identrep.experiments.studies import moran2022_table2 as t

        cfgs = [
            c
            for c in t.grid(seeds=split + 1, models=(model,), max_epochs=epochs)
            if c.sigma_pct == t.SHIFTS[shift]
        ]
    else:
        raise ValueError(f"--table must be 'table1b' or 'table2'; got {table!r}.")
    return t, next(c for c in cfgs if c.seed == split)


def relaxed_nll(est, X) -> float:
    """Held-out NLL with z from the relaxed selector at ``est.c_end`` (the
    authors' evaluation) instead of the exact spike-and-slab draw."""

    def draws(x, n_particles):
        mean, log_var, logits = est.module_.encode_parts(x)
        c = float(est.c_end)
        z = torch.stack(
            [spike_slab_sample(mean, log_var, logits, c) for _ in range(n_particles)]
        )
        return z, torch.zeros(z.shape[:2], dtype=z.dtype)  # ratio unused at S = 1

    est._posterior_draws = draws  # instance attribute: this estimator only
    try:
        return mo.heldout_nll(est, X)
    finally:
        del est._posterior_draws


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", default="table1b")
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--shift", default="high", help="Table 2 only")
    ap.add_argument("--settings", default=",".join(str(i) for i in range(4)))
    ap.add_argument("--relaxed", action="store_true")
    ap.add_argument("--port-kl", action="store_true", help="the port's KL formula")
    ap.add_argument(
        "--port-gamma", action="store_true", help="the port's exp(-relu(-v)) gamma"
    )
    ap.add_argument(
        "--port-frozen-prior",
        action="store_true",
        help="the port's untrained pseudo-inputs and selector",
    )
    args = ap.parse_args()
    picked = [list(SETTINGS)[int(i)] for i in args.settings.split(",")]
    t, vcfg = _config(args.table, "VSC_KL1overK", args.epochs, args.split, args.shift)
    _, acfg = _config(args.table, "VAE_KL1overK", args.epochs, args.split, args.shift)
    split, _ = t.make_data(vcfg)
    fit_rows, val = validation_rows(split.X_train.shape[0], vcfg)
    X_fit, X_val = split.X_train[fit_rows], split.X_train[val]
    print(
        f"{args.table} {vcfg.describe()} epochs={args.epochs} fit rows="
        f"{X_fit.shape[0]} validation={X_val.shape[0]} test={split.X_test.shape[0]}"
        + (" (VSC with the port's KL)" if args.port_kl else "")
        + (" (VSC with the port's gamma)" if args.port_gamma else "")
        + (" (VSC with the port's frozen prior)" if args.port_frozen_prior else "")
    )
    runs = [(name, vcfg, SETTINGS[name]) for name in picked]
    runs.append(("VAE_KL1overK (reference)", acfg, {}))
    for name, cfg, params in runs:
        est = mo.make_estimator(cfg, cfg.model_seed(), "categorical")
        if callable(params):
            params = params(cfg, X_fit.shape[1])
        est.set_params(**params)
        vsc = hasattr(est, "spike_probabilities")
        with (
            port_patched(args.port_kl and vsc, args.port_gamma and vsc),
            frozen_prior(args.port_frozen_prior and vsc),
        ):
            line = f"{name}: " + fit_and_score(est, X_fit, X_val, split.X_test)
            if vsc:
                gamma = est.spike_probabilities(mo.as_input(est, X_val))
                line += f" mean gamma val={float(np.mean(gamma)):.3f}"
                if args.relaxed:
                    line += (
                        f" relaxed(c={est.c_end:g}) val={relaxed_nll(est, X_val):.2f}"
                        f" test={relaxed_nll(est, split.X_test):.2f}"
                    )
        print(line, flush=True)


if __name__ == "__main__":
    main()
