"""Run ``identrep reproduce qm9`` with MTRN's per-epoch progress on stderr.

The study's runs are silent until a run ends; for a run of hours (training to early
stopping) this driver turns on MTRN's ``verbose`` progress (one line per epoch with
``IDENTREP_PROGRESS_SECONDS=0``) so the log shows the training and validation loss
of every epoch. Two options of its own, read before the study's arguments, set
MTRN's runtime: ``--device cuda`` (where the network trains; the record says which
in ``mtrn_device``) and ``--max-time S`` (a wall-clock budget for the training,
checked after every epoch; ``mtrn_stopped_on_time`` in the record). Neither is part
of the run's configuration, so records made on a GPU resume and report with the
study's own command. Everything else is the study's own code and CLI.

Usage (the issue 13 part 4 runs; docs/notes.md, "QM9: EGNN speed and training to
early stopping", and the GPU run of ``benchmarks/gpu_session.sh``)::

    IDENTREP_PROGRESS_SECONDS=0 OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/qm9_logged.py --n-molecules 30000 --latent-dims 8 \\
        --seeds 1 --max-epochs 300 --patience 5 --out /tmp/qm9_converged
    python benchmarks/qm9_logged.py --device cuda --max-time 300 \\
        --latent-dims 8 --seeds 2 --where seed=1 --max-epochs 30 --out /tmp/q
"""

from __future__ import annotations

import argparse
import sys

from identrep.cli import main
from identrep.experiments.studies import chen2024_qm9 as study

_pipeline = study._pipeline
_RUNTIME: dict = {"verbose": True}


def _runtime_pipeline(config, model_seed):
    pipe = _pipeline(config, model_seed)
    pipe.mtrn_params = {**pipe.mtrn_params, **_RUNTIME}
    return pipe


study._pipeline = _runtime_pipeline

if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-time", type=float, default=None)
    own, rest = ap.parse_known_args(sys.argv[1:])
    _RUNTIME.update(device=own.device, max_time=own.max_time)
    sys.exit(main(["reproduce", "qm9", "--no-progress", *rest]))
