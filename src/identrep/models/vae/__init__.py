"""The VAE family: the plain VAE, the beta-VAE, the Sparse VAE, variational sparse
coding (VSC), the OI-VAE and the conditional VAEs with identifiable priors (iVAE,
MT-iVAE, iCaRL, MT-iCaRL).

Layers: pure ELBO terms in ``_elbo`` (and ``_icarl_loss``, ``_score_matching``),
``nn.Module``s in :mod:`identrep.models.nn.vae` and :mod:`identrep.models.nn.icarl`,
estimators on the base classes ``_base.BaseVAE`` (unconditional) and
``_conditional.ConditionalVAEEstimator`` (u = target and/or task).
"""

from identrep.models.vae.beta_vae import BetaVAE
from identrep.models.vae.icarl import ICaRL, MTICaRL
from identrep.models.vae.ivae import IVAE, MTIVAE
from identrep.models.vae.oivae import OIVAE
from identrep.models.vae.sparse_vae import SparseVAE
from identrep.models.vae.vae import VAE
from identrep.models.vae.vsc import VSC

__all__ = [
    "IVAE",
    "MTIVAE",
    "VAE",
    "BetaVAE",
    "ICaRL",
    "MTICaRL",
    "SparseVAE",
    "VSC",
    "OIVAE",
]
