"""identrep models, by family: :mod:`~identrep.models.multitask` (MTRN, MTLCM, the
two-stage pipeline), :mod:`~identrep.models.vae` (VAE, beta-VAE, Sparse VAE,
iVAE, iCaRL and their multi-task versions) and :mod:`~identrep.models.nn` (the torch
modules they share)."""

from identrep.models.decomposition import LDA, NMF
from identrep.models.multitask import (
    MTLCM,
    MTRN,
    BilevelSparseMTL,
    RidgeICA,
    TaskIdentifiable,
)
from identrep.models.vae import (
    IVAE,
    MTIVAE,
    OIVAE,
    VAE,
    VSC,
    BetaVAE,
    ICaRL,
    MTICaRL,
    SparseVAE,
)

__all__ = [
    "BetaVAE",
    "BilevelSparseMTL",
    "IVAE",
    "MTIVAE",
    "MTLCM",
    "MTRN",
    "SparseVAE",
    "VAE",
    "ICaRL",
    "MTICaRL",
    "RidgeICA",
    "TaskIdentifiable",
    "LDA",
    "NMF",
    "VSC",
    "OIVAE",
]
