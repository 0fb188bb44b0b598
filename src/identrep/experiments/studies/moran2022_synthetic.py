"""Moran et al. (TMLR 2022), Section 2.2 and Figure 3: recovering two correlated
factors from the 7-feature sparse process (``moran2022_synthetic``).

Data: :func:`~identrep.datasets.make_sparse_factors` (x1..x7 of Eq. 9, noise sd
0.5) with factor correlation rho in {0, 0.2, 0.4, 0.6, 0.8}; 1,000 training points;
a fresh 2,000-point sample scores the representation. Models: the Sparse VAE, the
VAE, the beta-VAE (beta = 4) and VSC (the paper's Figure 3 and its text compare
the Sparse VAE, the VAE and VSC; the authors' script also runs beta-VAEs; VSC
with its class defaults for the prior and schedules), each with 2 latents,
hidden (50, 50), batch 100, Adam at 1e-2, 200 epochs and the same step-size
schedule (the Sparse VAE's defaults). One labelled variant that is not a row of
the paper: ``VAE_KL1overK``, the VAE with its KL weighed 1/K (K latents), the
weight the authors' code gives the VAE (:data:`VARIANTS`); it tests whether the
anchors' VAE differs from ours by that weight. The Sparse VAE learns the prior
correlation of the factors (the paper's Eq. 1), keeps its per-feature head rows at
fixed norm, and keeps the best of 4 restarts by its training objective
(``SVAE_SETTINGS``, ``SVAE_RESTARTS``).

Metrics: held-out MSE of the reconstruction (Figure 3a); DCI (Eastwood and
Williams, 2018) with gradient-boosted-tree importances, fitted on 1,000 of the
fresh points and evaluated (informativeness) on the other 1,000 (the authors'
script uses 16); for the Sparse VAE, the support of its masks (``support_``)
against the true 7 x 2 support, columns matched through the latents
(support F-score, exact support, rows with no factor), and its collapsed rows:
features whose whole row of the masks W is cut (every |mask| at most 5 % of the
largest, :func:`~identrep.metrics.collapsed_rows`), with the worst feature's
held-out reconstruction R^2 (:func:`~identrep.metrics.feature_r2`; a collapsed
feature has R^2 near 0; a fitted x1 = z1 plus noise of variance 0.25 about
1 / 1.25 = 0.8, the lowest of a good fit).

The paper shows these numbers as a figure only; beside ours the report prints the
DCI-D that the authors' code reached on this machine (same generator, 10 seeds,
2,000 evaluation points), stored as the "published" numbers of this study.
Configuration fields that are fractions are integer percentages (``rho_pct=40``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from identrep.experiments.configs import StudyConfig
from identrep.experiments.registry import PlotSpec, ReportSpec, Study, register_study
from identrep.experiments.studies._lachapelle2023 import check_fields, seed_list
from identrep.experiments.studies._moran2022 import LATENTS_OPTION
from identrep.utils.seeding import derive_seed

__all__ = ["MORAN_MODELS", "RHO_PCTS", "VARIANTS", "SparseFactorConfig", "grid"]

#: Models compared (the paper's Figure 3 and the authors' script), in report order.
MORAN_MODELS = ("Sparse VAE", "VAE", "beta-VAE", "VSC")
#: Labelled variant rows (not rows of the paper), after the paper's rows:
#: ``VAE_KL1overK`` is a beta-VAE with beta = 1 / n_latents, the KL weight the
#: authors' code gives its VAE (it averages the KL over the latents; as the
#: real-data tables' variant of the same name, ``_moran2022.VARIANTS``).
VARIANTS = ("VAE_KL1overK",)
#: Factor correlations x100 of Figure 3.
RHO_PCTS = (0, 20, 40, 60, 80)
#: ``--quick``: two correlations, one seed, 30 epochs (minutes on 2 cores).
QUICK_RHO_PCTS = (0, 60)
QUICK_EPOCHS = 30
#: Shared architecture and optimiser of the three models (the Sparse VAE's
#: defaults; ``lr_schedule`` is taken from the SparseVAE class default).
SHARED = dict(
    hidden_sizes=(50, 50),
    activation="relu",
    decoder_var="learned",
    lr=1e-2,
    batch_size=100,
    patience=None,
    val_fraction=0.0,
)
BETA = 4.0
#: The Sparse VAE of the study: the paper's model with a learned prior correlation
#: of the factors (its Eq. 1; the paper's experiments fix Sigma = I) and per-feature
#: head rows of fixed norm (so a mask cannot shrink under the spike while its head
#: grows), fitted from SVAE_RESTARTS initialisations, keeping the fit with the
#: lowest training objective (training data only; docs/notes.md, branches
#: wt-svae-synth2 and wt-svae-synth3).
SVAE_SETTINGS = dict(prior_corr="learned", fix_head=True)
SVAE_RESTARTS = 4


@dataclass(frozen=True)
class SparseFactorConfig(StudyConfig):
    """One run: a correlation, a model and a seed.

    Attributes
    ----------
    table : str
    model : str
        One of :data:`MORAN_MODELS` or :data:`VARIANTS`.
    rho_pct : int
        Factor correlation x100 (0..95).
    n_train : int
        Training points (the paper: 1,000).
    n_eval : int
        Fresh points for DCI: half fit the regressors, half score them.
    n_latents : int
        Latents of every model (the true number is 2).
    max_epochs : int or None
        Epoch budget (None: 200, the paper's).
    seed : int
    """

    table: str = "moran2022_synthetic"
    model: str = "Sparse VAE"
    rho_pct: int = 0
    n_train: int = 1000
    n_eval: int = 2000
    n_latents: int = 2
    max_epochs: int | None = None
    seed: int = 0

    def __post_init__(self):
        self._check_model()
        check_fields(self, ("n_train", "n_eval", "n_latents"), ())
        if not isinstance(self.rho_pct, (int, np.integer)) or not (
            0 <= self.rho_pct <= 95
        ):
            raise ValueError(
                f"rho_pct must be an integer percentage in [0, 95]; got "
                f"{self.rho_pct!r}."
            )
        if self.n_eval < 4:
            raise ValueError(f"n_eval must be >= 4; got {self.n_eval}.")
        if self.max_epochs is not None and self.max_epochs < 1:
            raise ValueError(f"max_epochs must be >= 1 or None; got {self.max_epochs}.")

    def data_key(self) -> tuple:
        return (self.table, self.rho_pct, self.n_train, self.n_eval, self.seed)

    def model_seed(self) -> int:
        return derive_seed(
            "model", self.model, self.n_latents, self.max_epochs, *self.data_key()
        )

    def describe(self) -> str:
        return f"rho={self.rho_pct / 100:.1f}"

    @property
    def run_id(self) -> str:
        name = self.model.replace(" ", "")
        return f"{self.table}-{name}-r{self.rho_pct}-s{self.seed}-{self.digest()}"


def grid(
    seeds=10,
    quick: bool = False,
    models=(*MORAN_MODELS, *VARIANTS),
    rhos=None,
    n_latents: int | None = 2,
) -> list[SparseFactorConfig]:
    """One run per (model, rho, seed); ``quick``: rho in {0, 0.6}, one seed and
    :data:`QUICK_EPOCHS` epochs. ``n_latents`` None: 2, the true factor count
    (``--n-latents``; the authors' script's ``n_components`` flag defaults to 5)."""
    if n_latents is None:
        n_latents = 2
    if rhos is None:
        rhos = QUICK_RHO_PCTS if quick else RHO_PCTS
    seeds_ = seed_list(seeds)[:1] if quick else seed_list(seeds)
    return [
        SparseFactorConfig(
            model=m,
            rho_pct=int(r),
            n_latents=int(n_latents),
            max_epochs=QUICK_EPOCHS if quick else None,
            seed=s,
        )
        for m, r, s in itertools.product(models, rhos, seeds_)
    ]


@dataclass(frozen=True)
class FactorData:
    """Training data and the fresh evaluation sample of one configuration."""

    train: object
    test: object


def make_data(config: SparseFactorConfig) -> tuple[FactorData, int]:
    from identrep.datasets import make_sparse_factors

    seed = derive_seed("data", *config.data_key())
    rho = config.rho_pct / 100
    train = make_sparse_factors(config.n_train, rho=rho, random_state=seed)
    test = make_sparse_factors(
        config.n_eval, rho=rho, random_state=derive_seed("eval", seed)
    )
    return FactorData(train, test), seed


def _estimator(config: SparseFactorConfig, model_seed: int):
    from identrep.models.vae import VAE, VSC, BetaVAE, SparseVAE

    epochs = 200 if config.max_epochs is None else int(config.max_epochs)
    schedule = SparseVAE().lr_schedule
    kw = dict(SHARED, max_epochs=epochs, lr_schedule=schedule, random_state=model_seed)
    if config.model == "Sparse VAE":
        return SparseVAE(
            config.n_latents,
            max_epochs=epochs,
            n_restarts=SVAE_RESTARTS,
            random_state=model_seed,
            **SVAE_SETTINGS,
        )
    if config.model == "VAE":
        return VAE(config.n_latents, **kw)
    if config.model == "VSC":
        return VSC(config.n_latents, **kw)
    if config.model == "VAE_KL1overK":
        return BetaVAE(config.n_latents, beta=1.0 / config.n_latents, **kw)
    return BetaVAE(config.n_latents, beta=BETA, **kw)


def fit_and_score(config, data: FactorData, model_seed: int, artifacts=None) -> dict:
    """Fit on the training points; DCI on the fresh sample; support metrics for
    the Sparse VAE."""
    from identrep.metrics import (
        collapsed_rows,
        dci,
        feature_r2,
        match_latents,
        support_recovery,
    )

    model = _estimator(config, model_seed)
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(data.train.X)
    fit_seconds = time.perf_counter() - t0
    fit_cpu_seconds = time.process_time() - c0
    Z_hat = model.transform(data.test.X)
    half = config.n_eval // 2
    scores = dci(data.test.Z, Z_hat, n_test=half, random_state=0)
    recon = model.reconstruct(data.test.X)
    out = {
        "dci_d": scores["disentanglement"],
        "dci_c": scores["completeness"],
        "dci_i": scores["informativeness"],
        "mse": float(np.mean((recon - data.test.X) ** 2)),
        "min_feature_r2": float(feature_r2(data.test.X, recon).min()),
    }
    # the authors' Figure 3a: the model's forward pass, one draw of z per row
    draw = model.reconstruct(data.test.X, sample=True, random_state=0)
    out["mse_sampled"] = float(np.mean((draw - data.test.X) ** 2))
    if hasattr(model, "support_"):
        matching = match_latents(data.test.Z, Z_hat)
        sup = support_recovery(data.train.support, model.support_, matching=matching)
        out.update(
            support_f=sup["f_score"],
            exact_support=sup["exact"],
            empty_rows=float(sup["empty_rows"]),
            collapsed_rows=float(collapsed_rows(model.mask_)),
        )
    if hasattr(model, "restart_objectives_"):
        out["objective"] = float(np.min(model.restart_objectives_))
    out["fit_seconds"] = fit_seconds
    out["fit_cpu_seconds"] = fit_cpu_seconds
    return out


_NOTE = (
    "The paper shows the synthetic results as a figure (Figure 3b, DCI "
    "disentanglement against rho). The numbers beside ours are anchors measured "
    "on this machine with the authors' code (same generator, 10 seeds, DCI on "
    "2,000 points), not read off the figure; their std was not recorded (nan). "
    "The authors' Sparse VAE recovered the exact true support in 1 of 50 runs "
    "and zeroed a whole row of W in 9 of 50. VAE_KL1overK (not a row of the "
    "paper): the VAE with its KL weighed 1/K, K the number of latents, as the "
    "authors' code weighs it."
)


def _recorded_count(g, col: str) -> str:
    """Runs with ``col`` > 0 over the runs that recorded it ("-": none did)."""
    if col not in g or not g[col].notna().any():
        return "-"
    v = g[col].dropna()
    return f"{int((v > 0).sum())}/{len(v)}"


def _recorded_min(g, col: str) -> str:
    if col not in g or not g[col].notna().any():
        return "-"
    v = g[col].dropna()
    text = f"{v.min():.2f}"
    return text if len(v) == len(g) else f"{text} ({len(v)} of {len(g)} runs)"


def _paired(runs) -> str:
    """Per correlation: seeds where the Sparse VAE's DCI-D beats the VAE's (same
    data), its worst seed, its runs with an empty row of the support and with a
    collapsed row of W (over the runs that recorded it), its exact supports."""
    if not {"Sparse VAE", "VAE"} <= set(runs["model"]) or "dci_d" not in runs:
        return ""
    key = [k for k in ("rho_pct", "n_latents", "max_epochs", "seed") if k in runs]
    runs = runs.assign(**{k: runs[k].fillna(0) for k in key})
    svae = runs[runs["model"] == "Sparse VAE"].set_index(key)
    vae = runs[runs["model"] == "VAE"].set_index(key)["dci_d"]
    both = svae.join(vae.rename("vae_d"), how="inner")
    if not len(both):
        return ""
    lines = [
        "Paired by seed (same data): DCI-D of the Sparse VAE against the VAE, "
        "its worst seed, and Sparse VAE runs whose support has an empty row "
        "(a feature with no inclusion probability above 0.5), whose masks W have "
        "a collapsed row (a feature cut off from every latent: all |mask| at most "
        "5 % of the largest) or whose support is the exact true support; the "
        "worst feature's held-out R² over the seeds (- where not recorded).",
        "",
        "| rho_pct | paired seeds | Sparse VAE > VAE | Sparse VAE min DCI-D ×100 "
        "| runs with an empty row | runs with a collapsed row | min feature R² "
        "| exact support |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (rho, *_), g in both.groupby(level=key[:-1]):
        n = len(g)
        wins = int((g["dci_d"] > g["vae_d"]).sum())
        empty = int((g["empty_rows"] > 0).sum()) if "empty_rows" in g else 0
        exact = int((g["exact_support"] > 0).sum()) if "exact_support" in g else 0
        lines.append(
            f"| {int(rho)} | {n} | {wins}/{n} | {100 * g['dci_d'].min():.2f} "
            f"| {empty}/{n} | {_recorded_count(g, 'collapsed_rows')} "
            f"| {_recorded_min(g, 'min_feature_r2')} | {exact}/{n} |"
        )
    return "\n".join(lines)


def _intro(runs) -> str:
    text = "rho_pct: factor correlation x100. " + _NOTE
    if "max_epochs" in runs and runs["max_epochs"].notna().any():
        caps = sorted({int(e) for e in runs["max_epochs"].dropna()})
        text += (
            f" Quick run: {', '.join(map(str, caps))} epochs (paper: 200), "
            f"{runs['seed'].nunique()} seed(s); not comparable to the anchors."
        )
    paired = _paired(runs)
    return text + "\n\n" + paired if paired else text


STUDY = register_study(
    Study(
        name="moran2022_synthetic",
        title=(
            "Moran et al. (2022) Figure 3: DCI and support recovery on the "
            "7-feature sparse process, against the factor correlation"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={m: fit_and_score for m in (*MORAN_MODELS, *VARIANTS)},
        published="moran2022_synthetic_dci.csv",
        progress=(("dci_d", "DCI-D"),),
        options=(LATENTS_OPTION,),
        report=ReportSpec(
            columns=(
                "table",
                "model",
                "seed",
                "rho_pct",
                "n_train",
                "n_eval",
                "n_latents",
                "max_epochs",
            ),
            sort=("rho_pct",),
            group=("rho_pct", "n_latents", "max_epochs"),
            keys=("rho_pct",),
            metrics=(
                ("dci_d", "DCI-D", 100),
                ("dci_c", "DCI-C", 100),
                ("dci_i", "DCI-I (NRMSE)", 100),
                ("mse", "held-out MSE", 100),
                ("mse_sampled", "held-out MSE at a draw", 100),
                ("support_f", "support F", 100),
                ("exact_support", "exact support", 100),
                ("empty_rows", "empty rows", 1),
                ("collapsed_rows", "collapsed rows", 1),
                ("min_feature_r2", "min feature R²", 100),
                ("fit_seconds", "fit s", 1),
                ("fit_cpu_seconds", "fit CPU s", 1),
            ),
            compare=(("dci_d", None, "anchor DCI-D"),),
            main="dci_d",
            intro=_intro,
            footnote=(
                "DCI with gradient-boosted-tree importances, regressors fitted on "
                "half of a fresh sample and informativeness (normalised RMSE, 0 "
                "is perfect) on the other half. Support: the Sparse VAE's "
                "support_ (inclusion probability > 0.5) against the true 7 x 2 "
                "support, its columns matched to the factors through the latents "
                "(Hungarian on |correlation|); exact support as a percentage of "
                "seeds; empty rows: features assigned no factor; collapsed "
                "rows: features whose row of the masks W is cut (every |mask| "
                "at most 5 % of the largest), so that the decoder cannot "
                "reconstruct them; min feature R²: the held-out R² of the "
                "worst-reconstructed feature (a collapsed one has about 0; a "
                "fitted x1, a factor plus noise, about 1 / 1.25 = 0.8). Held-out "
                "MSE: "
                "mean squared error of the reconstruction (decoder mean at the "
                "posterior mean) of the fresh sample, in the units of x (the "
                "paper's Figure 3a); at a draw: the decoder mean at one draw "
                "of z from q(z | x) per row, the authors' Figure 3a code (a "
                "forward pass of the model). Fit s: wall seconds of the fit (all "
                "restarts); fit CPU s: CPU seconds of the fitting process (one "
                "thread; on a shared machine wall time is the larger). Std over "
                "seeds with ddof=0."
            ),
            plots=(
                PlotSpec(metrics=("dci_d",)),
                PlotSpec(metrics=("mse",)),
                PlotSpec(metrics=("mse_sampled",)),
                PlotSpec(metrics=("support_f",)),
            ),
        ),
        comparable=("n_train", "n_eval"),
    )
)
