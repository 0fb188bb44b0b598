"""Fit identrep on a user's table and apply a saved model to another one.

:func:`fit` reads and checks the table (:func:`~identrep.tabular.read.load_table`),
fits the two-stage method (MTRN then MTLCM) or MTLCM alone for one or more seeds,
and writes the output folder: ``latents.csv``, ``causal_map.csv``,
``causal_map.png``, ``model/`` and the report. :func:`transform` writes the latents
of a table under a saved model. Every file goes through :mod:`identrep.utils.io`
(atomically) or :func:`identrep.persistence.save_model`. Progress goes to stderr.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from identrep.exceptions import DataError
from identrep.tabular.read import load_inputs, load_table
from identrep.tabular.report import FitSummary, heatmap_png, render_report
from identrep.utils.io import (
    atomic_write_bytes,
    atomic_write_text,
    clean_leftovers,
    locked_dir,
    replace_dir,
)

#: What ``identrep fit`` writes into ``--out``; a folder holding anything else is
#: never replaced.
OUTPUTS = (
    "latents.csv",
    "causal_map.csv",
    "causal_map.png",
    "model",
    "report.md",
    "report.html",
)

__all__ = ["FitResult", "fit", "transform"]


def _log(msg: str, progress: bool = True) -> None:
    """A progress line on stderr (``identrep fit`` / ``transform``'s own)."""
    if progress:
        print(msg, file=sys.stderr, flush=True)


def _write_csv(path: Path, frame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False))


def _latent_frame(Z: np.ndarray, table_ids, id_col, rows=None):
    """``latents.csv``: the id column (else the ``row`` column, else nothing),
    then ``z0 .. z{K-1}``."""
    import pandas as pd

    cols = {}
    if id_col is not None and table_ids is not None:
        cols[id_col] = table_ids
    elif rows is not None:
        cols["row"] = rows
    for j in range(Z.shape[1]):
        cols[f"z{j}"] = Z[:, j]
    return pd.DataFrame(cols)


@dataclass
class FitResult:
    """What :func:`fit` produced.

    Attributes
    ----------
    model : TaskIdentifiable or MTLCM
        The model of the first seed (the one saved).
    latents : DataFrame
        Contents of ``latents.csv``.
    causal_map : DataFrame
        Contents of ``causal_map.csv``.
    cross_seed : dict or None
        :func:`identrep.metrics.cross_seed_mcc` of the latents across seeds.
    seconds : list of float
        Fit time of each seed.
    out : Path
    files : dict
        Name -> path of every written output.
    """

    model: Any
    latents: Any
    causal_map: Any
    cross_seed: dict | None
    seconds: list[float]
    out: Path
    files: dict[str, Path]


def _make_model(stage2_only, n_latents, seed, max_epochs, verbose, mtlcm_params):
    from identrep.models import MTLCM, TaskIdentifiable

    if stage2_only:
        return MTLCM(n_latents=n_latents, random_state=seed, **mtlcm_params)
    return TaskIdentifiable(
        n_latents=n_latents,
        mtrn_params={"max_epochs": int(max_epochs), "verbose": verbose},
        # MTLCM's own lines go to stdout: the CLI's stdout is its summary
        mtlcm_params={"verbose": False, **mtlcm_params},
        random_state=seed,
        verbose=verbose,
    )


def _check_out(out: Path) -> None:
    """Refuse an ``--out`` that is a file or a folder with files ``fit`` did not
    write, before any work (the whole folder is replaced at the end)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise DataError(
            f"--out {out} exists and is not a folder; give a new or empty folder, or "
            "the folder of an earlier `identrep fit`."
        )
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUTS)
        if foreign:
            raise DataError(
                f"--out {out} holds files `identrep fit` did not write "
                f"({', '.join(foreign[:5])}); they would be replaced with it. Give a "
                "new or empty folder, or the folder of an earlier `identrep fit`."
            )


def _check_positive(name: str, v, allow_none=False) -> None:
    if v is None and allow_none:
        return
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}.")


def _notes(table, n_latents, n_tasks, stage2_only, seeds) -> tuple[int, list[str]]:
    """The resolved ``n_latents`` and the notes for the log and the report.

    ``n_latents`` is checked against the features, the tasks and (for MTLCM
    alone) the within-task rank of the inputs here, before any fit.
    """
    from identrep.utils.validation import check_n_latents, within_task_rank

    notes = []
    if table.index_like:
        notes.append(
            f"Column(s) {table.index_like} number the rows (distinct integers in "
            "order) and were left out of the inputs; pass them with --features to "
            "use them."
        )
    if table.ignored:
        notes.append(
            f"Non-numeric column(s) left out of the inputs: {table.ignored[:10]}"
            + (" ..." if len(table.ignored) > 10 else "")
        )
    if table.n_dropped:
        notes.append(
            f"{table.n_dropped} row(s) without a target value were left out of the "
            "fit (they still get latents)."
        )
    p, n_obs = len(table.features), table.n_obs
    rank = None
    if stage2_only:  # MTLCM's latents span the inputs' within-task rank at most
        if table.layout == "wide":
            r, t = np.nonzero(table.Y.notna().to_numpy())
            Xo = table.X[r]
        else:
            Xo = table.X[table.obs_rows]
            t = np.unique(table.task_ids, return_inverse=True)[1]
        rank = within_task_rank(Xo, t)
    if n_latents is None:
        n_latents = rank if stage2_only else min(10, n_tasks, p)
        n_latents = max(int(n_latents), 1)
        notes.append(f"n_latents not given; using {n_latents}.")
    try:
        check_n_latents(
            n_latents, n_features=p, n_tasks=n_tasks, n_obs=n_obs, rank=rank, warn=False
        )
    except DataError as exc:
        raise DataError(f"{table.path}: {exc}") from None
    if n_latents > n_tasks:
        notes.append(
            f"n_latents={n_latents} exceeds the number of tasks ({n_tasks}): the "
            "identifiability results need at least n_latents tasks with linearly "
            "independent weights, so some latents may not be identified."
        )
    if stage2_only and seeds > 1:
        notes.append(
            "MTLCM's default start (joint diagonalisation from the identity) does "
            "not depend on the seed, so seeds usually agree exactly with "
            "--stage2-only."
        )
    return n_latents, notes


def fit(
    data: str | os.PathLike,
    *,
    target: str | list[str],
    out: str | os.PathLike,
    task_col: str | None = None,
    features: list[str] | None = None,
    id_col: str | None = None,
    n_latents: int | None = None,
    stage2_only: bool = False,
    seed: int = 0,
    seeds: int = 1,
    max_epochs: int = 1000,
    max_iter: int | None = None,
    n_init: int | None = None,
    progress: bool = True,
    command: str | None = None,
) -> FitResult:
    """Fit identrep on a table and write latents, causal map, model and report.

    Parameters
    ----------
    data : path-like
        CSV or Parquet file (see :mod:`identrep.tabular` for the layouts).
    target, task_col, features, id_col
        Columns, as in :func:`~identrep.tabular.read.load_table`.
    out : path-like
        Output folder (created; existing outputs are replaced).
    n_latents : int, optional
        Latent dimension K, checked against the features, the tasks and (with
        ``stage2_only``) the within-task rank of the inputs before any fit.
        Default: ``min(10, n_tasks, n_features)``; with ``stage2_only`` that
        rank (the number of features unless some are collinear).
    stage2_only : bool, default=False
        Fit MTLCM directly on the features (a linear mixing of the latents)
        instead of MTRN then MTLCM.
    seed : int, default=0
        Seed of the saved model; extra seeds are ``seed + 1, ...``.
    seeds : int, default=1
        Number of seeds; with 2 or more the report gives the cross-seed MCC of the
        latents (Pearson, Hungarian-matched, every pair), the stability measure
        of the paper's Table 3 for data without ground truth.
    max_epochs : int, default=1000
        Cap on MTRN epochs: early stopping on a 10% validation split (patience
        20) ends training first unless validation still improves at the cap
        (then the report carries a ConvergenceWarning).
    max_iter, n_init : int, optional
        MTLCM's L-BFGS iteration budget and number of restarts (default: MTLCM's);
        raise them when the report says the stage-2 fit did not converge.
    progress : bool, default=True
        Progress messages on stderr.
    command : str, optional
        The command line, quoted in the report.

    Returns
    -------
    FitResult

    Raises
    ------
    DataError
        Malformed data (the message names the file, column and row).
    """
    import pandas as pd

    from identrep._version import __version__
    from identrep.metrics import cross_seed_mcc
    from identrep.persistence import save_model

    _check_positive("n_latents", n_latents, allow_none=True)
    _check_positive("seeds", seeds)
    _check_positive("max_epochs", max_epochs)
    _check_positive("max_iter", max_iter, allow_none=True)
    _check_positive("n_init", n_init, allow_none=True)
    mtlcm_params = {
        k: int(v) for k, v in (("max_iter", max_iter), ("n_init", n_init)) if v
    }
    out = Path(out)
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked_dir(out.parent):
        clean_leftovers(out)  # of a fit killed before this one
    _log(f"Reading {data} ...", progress)
    table = load_table(
        data, target=target, task_col=task_col, features=features, id_col=id_col
    )
    n_tasks = len(table.tasks)
    _log(
        f"  {table.layout} layout: {table.n_rows} rows, {len(table.features)} "
        f"features, {n_tasks} tasks, {table.n_obs} observed targets",
        progress,
    )
    n_latents, notes = _notes(table, n_latents, n_tasks, stage2_only, seeds)
    for n in notes:
        _log(f"  note: {n}", progress)

    X, y, t = table.fit_args()  # X named: feature_names_in_ is saved in the model
    X_units = table.frame(table.unit_rows)
    what = "MTLCM" if stage2_only else "MTRN + MTLCM"
    models, seconds, latents, caught = [], [], [], []
    verbose = bool(progress)  # a bar on a terminal, plain lines in a log
    for s in range(seeds):
        _log(f"Fitting {what}, seed {seed + s} ({s + 1}/{seeds}) ...", progress)
        model = _make_model(
            stage2_only, n_latents, seed + s, max_epochs, verbose, mtlcm_params
        )
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                model.fit(X, y, task_ids=t)
            except DataError as exc:
                raise DataError(f"{table.path}: {exc}") from exc
        seconds.append(time.perf_counter() - t0)
        for item in w:
            msg = f"seed {seed + s}: {item.category.__name__}: {item.message}"
            caught.append(msg)
            _log(f"  warning: {msg}", progress)
        _log(f"  done in {seconds[-1]:.1f} s", progress)
        models.append(model)
        latents.append(model.transform(X_units))
    model = models[0]
    K = latents[0].shape[1]
    cross = cross_seed_mcc(latents, "pearson") if seeds > 1 else None
    if cross is not None:
        _log(
            f"  cross-seed MCC of the latents: {cross['mean']:.4f} +/- "
            f"{cross['std']:.4f} over {len(cross['pairs'])} pair(s)",
            progress,
        )

    lat = _latent_frame(
        latents[0],
        table.ids,
        table.id_col,
        rows=table.unit_rows if table.layout == "long" else None,
    )
    zcols = [f"z{j}" for j in range(K)]
    cmap = pd.DataFrame(model.causal_indicators_, columns=zcols)
    cmap.insert(0, "task", list(model.tasks_))

    _log(f"Writing outputs to {out} ...", progress)
    # every output goes to a fresh sibling folder, swapped in once at the end: a
    # crash leaves the previous outputs or the new ones, never a mix of the two
    _check_out(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes it private (0700)
        files = {
            "latents.csv": _write_csv(tmp / "latents.csv", lat),
            "causal_map.csv": _write_csv(tmp / "causal_map.csv", cmap),
        }
        png = heatmap_png(
            model.causal_indicators_,
            list(model.tasks_),
            f"Causal map ({what}, K={K}, seed {seed})",
        )
        if png is not None:
            files["causal_map.png"] = atomic_write_bytes(tmp / "causal_map.png", png)
        metadata = {
            "layout": table.layout,
            "features": table.features,
            "targets": table.targets,
            "task_col": table.task_col,
            "id_col": table.id_col,
            "data_file": str(table.path),
            "n_latents": int(K),
            "stage2_only": bool(stage2_only),
            "seed": int(seed),
            "max_epochs": None if stage2_only else int(max_epochs),
        }
        files["model"] = save_model(model, tmp / "model", metadata=metadata)
        summary = FitSummary(
            table=table,
            what=what,
            K=K,
            seed=seed,
            seeds=seeds,
            max_epochs=max_epochs,
            stage2_only=stage2_only,
            models=models,
            seconds=seconds,
            cross=cross,
            notes=notes,
            warnings=caught,
            png=png,
            command=command,
            version=__version__,
            latents=latents,
            fit_args=(X, y, t),
        )
        md, page = render_report(summary)
        files["report.md"] = atomic_write_text(tmp / "report.md", md)
        files["report.html"] = atomic_write_text(tmp / "report.html", page)
        with locked_dir(out.parent):
            replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    files = {name: out / name for name in files}
    _log("Wrote " + ", ".join(files) + f" in {out}.", progress)
    return FitResult(model, lat, cmap, cross, seconds, out, files)


def transform(
    model_path: str | os.PathLike,
    data_path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    progress: bool = False,
):
    """Apply a saved model to a table and write its latents as CSV.

    The model's input columns (saved by :func:`fit`) are read from the table by
    name. Rows are identified as in :func:`fit`: if the model was fitted on a long
    table and ``data_path`` has its task column, one row per distinct input (by
    the id column when present, else by feature values, with a ``row`` column);
    otherwise one row per data row. The id column is carried over when present.

    Parameters
    ----------
    model_path : path-like
        Folder written by :func:`identrep.persistence.save_model` (``OUT/model``).
    data_path : path-like
        CSV or Parquet file with the model's feature columns.
    out : path-like
        CSV file to write (atomically); an existing folder gets ``latents.csv``.

    Returns
    -------
    DataFrame
        The latents written.
    """
    from identrep.persistence import load_model, read_manifest

    manifest = read_manifest(model_path)
    meta = manifest.get("metadata") or {}
    _log(f"Loading model {model_path} ...", progress)
    model = load_model(model_path)
    X, ids, id_col, rows = load_inputs(
        data_path,
        features=meta.get("features") or manifest.get("feature_names"),
        n_features_in=model.n_features_in_,
        layout=meta.get("layout"),
        task_col=meta.get("task_col"),
        id_col=meta.get("id_col"),
    )
    names = getattr(model, "feature_names_in_", None)
    if names is not None:  # as fitted: named columns
        import pandas as pd

        X = pd.DataFrame(X, columns=list(names), copy=False)
    Z = model.transform(X)
    frame = _latent_frame(Z, ids, id_col, rows=rows)
    out = Path(out)
    if out.is_dir():
        out = out / "latents.csv"
    _write_csv(out, frame)
    _log(f"Wrote {len(frame)} rows x {Z.shape[1]} latents to {out}.", progress)
    return frame
