"""torch ``nn.Module`` building blocks. ``forward`` returns parameters or
features, never losses."""

from identrep.models.nn.egnn import EGNNExtractor, EGNNLayer
from identrep.models.nn.mlp import MLP, MultiTaskNet, Standardize

__all__ = ["EGNNExtractor", "EGNNLayer", "MLP", "MultiTaskNet", "Standardize"]
# the VAE family's modules
from identrep.models.nn.icarl import ExpFamPrior, ICaRLModule  # noqa: E402
from identrep.models.nn.vae import (  # noqa: E402
    ConditionalPrior,
    ConditionalVAE,
    Conditioner,
    GaussianDecoder,
    GaussianEncoder,
)

__all__ += ["ConditionalPrior", "ConditionalVAE", "Conditioner", "GaussianDecoder"]
__all__ += ["GaussianEncoder", "ExpFamPrior", "ICaRLModule"]
# image encoders
from identrep.models.nn.conv import ConvEncoder  # noqa: E402

__all__ += ["ConvEncoder"]

# the Sparse VAE's modules
from identrep.models.nn.sparse_vae import (  # noqa: E402
    MaskedFeatureDecoder,
    SparseVAEModule,
)

__all__ += ["MaskedFeatureDecoder", "SparseVAEModule"]

# free per-task priors (MT-iVAE, MT-iCaRL) and input whitening
from identrep.models.nn.icarl import TaskExpFamPrior  # noqa: E402
from identrep.models.nn.vae import TaskPrior, Whiten  # noqa: E402

__all__ += ["TaskExpFamPrior", "TaskPrior", "Whiten"]

# variational sparse coding and the OI-VAE
from identrep.models.nn.sparse_coding import (  # noqa: E402
    GroupedDecoder,
    OIVAEModule,
    VSCModule,
)

__all__ += ["GroupedDecoder", "OIVAEModule", "VSCModule"]
