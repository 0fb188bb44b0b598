"""torch ``nn.Module`` building blocks. ``forward`` returns parameters or
features, never losses."""

from identrep.models.nn.egnn import EGNNExtractor, EGNNLayer
from identrep.models.nn.mlp import MLP, MultiTaskNet, Standardize

__all__ = ["EGNNExtractor", "EGNNLayer", "MLP", "MultiTaskNet", "Standardize"]
