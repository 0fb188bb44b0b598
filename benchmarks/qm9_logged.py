"""Run ``identrep reproduce qm9`` with MTRN's per-epoch progress on stderr.

The study's runs are silent until a run ends; for a run of hours (training to early
stopping) this driver turns on MTRN's ``verbose`` progress (one line per epoch with
``IDENTREP_PROGRESS_SECONDS=0``) so the log shows the training and validation loss
of every epoch. Options of its own, read before the study's arguments, set MTRN's
runtime: ``--device cuda`` (where the network trains; the record says which in
``mtrn_device``), ``--max-time S`` (a wall-clock budget for the training, checked
after every epoch; ``mtrn_stopped_on_time`` in the record) and ``--checkpoint-dir
DIR`` (training that survives interruptions, below). None is part of the run's
configuration, so records made on a GPU resume and report with the study's own
command. Everything else is the study's own code and CLI.

With ``--checkpoint-dir DIR`` every run's MTRN saves its training after every epoch
in ``DIR/<run_id>.mtrn.ckpt`` (:func:`identrep.training.fit_module`) and continues
from that file when it exists. The file is named by the run's stage 1
(``QM9Config.mtrn_run_id``, the run id with one MTLCM start), so a run with
``--mtlcm-n-init N`` reuses the finished MTRN of the one-start run and only fits
MTLCM. A run whose training ``--max-time`` ends is then
*paused*: it writes no record (so the study runs it again next time) and skips
MTLCM; the driver prints where it stopped and exits with status 75 (the sweep ends
there: runs after it start next time, so give each run its own process, as
``gpu_session.sh`` does). The same command, later, in another process or on another
machine with DIR copied over, continues it to the same bits as a run never stopped
(the cosine schedule then follows the epochs of ``--max-epochs``, not the time
budget).
A checkpoint written with other settings, another seed or other molecules is
refused with a message naming the difference (no record is written either).

``--cuda-graphs`` trains inside :func:`identrep.training.cuda_graphs` (every
full batch's step replayed from one recorded CUDA graph; the capturable optimiser,
so not the same bits as a run without it; a checkpoint says which it was written
with and refuses the other).

Usage (the issue 13 part 4 runs; docs/notes.md, "QM9: EGNN speed and training to
early stopping", "Checkpoint and resume for long training", and the GPU run of
``benchmarks/gpu_session.sh``)::

    IDENTREP_PROGRESS_SECONDS=0 OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/qm9_logged.py --n-molecules 30000 --latent-dims 8 \\
        --seeds 1 --max-epochs 300 --patience 5 --out /tmp/qm9_converged
    python benchmarks/qm9_logged.py --device cuda --max-time 300 \\
        --latent-dims 8 --seeds 2 --where seed=1 --max-epochs 30 --out /tmp/q
    # one session of a long run; repeat the same command until it exits 0
    python benchmarks/qm9_logged.py --device cuda --max-time 600 \\
        --checkpoint-dir runs/qm9_ckpt --latent-dims 8 --seeds 1 \\
        --max-epochs 300 --patience 20 --out runs/qm9_full
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from identrep.cli import main
from identrep.exceptions import CheckpointError
from identrep.experiments.studies import chen2024_qm9 as study
from identrep.models.multitask.mtrn import MTRN
from identrep.training import cuda_graphs

_pipeline = study._pipeline
_fit_mtlcm = study.STUDY.fits["MTLCM"]
_RUNTIME: dict = {"verbose": True}
_CHECKPOINT_DIR: list[Path] = []
_PAUSED: list[str] = []
EXIT_PAUSED = 75  # EX_TEMPFAIL: run the same command again to continue


class TrainingPaused(Exception):
    """A run's MTRN stopped on time (or met a foreign checkpoint): no record.

    Not a ValueError/RuntimeError, so the sweep writes no failed record for it."""


def _runtime_pipeline(config, model_seed):
    pipe = _pipeline(config, model_seed)
    extra = dict(_RUNTIME)
    if _CHECKPOINT_DIR:
        # named by the stage-1 run: runs that differ only in MTLCM's starts
        # (--mtlcm-n-init) share the MTRN, and a finished one returns at once
        name = f"{config.mtrn_run_id}.mtrn.ckpt"
        extra["checkpoint"] = str(_CHECKPOINT_DIR[0] / name)
    pipe.mtrn_params = {**pipe.mtrn_params, **extra}
    return pipe


_mtrn_fit = MTRN.fit


def _pausing_fit(self, *args, **kwargs):
    """MTRN.fit that pauses a checkpointed run stopped on time (before MTLCM)."""
    try:
        _mtrn_fit(self, *args, **kwargs)
    except CheckpointError as exc:
        raise TrainingPaused(str(exc)) from exc
    hist = self.history_
    if self.checkpoint is not None and hist["stopped_on_time"]:
        raise TrainingPaused(
            f"paused after epoch {hist['n_epochs']} of at most {self.max_epochs} "
            f"(best {hist['best_epoch'] + 1}, validation loss "
            f"{hist['val_loss'][-1]:.6g}, {hist['seconds']:.0f} s of training in "
            f"all); checkpoint {self.checkpoint}"
        )
    return self


def _fit_or_pause(config, data, model_seed, artifacts=None):
    try:
        return _fit_mtlcm(config, data, model_seed, artifacts)
    except TrainingPaused as exc:
        _PAUSED.append(f"{config.run_id}: {exc}")
        print(f"[qm9_logged] {config.run_id}: {exc}", file=sys.stderr, flush=True)
        raise


study._pipeline = _runtime_pipeline

if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-time", type=float, default=None)
    ap.add_argument("--checkpoint-dir", type=Path, default=None)
    ap.add_argument("--cuda-graphs", action="store_true")
    own, rest = ap.parse_known_args(sys.argv[1:])
    _RUNTIME.update(device=own.device, max_time=own.max_time)
    if own.checkpoint_dir is not None:
        own.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        _CHECKPOINT_DIR.append(own.checkpoint_dir.resolve())
        MTRN.fit = _pausing_fit
        study.STUDY.fits["MTLCM"] = _fit_or_pause
    if own.cuda_graphs:
        _plain_fit = MTRN.fit

        def _graphed_fit(self, *args, **kwargs):
            with cuda_graphs():
                return _plain_fit(self, *args, **kwargs)

        MTRN.fit = _graphed_fit
    try:
        code = main(["reproduce", "qm9", "--no-progress", *rest])
    except TrainingPaused:
        print(
            "[qm9_logged] paused; run the same command again to continue:\n  "
            + "\n  ".join(_PAUSED),
            file=sys.stderr,
        )
        sys.exit(EXIT_PAUSED)
    sys.exit(code)
