"""The VAE family: the plain VAE and the conditional VAEs with identifiable priors
(iVAE, MT-iVAE, iCaRL, MT-iCaRL)."""

from identrep.models.vae.icarl import ICaRL, MTICaRL
from identrep.models.vae.ivae import IVAE, MTIVAE, VAE

__all__ = ["IVAE", "MTIVAE", "VAE", "ICaRL", "MTICaRL"]
