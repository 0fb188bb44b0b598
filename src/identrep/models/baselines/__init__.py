"""Deprecated: the iVAE/iCaRL models now live in :mod:`identrep.models.vae`.

``identrep.models.baselines`` named a role, not a family (iVAE is a baseline in Chen
et al. and a primary model elsewhere). It re-exports the VAE family for one release
and will then be removed; import from ``identrep`` or ``identrep.models.vae``.
"""

import warnings

from identrep.models.vae import IVAE, MTIVAE, VAE, ICaRL, MTICaRL

warnings.warn(
    "identrep.models.baselines is deprecated and will be removed in the next release; "
    "import IVAE, MTIVAE, VAE, ICaRL and MTICaRL from identrep or "
    "identrep.models.vae instead.",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["IVAE", "MTIVAE", "VAE", "ICaRL", "MTICaRL"]
