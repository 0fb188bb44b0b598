"""Run ``identrep reproduce qm9`` with MTRN's per-epoch progress on stderr.

The study's runs are silent until a run ends; for a run of hours (training to early
stopping) this driver turns on MTRN's ``verbose`` progress (one line per epoch with
``IDENTREP_PROGRESS_SECONDS=0``) so the log shows the training and validation loss
of every epoch. Everything else is the study's own code and CLI.

Usage (the issue 13 part 4 run; docs/notes.md, "QM9: EGNN speed and training to
early stopping")::

    IDENTREP_PROGRESS_SECONDS=0 OMP_NUM_THREADS=1 PYTHONPATH=src \\
        python benchmarks/qm9_logged.py --n-molecules 30000 --latent-dims 8 \\
        --seeds 1 --max-epochs 300 --patience 5 --out /tmp/qm9_converged
"""

from __future__ import annotations

import sys

from identrep.cli import main
from identrep.experiments.studies import chen2024_qm9 as study

_pipeline = study._pipeline


def _verbose_pipeline(config, model_seed):
    pipe = _pipeline(config, model_seed)
    pipe.mtrn_params = {**pipe.mtrn_params, "verbose": True}
    return pipe


study._pipeline = _verbose_pipeline

if __name__ == "__main__":
    sys.exit(main(["reproduce", "qm9", "--no-progress", *sys.argv[1:]]))
