"""Baseline models from the papers Chen et al. (2024) compare against."""

from identrep.models.baselines.icarl import ICaRL, MTICaRL
from identrep.models.baselines.ivae import IVAE, MTIVAE, VAE

__all__ = ["IVAE", "MTIVAE", "VAE", "ICaRL", "MTICaRL"]
