"""Frozen run configurations for the paper tables."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Literal

_MIXINGS = ("random", "orthogonal", "identity", "mlp", "none")
BASELINES = ("iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL")
MODELS = ("MTLCM", *BASELINES)


@dataclass(frozen=True)
class RunConfig:
    """One run of a paper table: a data configuration, a model and a seed index.

    Attributes
    ----------
    table : str
        Registry id ("table1", ...).
    model : str
        Model name as in the paper's rows: "MTLCM" (Table 2: MTRN then MTLCM) or
        a baseline "iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL".
    n_latents, n_causal, n_observed : int
        Latent dimension d, causal latents per task k, observed dimension p.
    n_tasks, n_samples : int
        Tasks and samples per task.
    mixing : {"random", "orthogonal", "identity", "mlp", "none"}
        "none" for real data (no known mixing).
    seed : int
        Seed index (0, 1, ...). The data and model seeds are derived from it and
        the rest of the configuration, never from the order runs execute in.
    n_init : int
        Restarts of the model.
    heads : str or None
        MTRN head solver for the non-linear tables (None: the library default).
    max_epochs : int or None
        Epoch budget of the trained network (MTRN, or the baseline's VAE; None:
        the default of the table, see ``identrep.experiments.runner``).
    mixing_source : {"reference", "seeded"}
        "reference" draws the d x d mixing matrix exactly as the authors' code does
        for seed index s (``torch.manual_seed(s); torch.randn(d, d)``), so the
        condition numbers, which bound the attainable MCC, are the paper's;
        "seeded" draws it from the configuration-derived numpy seed.
    """

    table: str
    model: str = "MTLCM"
    n_latents: int = 10
    n_causal: int = 2
    n_observed: int = 10
    n_tasks: int = 200
    n_samples: int = 100
    mixing: Literal["random", "orthogonal", "identity", "mlp", "none"] = "random"
    seed: int = 0
    n_init: int = 1
    mixing_source: Literal["reference", "seeded"] = "reference"
    heads: str | None = None
    max_epochs: int | None = None

    def __post_init__(self):
        if self.mixing_source not in ("reference", "seeded"):
            raise ValueError(
                "mixing_source must be 'reference' or 'seeded'; got "
                f"{self.mixing_source!r}."
            )
        if self.mixing not in _MIXINGS:
            raise ValueError(f"mixing must be one of {_MIXINGS}; got {self.mixing!r}.")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}; got {self.model!r}.")
        for name in ("n_latents", "n_observed", "n_tasks", "n_samples", "n_init"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}.")
        if not 0 <= self.n_causal <= self.n_latents:
            raise ValueError(
                f"n_causal must lie in [0, n_latents={self.n_latents}]; "
                f"got {self.n_causal}."
            )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def data_key(self) -> tuple:
        """Fields that define the data (the model and its settings excluded)."""
        return (
            self.table,
            self.n_latents,
            self.n_causal,
            self.n_observed,
            self.n_tasks,
            self.n_samples,
            self.mixing,
            self.mixing_source,
            self.seed,
        )

    @property
    def run_id(self) -> str:
        """Readable, unique file stem of this run's record."""
        digest = hashlib.sha1(
            json.dumps(self.to_dict(), sort_keys=True).encode()
        ).hexdigest()[:8]
        return (
            f"{self.table}-{self.model}-d{self.n_latents}-k{self.n_causal}"
            f"-p{self.n_observed}-{self.mixing}-s{self.seed}-{digest}"
        )
