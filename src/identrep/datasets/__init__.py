"""Synthetic processes (``make_*``, numpy only) and real-data loaders."""

from identrep.datasets.bundle import TaskData
from identrep.datasets.movielens import MovieLensData, load_movielens
from identrep.datasets.qm9 import MoleculeData, load_qm9
from identrep.datasets.segments import make_segment_sources
from identrep.datasets.shapes import (
    SHAPES_FACTORS,
    make_shapes_tasks,
    render_shapes,
    sample_shapes_factors,
)
from identrep.datasets.sparse_factors import SparseFactorData, make_sparse_factors
from identrep.datasets.sparse_tasks import (
    SparseTaskSampler,
    TaskDraw,
    make_sparse_tasks,
)
from identrep.datasets.superconductivity import (
    compute_superconductivity_features,
    load_superconductivity,
)
from identrep.datasets.synthetic import (
    make_linear_tasks,
    make_mixing,
    make_nonlinear_tasks,
    make_task_latents,
)
from identrep.datasets.text import (
    BagOfWords,
    TopicShiftData,
    bag_of_words,
    load_ml_abstracts,
    make_topic_shift,
)
from identrep.datasets.zeisel import MAJOR_CLASS_NAMES, ZeiselData, load_zeisel

__all__ = [
    "MAJOR_CLASS_NAMES",
    "SHAPES_FACTORS",
    "BagOfWords",
    "MoleculeData",
    "MovieLensData",
    "SparseFactorData",
    "SparseTaskSampler",
    "TaskDraw",
    "TaskData",
    "TopicShiftData",
    "ZeiselData",
    "bag_of_words",
    "compute_superconductivity_features",
    "load_ml_abstracts",
    "load_movielens",
    "load_qm9",
    "load_superconductivity",
    "load_zeisel",
    "make_linear_tasks",
    "make_mixing",
    "make_nonlinear_tasks",
    "make_segment_sources",
    "make_shapes_tasks",
    "make_sparse_tasks",
    "make_sparse_factors",
    "make_topic_shift",
    "make_task_latents",
    "render_shapes",
    "sample_shapes_factors",
]
