"""identrep models, by family: :mod:`~identrep.models.multitask` (MTRN, MTLCM, the
two-stage pipeline), :mod:`~identrep.models.vae` (VAE, iVAE, iCaRL and their
multi-task versions) and :mod:`~identrep.models.nn` (the torch modules they share)."""

from identrep.models.multitask import MTLCM, MTRN, TaskIdentifiable
from identrep.models.vae import IVAE, MTIVAE, VAE, ICaRL, MTICaRL

__all__ = [
    "IVAE",
    "MTIVAE",
    "MTLCM",
    "MTRN",
    "VAE",
    "ICaRL",
    "MTICaRL",
    "TaskIdentifiable",
]
