"""QM9 (Chen et al., 2024, Figure 3): EGNN-MTRN then MTLCM, agreement across seeds.

For every latent dimension d and seed, a run fits
:class:`~identrep.TaskIdentifiable` with an
:class:`~identrep.models.nn.egnn.EGNNExtractor` on the 12 standardised QM9 targets
(wide layout, one task per target, all molecules observed in every task, no split
as in the paper) and stores the standardised MTRN features and the MTLCM latents of
all molecules (``out/latents/<run_id>.npz``). With no ground truth, identifiability
is measured as agreement between seeds (reference section 5.3): for every pair of
seeds, the weak MCC (CCA, then Spearman) of the MTRN features and the strong
(Pearson) MCC of the MTLCM latents; mean and std over the pairs (the report's
cross-seed columns, as for Table 3).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from identrep.experiments.configs import StudyConfig
from identrep.experiments.io import atomic_path, latents_path
from identrep.experiments.registry import (
    Option,
    PlotSpec,
    ReportSpec,
    Study,
    register_study,
)
from identrep.experiments.studies._chen2024 import RealData
from identrep.utils.numerics import causal_mask, safe_scale
from identrep.utils.seeding import derive_seed

__all__ = ["QM9_DEFAULTS", "QM9Config", "grid"]

#: EGNN and training settings of a run (overridable through the grid).
#: hidden 32 and 3 layers (why: docs/notes.md, "EGNN width").
QM9_DEFAULTS = {
    "hidden": 32,
    "n_layers": 3,
    "n_rbf": 0,
    "batch_size": 128,
    "lr": 3e-3,
    "val_fraction": 0.1,
    "patience": None,
    "mtlcm_n_init": 1,
}

_DIMS = "5,6,7,8,9,10"


def _positive_int(value) -> bool:
    return (
        isinstance(value, (int, np.integer))
        and not isinstance(value, bool)
        and (value >= 1)
    )


@dataclass(frozen=True)
class QM9Config(StudyConfig):
    """One QM9 run: a latent dimension, a seed index, the molecules and budget.

    Attributes
    ----------
    n_latents : int
        MTRN feature width = MTLCM latents.
    seed : int
        Seed index; the model seed is derived from (n_latents, seed).
    n_molecules : int or None
        Random subset of this many molecules (drawn with ``data_seed``, the same
        for every run); None: all 130,831 (cost per molecule: docs/notes.md,
        "QM9 cost").
    data_seed : int
        Seeds the molecule subset.
    source : str
        ``"qm9pack"`` or a folder, passed to :func:`identrep.datasets.load_qm9`.
    max_epochs : int
        MTRN epochs (Adam with a cosine schedule; the parameters of the epoch with
        the lowest validation loss are kept). The paper trains 300 epochs on GPU.
    hidden, n_layers, n_rbf, batch_size, lr, val_fraction, patience
        EGNN and training settings (:data:`QM9_DEFAULTS`).
    mtlcm_n_init : int
        MTLCM fits from this many starts, keeping the highest likelihood
        (:class:`~identrep.MTLCM`'s ``n_init``; the first start is the one-start
        fit's). It enters the record and the run id's digest only when above 1,
        so runs of one start keep the ids they had before the field existed. The
        MTRN of a run does not depend on it (:attr:`mtrn_run_id`).
    """

    table: str = "qm9"
    model: str = "MTLCM"
    n_latents: int = 5
    seed: int = 0
    n_molecules: int | None = None
    data_seed: int = 0
    source: str = "qm9pack"
    max_epochs: int = 20
    hidden: int = 32
    n_layers: int = 3
    n_rbf: int = 0
    batch_size: int = 128
    lr: float = 3e-3
    val_fraction: float = 0.1
    patience: int | None = None
    mtlcm_n_init: int = 1

    def __post_init__(self):
        self._check_model()
        for name in (
            "n_latents",
            "max_epochs",
            "hidden",
            "n_layers",
            "batch_size",
            "mtlcm_n_init",
        ):
            if not _positive_int(getattr(self, name)):
                raise ValueError(
                    f"{name} must be a positive integer; got {getattr(self, name)!r}."
                )
        if self.patience is not None and not _positive_int(self.patience):
            raise ValueError(
                f"patience must be a positive integer or None; got {self.patience!r}."
            )
        if self.n_molecules is not None and not _positive_int(self.n_molecules):
            raise ValueError(
                "n_molecules must be a positive integer or None; got "
                f"{self.n_molecules!r}."
            )

    def to_dict(self) -> dict:
        """The fields; ``mtlcm_n_init`` only when above 1 (see above)."""
        out = dataclasses.asdict(self)
        if out["mtlcm_n_init"] == 1:
            del out["mtlcm_n_init"]
        return out

    def model_seed(self) -> int:
        return derive_seed("qm9", int(self.n_latents), int(self.seed))

    def describe(self) -> str:
        return f"d={self.n_latents} {self.n_molecules or 'all'} molecules"

    @property
    def run_id(self) -> str:
        return (
            f"{self.table}-{self.model}-d{self.n_latents:02d}-s{self.seed}"
            f"-{self.digest()}"
        )

    @property
    def mtrn_run_id(self) -> str:
        """The run id of this run's stage 1: that of the same run with one MTLCM
        start. Runs that differ only in ``mtlcm_n_init`` train the same MTRN to
        the same bits (its seed and settings are equal), so a training
        checkpoint named by it serves them all (``benchmarks/qm9_logged.py``)."""
        return dataclasses.replace(self, mtlcm_n_init=1).run_id


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(
            f"--latent-dims must be comma-separated integers, e.g. 5,6,7; got {text!r}."
        ) from None
    if not values:
        raise ValueError(f"--latent-dims must list at least one integer; got {text!r}.")
    return values


#: ``--quick``: one EGNN epoch over 2,000 molecules took about 11 s on a loaded
#: 2-core machine, so 1,000 molecules and 3 epochs keep the run in minutes.
QUICK_MOLECULES = 1000
QUICK_EPOCHS = 3


def grid(
    seeds: int | Sequence[int] = 5,
    quick: bool = False,
    models=("MTLCM",),
    latent_dims: Sequence[int] = (5, 6, 7, 8, 9, 10),
    n_molecules: int | None = None,
    max_epochs: int = 20,
    source: str | Path = "qm9pack",
    data_seed: int = 0,
    **overrides,
) -> list[QM9Config]:
    """One run per (model, latent dim, seed).

    ``seeds``: an int n means ``range(n)``, or distinct seed indices. ``quick``
    keeps the first latent dim and two seeds (the least that compares seeds),
    :data:`QUICK_MOLECULES` molecules (unless ``n_molecules`` is given) and at
    most :data:`QUICK_EPOCHS` epochs; the report states both. ``overrides``
    replace entries of :data:`QM9_DEFAULTS`.
    """
    unknown = sorted(set(overrides) - set(QM9_DEFAULTS))
    if unknown:
        raise ValueError(
            f"Unknown QM9 settings {unknown}; choose from {sorted(QM9_DEFAULTS)}."
        )
    dims = [int(d) for d in latent_dims]
    if not dims or any(d < 1 for d in dims) or len(set(dims)) != len(dims):
        raise ValueError(
            f"latent_dims must be distinct positive integers; got {latent_dims!r}."
        )
    seed_list = (
        list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    )
    if not seed_list or len(set(seed_list)) != len(seed_list):
        raise ValueError(
            f"seeds must be a positive int or distinct ints; got {seeds!r}."
        )
    if quick:  # minutes on 2 cores (benchmarks/bench_quick.py)
        dims, seed_list = dims[:1], seed_list[:2]
        n_molecules = QUICK_MOLECULES if n_molecules is None else n_molecules
        max_epochs = (
            min(max_epochs, QUICK_EPOCHS) if isinstance(max_epochs, int) else max_epochs
        )
    settings = {**QM9_DEFAULTS, **overrides}
    return [
        QM9Config(
            model=m,
            n_latents=d,
            seed=s,
            n_molecules=n_molecules,
            data_seed=int(data_seed),
            source=str(source),
            max_epochs=max_epochs,
            **settings,
        )
        for m in models
        for d in dims
        for s in seed_list
    ]


@functools.lru_cache(maxsize=1)
def _load(n_molecules: int | None, data_seed: int, source: str) -> RealData:
    """Inputs (flat molecule encoding) and standardised targets; cached, as every
    run of a sweep in one worker process uses the same molecules."""
    from identrep.datasets.qm9 import load_qm9

    data = load_qm9(n_molecules=n_molecules, random_state=data_seed, source=source)
    Y = data.Y
    mean = Y.mean(axis=0)
    Y = (Y - mean) / safe_scale(Y.std(axis=0), mean)
    return RealData(X=data.X, Y=Y)


def make_data(config: QM9Config):
    return _load(config.n_molecules, config.data_seed, config.source), config.data_seed


def _pipeline(config: QM9Config, model_seed: int):
    from identrep.models.multitask.pipeline import TaskIdentifiable
    from identrep.models.nn.egnn import EGNNExtractor

    extractor = functools.partial(
        EGNNExtractor.for_flat_input,
        hidden=config.hidden,
        n_layers=config.n_layers,
        n_rbf=config.n_rbf,
    )
    return TaskIdentifiable(
        n_latents=config.n_latents,
        mtrn_params={
            "extractor": extractor,
            "max_epochs": config.max_epochs,
            "batch_size": config.batch_size,
            "lr": config.lr,
            "val_fraction": config.val_fraction,
            "patience": config.patience,
        },
        mtlcm_params={"n_init": config.mtlcm_n_init},
        random_state=model_seed,
    )


def fit_mtlcm(config: QM9Config, data: RealData, model_seed: int, artifacts=None):
    """EGNN-MTRN then MTLCM; stores the standardised features and the latents."""
    from identrep.datasets.qm9 import QM9_TARGETS

    if artifacts is None:
        raise ValueError("qm9 runs need an artifacts folder for their latents.")
    X, Y = data.X, data.Y
    t0, c0 = time.perf_counter(), time.process_time()
    pipe = _pipeline(config, model_seed).fit(X, Y)
    fit_seconds = time.perf_counter() - t0
    fit_cpu_seconds = time.process_time() - c0
    F_raw = pipe.mtrn_.transform(X)
    F = (F_raw - pipe.feature_mean_) / pipe.feature_scale_
    Z = pipe.mtlcm_.transform(F)
    cpu_seconds = time.process_time() - c0
    pred = F_raw @ pipe.mtrn_.head_weights_.T + pipe.mtrn_.head_bias_
    r2 = 1.0 - ((pred - Y) ** 2).mean(axis=0) / Y.var(axis=0)
    with (
        atomic_path(latents_path(artifacts, config.run_id)) as tmp,
        open(tmp, "wb") as f,
    ):
        np.savez_compressed(
            f, features=F.astype(np.float32), latents=Z.astype(np.float32)
        )
    hist = pipe.mtrn_.history_
    mtrn_seconds = pipe.mtrn_.fit_seconds_
    n_epochs = int(hist["n_epochs"])
    return {
        "n_molecules_used": len(X),
        "mtrn_r2": float(r2.mean()),
        "mtrn_r2_per_target": dict(zip(QM9_TARGETS, map(float, r2), strict=True)),
        "mtrn_train_loss": float(hist["train_loss"][-1]),
        "mtrn_val_loss": float(hist["val_loss"][-1]) if hist["val_loss"] else None,
        "mtrn_best_epoch": int(hist["best_epoch"]) + 1,
        "mtrn_epochs": n_epochs,
        "mtrn_seconds": mtrn_seconds,
        "mtrn_seconds_per_epoch": mtrn_seconds / max(n_epochs, 1),
        # the training loop's wall time over every call of a resumed run
        "mtrn_train_seconds": float(hist["seconds"]),
        "mtrn_device": str(pipe.mtrn_.device_),
        "mtrn_stopped_on_time": bool(hist.get("stopped_on_time", False)),
        "mtlcm_seconds": pipe.mtlcm_.fit_seconds_,
        "log_likelihood": float(pipe.mtlcm_.log_likelihood_),
        "converged": bool(pipe.mtlcm_.converged_),
        "n_causal_found": float(causal_mask(pipe.causal_indicators_).sum(1).mean()),
        "causal_indicators": np.round(pipe.causal_indicators_, 4).tolist(),
        "fit_seconds": fit_seconds,
        "fit_cpu_seconds": fit_cpu_seconds,
        "cpu_seconds": cpu_seconds,
    }


def _intro(runs) -> str:
    """The settings line of the report, from the section's runs (results rows)."""

    def first(col):
        return runs[col].iloc[0] if col in runs.columns and len(runs) else "?"

    n_init = first("mtlcm_n_init")  # absent (NaN) in records of one start
    starts = (
        f" ({int(n_init)} starts, the highest likelihood kept)"
        if isinstance(n_init, (int, float, np.number)) and n_init > 1
        else ""
    )
    return (
        f"{first('n_molecules_used')} molecules, 12 standardised targets; EGNN "
        f"(hidden {first('hidden')}, {first('n_layers')} layers) MTRN, "
        f"{first('max_epochs')} epochs, then MTLCM{starts}. MCC x 100 between "
        "every pair of seeds (mean ± std over pairs, ddof=0). MTRN weak MCC: "
        "in-sample CCA of the two seeds' standardised MTRN features, then "
        "Spearman MCC of the "
        "canonical variates. Strong MCC: Pearson MCC of the MTLCM latents, no "
        "CCA. MTRN R²: in-sample, mean over the 12 targets and seeds."
    )


_COMPARABLE = tuple(
    f.name
    for f in fields(QM9Config)
    if f.name not in ("table", "model", "n_latents", "seed")
)

STUDY = register_study(
    Study(
        name="qm9",
        title="QM9: identifiability across seeds (Chen et al., 2024, Figure 3)",
        make_grid=grid,
        make_data=make_data,
        fits={"MTLCM": fit_mtlcm},
        published=None,
        published_note=(
            "The paper (Figure 3, full QM9, 300 epochs on GPU) gives no table: it "
            "reports MTLCM above 0.9 and close to the MTRN weak MCC up to 8 "
            "latents, declining beyond."
        ),
        options=(
            Option(
                "--latent-dims",
                "latent_dims",
                default=_DIMS,
                metavar="D1,D2",
                help=f"latent dimensions (default {_DIMS})",
                convert=_ints,
            ),
            Option(
                "--n-molecules",
                "n_molecules",
                type=int,
                help="random subset of molecules (default all 130,831)",
            ),
            Option(
                "--max-epochs",
                "max_epochs",
                default=20,
                type=int,
                help="MTRN epochs (paper: 300)",
            ),
            Option(
                "--patience",
                "patience",
                type=int,
                help="MTRN early-stopping patience in epochs (default none: "
                "train --max-epochs, keeping the best validation epoch)",
            ),
            Option(
                "--mtlcm-n-init",
                "mtlcm_n_init",
                default=1,
                type=int,
                help="MTLCM starts per run, the highest likelihood kept (default 1; "
                "the QM9 likelihood has competing optima: 20 reached the best in "
                "every seed on all molecules at d = 8, 4 CPU-s a fit; docs/results/"
                "qm9_gpu_full_d78/report.md)",
            ),
            Option(
                "--qm9-source",
                "source",
                default="qm9pack",
                help="'qm9pack' (pip install \"identrep[molecules]\") or a folder",
            ),
        ),
        progress=(("mtrn_r2", "MTRN R2"), ("mtrn_epochs", "epochs")),
        stores_latents=True,
        comparable=_COMPARABLE,
        report=ReportSpec(
            columns=tuple(f.name for f in fields(QM9Config)),
            sort=("n_latents",),
            group=("n_latents",),
            keys=("n_latents",),
            metrics=(
                ("cross_seed_weak_mcc", "MTRN weak MCC across seeds", 100),
                ("cross_seed_mcc", "strong MCC across seeds (latents)", 100),
                ("mtrn_r2", "MTRN R²", 100),
                ("mtrn_epochs", "MTRN epochs", 1),
                ("fit_seconds", "fit s", 1),
            ),
            main="cross_seed_mcc",
            intro=_intro,
            plots=(
                PlotSpec(
                    metrics=("cross_seed_weak_mcc", "cross_seed_mcc"),
                    ylabel="MCC between seeds",
                ),
            ),
            cross_seed=True,
        ),
    )
)
