"""Lachapelle et al. (ICML 2023), "Synergies between disentanglement and sparsity":
the identifiability study ``lachapelle2023`` (the frozen-representation
experiment of section 3 is its own study, ``lachapelle2023_frozen``). There is no
published table: the poster's numbers are quoted as a note.

``lachapelle2023``
    Identifiability from sparse multi-task learning: the pooled Pearson MCC of the
    learned representation against the true factors for the bilevel group-lasso
    learner, its inner-ridge version, inner-ridge + ICA (Ahuja et al., 2022) and
    MTRN / MTRN + MTLCM (Chen et al., 2024), along three one-factor sweeps from a
    base point (rho 0.9, noise 0.1, support probability 0.5):

    * ``correlation``: rho in {0, .25, .5, .75, .9, .99} (ICA needs rho = 0);
    * ``noise``: noise norm / signal norm in {0, .1, .5, 1, 2};
    * ``support``: support probability in {.25, .5, .75, .9, 1}; at 1 every task
      uses every factor, which breaks the sufficient-variability assumption
      (Assumption 5), so the sparsity no longer identifies the factors.

    On ``synthetic`` data (``make_sparse_tasks``, x = g(z)) or on rendered
    ``shapes`` images (:func:`~identrep.datasets.make_shapes_tasks`, with the
    authors' :class:`~identrep.models.nn.ConvEncoder`). For shapes, the MCC is
    also measured on fresh images with independent factors (``uniform_mcc``; the
    authors score the uniform 3D Shapes grid), where correlated factors cannot
    inflate it.

Configuration fields that are fractions are stored as integer percentages
(``rho_pct=90`` is rho = 0.9): the report prints key fields as integers.
"""

from __future__ import annotations

import inspect
import itertools
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from identrep.experiments.configs import StudyConfig
from identrep.experiments.registry import (
    Option,
    PlotSpec,
    ReportSpec,
    Study,
    register_study,
)
from identrep.experiments.studies._lachapelle2023 import check_fields, seed_list
from identrep.utils.seeding import derive_seed

__all__ = [
    "LACHAPELLE_MODELS",
    "SWEEPS",
    "SparseMTLConfig",
    "StudyData",
    "grid",
    "linear_r",
]

#: The learners compared, in report order.
LACHAPELLE_MODELS = ("group-lasso", "inner-ridge", "inner-ridge+ICA", "MTRN", "MTLCM")
#: The base point of every sweep (percent) and the values each sweep visits.
BASE = {"rho_pct": 90, "noise_pct": 10, "support_pct": 50}
SWEEPS = {
    "correlation": ("rho_pct", (0, 25, 50, 75, 90, 99)),
    "noise": ("noise_pct", (0, 10, 50, 100, 200)),
    "support": ("support_pct", (15, 25, 50, 75, 90, 100)),
}
_QUICK_SWEEPS = {
    "correlation": (0, 90, 99),
    "noise": (10, 100),
    "support": (15, 50, 100),
}
#: Tasks x samples per task of each data kind (full grid; quick: a fifth).
DATA_SIZES = {"synthetic": (500, 50), "shapes": (100, 50)}
#: Images with independent factors on which the shapes runs are also scored.
N_EVAL_SHAPES = 2000
#: Side of the rendered images (3D Shapes: 64; 32 is ~4x cheaper to encode on a
#: CPU, docs/notes.md "Bilevel sparse MTL").
SHAPES_IMAGE_SIZE = 32
#: the bilevel learners' regularisation: a fraction of lambda_max (authors: 0.3)
L1_REG = 0.3


# ---------------------------------------------------------------- configurations
@dataclass(frozen=True)
class SparseMTLConfig(StudyConfig):
    """One identifiability run: a data point of a sweep, a learner, a seed.

    Attributes
    ----------
    model : str
        One of :data:`LACHAPELLE_MODELS`.
    sweep : {"correlation", "noise", "support"}
        The sweep this run belongs to (a report section and a figure).
    data : {"synthetic", "shapes"}
    rho_pct : int
        Pairwise correlation of the factors x100 (0..99).
    noise_pct : int
        Noise norm over signal norm within a task, x100 (may exceed 100).
    support_pct : int
        Probability that a factor is in a task's support, x100 (1..100).
    n_latents : int
        Factors d (6 for shapes) = representation width.
    n_tasks, n_samples : int
        Tasks and samples per task.
    mixing : str or None
        ``mixing`` of ``make_sparse_tasks`` (synthetic only; None: its default).
    max_epochs : int or None
        Training budget of every learner (None: each estimator's default).
    image_size : int
        Side in pixels of the rendered images (shapes only).
    seed : int
        Seed index; data and model seeds derive from it and the configuration.
    """

    table: str = "lachapelle2023"
    model: str = "group-lasso"
    sweep: Literal["correlation", "noise", "support"] = "correlation"
    data: Literal["synthetic", "shapes"] = "synthetic"
    rho_pct: int = 90
    noise_pct: int = 10
    support_pct: int = 50
    n_latents: int = 6
    n_tasks: int = 500
    n_samples: int = 50
    mixing: str | None = None
    max_epochs: int | None = None
    image_size: int = SHAPES_IMAGE_SIZE
    seed: int = 0

    def __post_init__(self):
        self._check_model()
        if self.sweep not in SWEEPS:
            raise ValueError(
                f"sweep must be one of {tuple(SWEEPS)}; got {self.sweep!r}."
            )
        if self.data not in DATA_SIZES:
            raise ValueError(
                f"data must be one of {tuple(DATA_SIZES)}; got {self.data!r}."
            )
        check_fields(
            self, ("n_latents", "n_tasks", "n_samples", "image_size"), ("support_pct",)
        )
        if self.image_size % 16:
            raise ValueError(
                "image_size must be a multiple of 16 (the conv encoder halves it 4 "
                f"times); got {self.image_size!r}."
            )
        if not 0 <= self.rho_pct <= 99:
            raise ValueError(f"rho_pct must lie in [0, 99]; got {self.rho_pct!r}.")
        if self.noise_pct < 0 or self.support_pct < 1:
            raise ValueError(
                "noise_pct must be >= 0 and support_pct >= 1; got "
                f"{self.noise_pct!r}, {self.support_pct!r}."
            )
        if self.data == "shapes" and self.n_latents != 6:
            raise ValueError(
                f"shapes data have 6 factors; got n_latents={self.n_latents}."
            )
        if self.max_epochs is not None and self.max_epochs < 1:
            raise ValueError(f"max_epochs must be >= 1 or None; got {self.max_epochs}.")

    def data_key(self) -> tuple:
        """Fields that define the data (not the learner, nor the sweep it is in:
        the base point is the same data set in every sweep)."""
        return (
            self.table,
            self.data,
            self.rho_pct,
            self.noise_pct,
            self.support_pct,
            self.n_latents,
            self.n_tasks,
            self.n_samples,
            self.mixing,
            self.image_size if self.data == "shapes" else None,
            self.seed,
        )

    def model_seed(self) -> int:
        return derive_seed("model", self.model, self.max_epochs, *self.data_key())

    def describe(self) -> str:
        return (
            f"{self.data} rho={self.rho_pct / 100:.2f} noise={self.noise_pct / 100:.2f}"
            f" p={self.support_pct / 100:.2f}"
        )

    @property
    def run_id(self) -> str:
        return (
            f"{self.table}-{self.model}-{self.data}-{self.sweep}-r{self.rho_pct}"
            f"-n{self.noise_pct}-p{self.support_pct}-s{self.seed}-{self.digest()}"
        )


def _names(text, known, what: str) -> tuple[str, ...]:
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else text
    items = tuple(s for s in items if s)
    bad = [s for s in items if s not in known]
    if bad or not items:
        raise ValueError(
            f"{what} must be a comma-separated subset of {', '.join(known)}; "
            f"got {text!r}."
        )
    return items


def grid(
    seeds=5,
    quick: bool = False,
    models=LACHAPELLE_MODELS,
    data: str = "synthetic",
    sweeps="correlation,noise,support",
    max_epochs: int | None = None,
) -> list[SparseMTLConfig]:
    """One run per (model, data, sweep, sweep value, seed).

    ``data``: "synthetic", "shapes" or "both". ``quick``: one seed, fewer sweep
    values, a fifth of the tasks and at most 20 epochs.
    """
    kinds = (
        ("synthetic", "shapes")
        if data == "both"
        else _names(data, tuple(DATA_SIZES), "data")
    )
    chosen = _names(sweeps, tuple(SWEEPS), "sweeps")
    seeds_ = seed_list(seeds)[:1] if quick else seed_list(seeds)
    if quick:
        max_epochs = 20 if max_epochs is None else min(int(max_epochs), 20)
    configs = []
    for m, kind, sweep in itertools.product(models, kinds, chosen):
        field, values = SWEEPS[sweep]
        n_tasks, n_samples = DATA_SIZES[kind]
        for v, s in itertools.product(
            _QUICK_SWEEPS[sweep] if quick else values, seeds_
        ):
            configs.append(
                SparseMTLConfig(
                    model=m,
                    sweep=sweep,
                    data=kind,
                    **{**BASE, field: int(v)},
                    n_tasks=n_tasks // 5 if quick else n_tasks,
                    n_samples=n_samples,
                    max_epochs=max_epochs,
                    seed=s,
                )
            )
    return configs


# ---------------------------------------------------------------- data
@dataclass(frozen=True)
class StudyData:
    """Training tasks plus, for shapes, images with independent factors.

    Attributes
    ----------
    train : TaskData
    X_eval : ndarray of shape (n_eval, n_features) or None
    Z_eval : ndarray of shape (n_eval, n_latents) or None
    """

    train: object
    X_eval: np.ndarray | None = None
    Z_eval: np.ndarray | None = None


def make_data(config: SparseMTLConfig) -> tuple[StudyData, int]:
    """The tasks of a configuration (seeded from its data fields)."""
    seed = derive_seed("data", *config.data_key())
    rho, p = config.rho_pct / 100, config.support_pct / 100
    noise = config.noise_pct / 100
    if config.data == "shapes":
        from identrep.datasets import (
            make_shapes_tasks,
            render_shapes,
            sample_shapes_factors,
        )

        train = make_shapes_tasks(
            config.n_tasks,
            config.n_samples,
            rho=rho,
            support_prob=p,
            noise_ratio=noise,
            image_size=config.image_size,
            random_state=seed,
        )
        rng = np.random.default_rng(derive_seed("uniform-eval", seed))
        factors = sample_shapes_factors(N_EVAL_SHAPES, rho=0.0, random_state=rng)
        X_eval = render_shapes(factors, image_size=config.image_size)
        raw = train.params["factors"]  # standardised like the training factors
        Z_eval = (factors - raw.mean(axis=0)) / raw.std(axis=0)
        return StudyData(train, X_eval.reshape(N_EVAL_SHAPES, -1), Z_eval), seed
    from identrep.datasets import make_sparse_tasks

    extra = {} if config.mixing is None else {"mixing": config.mixing}
    train = make_sparse_tasks(
        config.n_tasks,
        config.n_samples,
        config.n_latents,
        correlation=rho,
        support_prob=p,
        noise_ratio=noise,
        random_state=seed,
        **extra,
    )
    return StudyData(train), seed


# ---------------------------------------------------------------- fit and score
def linear_r(Z: np.ndarray, Z_hat: np.ndarray) -> float:
    """The authors' "R" (linear identifiability): mean over true factors of
    sqrt(R^2) of the least-squares regression (with intercept) of the factor on
    the learned representation.

    Parameters
    ----------
    Z : ndarray of shape (n_samples, n_latents)
    Z_hat : ndarray of shape (n_samples, n_features)

    Returns
    -------
    float in [0, 1]
    """
    F = np.column_stack([Z_hat, np.ones(len(Z_hat))])
    coef = np.linalg.lstsq(F, Z, rcond=None)[0]
    resid = ((Z - F @ coef) ** 2).sum(axis=0)
    total = ((Z - Z.mean(axis=0)) ** 2).sum(axis=0)
    r2 = np.clip(1.0 - resid / np.maximum(total, 1e-300), 0.0, 1.0)
    return float(np.sqrt(r2).mean())


def _conv_extractor(p: int, d: int):
    """The authors' conv encoder for square RGB images of p = 3 s^2 values."""
    from identrep.models.nn.conv import ConvEncoder

    side = int(round((p / 3) ** 0.5))
    return ConvEncoder(d, image_shape=(side, side, 3))


def _kwargs_for(cls, **settings) -> dict:
    """The study's optional settings that ``cls`` declares (None: left out).

    ``extractor`` is never dropped silently: a learner that cannot take the
    conv encoder cannot run on images.
    """
    accepted = inspect.signature(cls.__init__).parameters
    out = {}
    for name, value in settings.items():
        if value is None:
            continue
        if name not in accepted:
            if name == "extractor":
                raise TypeError(
                    f"{cls.__name__} takes no 'extractor'; it cannot run on images."
                )
            continue
        out[name] = value
    return out


#: BilevelSparseMTL's training defaults, given to the inner-ridge MTRN so the two
#: learners differ only in their heads.
_BILEVEL_TRAINING = dict(
    activation="leaky_relu",
    lr=1e-3,
    lr_schedule=None,
    batch_size=400,
    patience=None,
    val_fraction=0.0,
    standardize_targets="pooled",
)


def _estimator(config: SparseMTLConfig, model_seed: int):
    """The unfitted learner of a configuration (classes imported lazily)."""
    settings = dict(
        max_epochs=config.max_epochs,
        extractor=_conv_extractor if config.data == "shapes" else None,
    )
    d = config.n_latents
    if config.model == "group-lasso":
        from identrep.models.multitask.bilevel import BilevelSparseMTL

        kw = _kwargs_for(BilevelSparseMTL, **settings)
        return BilevelSparseMTL(d, l1_reg=L1_REG, random_state=model_seed, **kw)
    if config.model == "inner-ridge":
        # the bilevel learner's training with closed-form ridge heads instead
        from identrep.models.multitask.mtrn import MTRN

        kw = {**_BILEVEL_TRAINING, **_kwargs_for(MTRN, **settings)}
        return MTRN(d, heads="ridge", random_state=model_seed, **kw)
    if config.model == "inner-ridge+ICA":
        from identrep.models.multitask.ridge_ica import RidgeICA

        kw = _kwargs_for(RidgeICA, **settings)
        return RidgeICA(d, random_state=model_seed, **kw)
    from identrep.models.multitask.mtrn import MTRN

    mtrn = _kwargs_for(MTRN, **settings)
    if config.model == "MTRN":
        return MTRN(d, random_state=model_seed, **mtrn)
    from identrep.models.multitask.pipeline import TaskIdentifiable

    return TaskIdentifiable(d, mtrn_params=mtrn, random_state=model_seed)


def score_representation(Z, Z_hat, prefix: str = "") -> dict:
    """Pearson MCC (the authors' metric), Spearman MCC and the linear "R"."""
    from identrep.metrics import mcc

    return {
        f"{prefix}mcc": mcc(Z, Z_hat, "pearson"),
        f"{prefix}mcc_spearman": mcc(Z, Z_hat, "spearman"),
        f"{prefix}r_linear": linear_r(Z, Z_hat),
    }


def fit_learner(
    config: SparseMTLConfig, data: StudyData, model_seed: int, artifacts=None
):
    """Fit a learner on the training tasks; score its representation of the
    training inputs (and, for shapes, of images with independent factors)."""
    train = data.train
    model = _estimator(config, model_seed)
    t0 = time.perf_counter()
    model.fit(train.X, train.y, task_ids=train.task_ids)
    fit_seconds = time.perf_counter() - t0
    metrics = score_representation(train.Z, model.transform(train.X))
    if data.X_eval is not None:
        metrics.update(
            score_representation(data.Z_eval, model.transform(data.X_eval), "uniform_")
        )
    metrics["fit_seconds"] = fit_seconds
    return metrics


_NOTE = (
    "No table: the poster reports, on 3D Shapes with correlation 0.9 between "
    "all latents, a Pearson MCC of 0.96 for the bilevel group-lasso learner "
    "(inner Lasso, l1reg 0.3 x lambda_max), and that inner-Ridge + ICA "
    "(Ahuja et al., 2022) assumes independent latents, so it should degrade as "
    "the correlation grows. The theory predicts the group-lasso learner to "
    "degrade when every task uses every factor (support probability 1)."
)

STUDY = register_study(
    Study(
        name="lachapelle2023",
        title=(
            "Lachapelle et al. (2023): MCC of sparse multi-task learners against "
            "correlation, noise and support density"
        ),
        make_grid=grid,
        make_data=make_data,
        fits={m: fit_learner for m in LACHAPELLE_MODELS},
        published_note=_NOTE,
        options=(
            Option(
                "--sparse-data",
                "data",
                default="synthetic",
                choices=("synthetic", "shapes", "both"),
                help="lachapelle2023: make_sparse_tasks data, rendered 3D-shapes "
                "images (conv encoder), or both",
            ),
            Option(
                "--sweeps",
                "sweeps",
                default="correlation,noise,support",
                metavar="S1,S2",
                help="lachapelle2023: which one-factor sweeps to run",
            ),
            Option(
                "--learner-epochs",
                "max_epochs",
                type=int,
                help="lachapelle2023: epoch budget of every learner "
                "(default: each estimator's own)",
            ),
        ),
        progress=(("mcc", "MCC"), ("r_linear", "R")),
        report=ReportSpec(
            columns=(
                "table",
                "model",
                "seed",
                "data",
                "sweep",
                "rho_pct",
                "noise_pct",
                "support_pct",
                "n_latents",
                "n_tasks",
                "n_samples",
                "max_epochs",
            ),
            sort=("data", "sweep", "rho_pct", "noise_pct", "support_pct"),
            group=("data", "sweep", "rho_pct", "noise_pct", "support_pct"),
            keys=("rho_pct", "noise_pct", "support_pct"),
            sections=("data", "sweep"),
            heading=lambda s: f", {s['data']} data, {s['sweep']} sweep",
            intro=(
                "rho_pct, noise_pct, support_pct: factor correlation, noise/signal "
                "norm ratio and support probability, x100."
            ),
            metrics=(
                ("mcc", "MCC (Pearson)", 100),
                ("mcc_spearman", "MCC (Spearman)", 100),
                ("r_linear", "R (linear)", 100),
                ("uniform_mcc", "MCC, independent factors", 100),
                ("fit_seconds", "fit s", 1),
            ),
            main="mcc",
            footnote=(
                "MCC: one Hungarian matching of |correlation| between the true "
                "factors and the learned representation over all training inputs "
                "(pooled). R: mean over factors of sqrt(R^2) of a linear "
                "regression of the factor on the representation (linear "
                "identifiability). 'independent factors': the same learner on "
                f"{N_EVAL_SHAPES} fresh images with rho = 0 (shapes data only). "
                "Std over seeds with ddof=0."
            ),
            plots=(
                PlotSpec(metrics=("mcc",), by=("data", "sweep")),
                PlotSpec(metrics=("uniform_mcc",), by=("data", "sweep")),
            ),
        ),
        comparable=("n_tasks", "n_samples", "max_epochs"),
    )
)
