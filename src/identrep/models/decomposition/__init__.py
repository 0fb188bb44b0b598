"""Linear matrix decompositions behind the estimator contract: NMF and LDA.

Both wrap scikit-learn (``sklearn.decomposition``) and add what the VAE family
offers: declared hyperparameters, ``n_latents``, identrep's input checks and errors,
sparse input, and a held-out negative log-likelihood (``heldout_nll``; ``score`` is
its negative) computed by :func:`identrep.metrics.reconstruction_nll`.
"""

from identrep.models.decomposition.lda import LDA
from identrep.models.decomposition.nmf import NMF

__all__ = ["LDA", "NMF"]
