"""Frozen run configurations: the base every study's configuration builds on, and
:class:`RunConfig`, the configuration of Chen et al.'s Tables 1-3."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from identrep.utils.seeding import derive_seed

__all__ = ["RunConfig", "StudyConfig"]

_MIXINGS = ("random", "orthogonal", "identity", "mlp", "none")


class StudyConfig:
    """Behaviour shared by the frozen run configurations of every study.

    A subclass is a frozen dataclass with at least the fields ``table`` (the
    study id in the registry), ``model`` (one of the study's models) and ``seed``
    (the seed index), and implements :meth:`model_seed` and :meth:`describe`.
    """

    def _check_model(self) -> None:
        """The model must be one the study declares (its one list of models)."""
        from identrep.experiments.registry import get_study

        models = get_study(self.table).models
        if self.model not in models:
            raise ValueError(f"model must be one of {models}; got {self.model!r}.")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def digest_fields(self) -> dict:
        """The fields the run id's digest covers: all of them, unless a study
        leaves out a field that added nothing where it sits at a default (so
        runs recorded before the field existed keep their ids)."""
        return self.to_dict()

    def digest(self) -> str:
        """8 hex digits of the configuration (part of the run id)."""
        text = json.dumps(self.digest_fields(), sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:8]

    def model_seed(self) -> int:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - every subclass defines it
        raise NotImplementedError


@dataclass(frozen=True)
class RunConfig(StudyConfig):
    """One run of a Chen et al. table: a data configuration, a model and a seed.

    Attributes
    ----------
    table : str
        Study id in the registry ("table1", ...).
    model : str
        One of the study's models (``get_study(table).models``): "MTLCM" (Table 2:
        MTRN then MTLCM) or a baseline "iVAE", "MT-iVAE", "iCaRL", "MT-iCaRL".
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
        the default of the study).
    mixing_source : {"reference", "seeded"}
        "reference" draws the d x d mixing matrix exactly as the authors' code does
        for seed index s (``torch.manual_seed(s); torch.randn(d, d)``), so the
        condition numbers, which bound the attainable MCC, are the paper's;
        "seeded" draws it from the configuration-derived numpy seed.
    baseline_materials : int, "all" or None
        Table 3 only: the materials the baselines train on (None: the study's
        subset, ``TABLE3_BASELINE_MATERIALS``).
    baseline_steps : int or None
        Table 3 only: the baselines' budget in optimiser steps, dealt out in
        epochs of ``baseline_steps / epochs`` steps (None: whole passes).

    ``baseline_materials`` and ``baseline_steps`` enter the record (and the run
    id's digest) only when set, so the run ids of the other runs are those they
    had before these fields existed.
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
    baseline_materials: int | str | None = None
    baseline_steps: int | None = None

    def __post_init__(self):
        if self.mixing_source not in ("reference", "seeded"):
            raise ValueError(
                "mixing_source must be 'reference' or 'seeded'; got "
                f"{self.mixing_source!r}."
            )
        if self.mixing not in _MIXINGS:
            raise ValueError(f"mixing must be one of {_MIXINGS}; got {self.mixing!r}.")
        self._check_model()
        for name in ("n_latents", "n_observed", "n_tasks", "n_samples", "n_init"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}.")
        if not 0 <= self.n_causal <= self.n_latents:
            raise ValueError(
                f"n_causal must lie in [0, n_latents={self.n_latents}]; "
                f"got {self.n_causal}."
            )
        self._check_baseline_budget()

    def _check_baseline_budget(self) -> None:
        m, steps = self.baseline_materials, self.baseline_steps
        if (m is not None or steps is not None) and self.table != "table3":
            raise ValueError(
                "baseline_materials and baseline_steps apply to table3 only; got "
                f"table={self.table!r}."
            )
        if (
            m is not None
            and m != "all"
            and (isinstance(m, bool) or not isinstance(m, int) or m < 1)
        ):
            raise ValueError(
                f"baseline_materials must be an int >= 1, 'all' or None; got {m!r}."
            )
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            raise ValueError(
                f"baseline_steps must be an int >= 1 or None; got {steps!r}."
            )

    def to_dict(self) -> dict:
        """The fields; the Table 3 baseline budget only when set (see above)."""
        out = dataclasses.asdict(self)
        for name in ("baseline_materials", "baseline_steps"):
            if out[name] is None:
                del out[name]
        return out

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

    def model_seed(self) -> int:
        """The model's seed: from the model, its restarts and the data."""
        return derive_seed("model", self.model, self.n_init, *self.data_key())

    def describe(self) -> str:
        return f"d={self.n_latents} k={self.n_causal} {self.mixing}"

    @property
    def run_id(self) -> str:
        """Readable, unique file stem of this run's record."""
        return (
            f"{self.table}-{self.model}-d{self.n_latents}-k{self.n_causal}"
            f"-p{self.n_observed}-{self.mixing}-s{self.seed}-{self.digest()}"
        )
