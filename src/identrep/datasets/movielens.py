"""MovieLens ratings as a binary user x movie matrix (numpy/pandas/scipy only).

:func:`load_movielens` reads GroupLens's own files (Harper and Konstan, 2015) or the
RecBole atomic file of MovieLens 100K, never downloads anything, and applies the
preprocessing of Moran et al. (2022, Appendix C.1, after Liang et al., 2018):
ratings of 4 or more become 1 (the others are dropped), users with at least
``min_user_ratings`` such ratings are kept, then the ``n_items`` movies with the
most of them, then (optionally) a random subset of ``n_users`` users.

MovieLens may not be redistributed, so identrep ships none of it. Where the files
are looked for, in order:

1. ``path`` (a folder holding one of the files below, or the file itself);
2. ``<data_home>/movielens/<variant folder>`` (``data_home`` defaults to
   ``$IDENTREP_DATA``, else ``~/identrep_data``), e.g. ``~/identrep_data/movielens/
   ml-100k/u.data``;
3. for ``variant="100k"``: the data files of the PyPI package ``recbole``
   (``recbole/dataset_example/ml-100k/ml-100k.inter``), located through
   ``importlib.metadata`` without importing the package; ``pip install --no-deps
   recbole`` installs it offline from a wheel.

File formats (GroupLens's READMEs):

======== ===================== ============================================
variant  file                  format
======== ===================== ============================================
100k     ``u.data``            ``user item rating timestamp``, tab-separated
1m       ``ratings.dat``       ``UserID::MovieID::Rating::Timestamp``
10m      ``ratings.dat``       as 1m
20m/25m  ``ratings.csv``       header ``userId,movieId,rating,timestamp``
100k     ``ml-100k.inter``     RecBole atomic file, header
                               ``user_id:token  item_id:token  rating:float
                               timestamp:float``, tab-separated
======== ===================== ============================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from identrep._typing import Seed
from identrep.exceptions import DataError

__all__ = [
    "MOVIELENS_VARIANTS",
    "MovieLensData",
    "binarize_ratings",
    "load_movielens",
    "read_movielens",
]

#: variant -> (folder name, candidate file names in order)
MOVIELENS_VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "100k": ("ml-100k", ("u.data", "ml-100k.inter")),
    "1m": ("ml-1m", ("ratings.dat",)),
    "10m": ("ml-10M100K", ("ratings.dat",)),
    "20m": ("ml-20m", ("ratings.csv",)),
    "25m": ("ml-25m", ("ratings.csv",)),
}

_INSTALL = (
    "MovieLens may not be redistributed, so identrep does not ship it. Put GroupLens's "
    "files under {home}/movielens/<ml-100k|ml-1m|ml-20m|ml-25m>/ (u.data, ratings.dat "
    "or ratings.csv; https://grouplens.org/datasets/movielens/), set $IDENTREP_DATA to "
    "another data home, pass path=..., or, for MovieLens 100K, install the PyPI "
    "package recbole, which ships it: `pip install --no-deps recbole` (files under "
    "recbole/dataset_example/ml-100k/)."
)


@dataclass(frozen=True)
class MovieLensData:
    """A binary user x movie matrix.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix of shape (n_users, n_items), float32
        1 where the user rated the movie ``threshold`` or more, else 0.
    user_ids, item_ids : ndarray
        The original ids of the rows and columns (items ordered by decreasing
        number of positive ratings, ties by id).
    titles : ndarray of str or None
        The movie titles of the columns, when the movies file lies beside the
        ratings (``u.item``, ``movies.dat``, ``movies.csv``, ``ml-100k.item``).
    source : str
        The file read.
    """

    X: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    titles: np.ndarray | None
    source: str


def _data_home(data_home) -> Path:
    if data_home is not None:
        return Path(data_home).expanduser()
    return Path(os.environ.get("IDENTREP_DATA", "~/identrep_data")).expanduser()


def _recbole_file() -> Path | None:
    """``ml-100k.inter`` inside an installed recbole distribution, if any."""
    try:
        dist = metadata.distribution("recbole")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).replace("\\", "/").endswith("dataset_example/ml-100k/ml-100k.inter"):
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    return None


def _find_file(variant: str, path, data_home) -> Path:
    folder, names = MOVIELENS_VARIANTS[variant]
    tried = []
    if path is not None:
        p = Path(path).expanduser()
        if p.is_file():
            return p
        candidates = [p / n for n in names] + [p / folder / n for n in names]
    else:
        home = _data_home(data_home) / "movielens"
        candidates = [home / folder / n for n in names] + [home / n for n in names]
    for c in candidates:
        tried.append(str(c))
        if c.is_file():
            return c
    if path is None and variant == "100k":
        found = _recbole_file()
        if found is not None:
            return found
        tried.append("the recbole package (not installed)")
    raise DataError(
        f"No MovieLens {variant} ratings found; looked for: {', '.join(tried)}. "
        + _INSTALL.format(home=_data_home(data_home))
    )


def read_movielens(file) -> pd.DataFrame:
    """Read one ratings file in any of the supported formats.

    Parameters
    ----------
    file : str or Path
        ``u.data``, ``ratings.dat``, ``ratings.csv`` or ``*.inter``.

    Returns
    -------
    DataFrame with columns ``user``, ``item`` (int64) and ``rating`` (float64).

    Raises
    ------
    DataError
        The file does not match its format.
    """
    file = Path(file)
    name = file.name
    try:
        if name.endswith(".inter"):
            df = pd.read_csv(file, sep="\t")
            cols = {c.split(":")[0]: c for c in df.columns}
            missing = {"user_id", "item_id", "rating"} - set(cols)
            if missing:
                raise DataError(
                    f"{file}: a RecBole .inter file needs the fields user_id, "
                    f"item_id and rating; got columns {list(df.columns)}."
                )
            df = df[[cols["user_id"], cols["item_id"], cols["rating"]]]
        elif name.endswith(".dat"):
            df = pd.read_csv(
                file, sep="::", engine="python", header=None, usecols=[0, 1, 2]
            )
        elif name.endswith(".csv"):
            df = pd.read_csv(file)
            if not {"userId", "movieId", "rating"} <= set(df.columns):
                raise DataError(
                    f"{file}: ratings.csv needs the header userId,movieId,rating,"
                    f"timestamp; got columns {list(df.columns)}."
                )
            df = df[["userId", "movieId", "rating"]]
        else:  # u.data: whitespace-separated, no header
            df = pd.read_csv(file, sep=r"\s+", header=None, usecols=[0, 1, 2])
    except (pd.errors.ParserError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f"{file} is not a MovieLens ratings file: {err}") from err
    df.columns = ["user", "item", "rating"]
    try:
        out = df.astype({"user": np.int64, "item": np.int64, "rating": np.float64})
    except (TypeError, ValueError) as err:
        raise DataError(
            f"{file}: user and item ids must be integers and ratings numbers; {err}"
        ) from err
    if out.empty:
        raise DataError(f"{file} holds no ratings.")
    return out


def _read_titles(ratings_file: Path) -> dict | None:
    """Movie id -> title from the movies file beside a ratings file (or None)."""
    folder = ratings_file.parent
    try:
        if (folder / "u.item").is_file():
            df = pd.read_csv(
                folder / "u.item",
                sep="|",
                header=None,
                usecols=[0, 1],
                encoding="latin-1",
            )
        elif (folder / "movies.dat").is_file():
            df = pd.read_csv(
                folder / "movies.dat",
                sep="::",
                engine="python",
                header=None,
                usecols=[0, 1],
                encoding="latin-1",
            )
        elif (folder / "movies.csv").is_file():
            df = pd.read_csv(folder / "movies.csv", usecols=["movieId", "title"])
        elif (
            ratings_file.name.endswith(".inter")
            and (item := ratings_file.with_suffix(".item")).is_file()
        ):
            df = pd.read_csv(item, sep="\t")
            cols = {c.split(":")[0]: c for c in df.columns}
            df = df[[cols["item_id"], cols["movie_title"]]]
        else:
            return None
    except (OSError, KeyError, ValueError, pd.errors.ParserError):
        return None
    return dict(
        zip(df.iloc[:, 0].astype(np.int64), df.iloc[:, 1].astype(str), strict=True)
    )


def binarize_ratings(
    ratings: pd.DataFrame,
    *,
    threshold: float = 4.0,
    min_user_ratings: int = 20,
    n_items: int | None = 300,
    n_users: int | None = None,
    random_state: Seed = 0,
) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """The paper's preprocessing of a ratings table (see :func:`load_movielens`)."""
    pos = ratings.loc[ratings["rating"] >= threshold, ["user", "item"]]
    pos = pos.drop_duplicates()
    per_user = pos.groupby("user")["item"].transform("size")
    pos = pos[per_user >= min_user_ratings]
    if pos.empty:
        raise DataError(
            f"No user has {min_user_ratings} or more ratings >= {threshold}; lower "
            "min_user_ratings."
        )
    counts = pos["item"].value_counts()
    counts = counts.sort_index(kind="stable").sort_values(
        ascending=False, kind="stable"
    )
    items = counts.index.to_numpy()[: n_items if n_items is not None else None]
    pos = pos[pos["item"].isin(items)]
    users = np.unique(pos["user"].to_numpy())
    if n_users is not None and n_users < len(users):
        rng = np.random.default_rng(random_state)
        users = np.sort(rng.choice(users, size=n_users, replace=False))
        pos = pos[pos["user"].isin(users)]
    rows = np.searchsorted(users, pos["user"].to_numpy())
    col_of = pd.Series(np.arange(len(items)), index=items)
    cols = col_of.loc[pos["item"].to_numpy()].to_numpy()
    X = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)),
        shape=(len(users), len(items)),
    )
    return X, users, items


def load_movielens(
    variant: str = "100k",
    *,
    path=None,
    data_home=None,
    threshold: float = 4.0,
    min_user_ratings: int = 20,
    n_items: int | None = 300,
    n_users: int | None = None,
    random_state: Seed = 0,
) -> MovieLensData:
    """MovieLens as a binary user x movie matrix, preprocessed as in Moran et al.

    Parameters
    ----------
    variant : {"100k", "1m", "10m", "20m", "25m"}, default="100k"
        The paper uses 25M (with ``n_users=100_000``); 100K is the one that
        installs offline (``pip install --no-deps recbole``).
    path : str or Path, optional
        A ratings file or the folder holding it (overrides the data home).
    data_home : str or Path, optional
        Default ``$IDENTREP_DATA``, else ``~/identrep_data``; files are looked
        for in ``<data_home>/movielens/<ml-100k|ml-1m|ml-10M100K|ml-20m|ml-25m>/``.
    threshold : float, default=4.0
        Ratings >= threshold are positives (1); the others are dropped.
    min_user_ratings : int, default=20
        Keep users with at least this many positives (the authors' code uses
        ``>= 20``; the paper's text says "more than 20").
    n_items : int or None, default=300
        Keep the movies with the most positives (the paper's G = 300); None: all.
    n_users : int or None, default=None
        Random subset of users (the paper's N = 100,000 of 25M); None: all.
    random_state : int, Generator or None, default=0
        Seeds the user subset.

    Returns
    -------
    MovieLensData

    Raises
    ------
    DataError
        No ratings file was found (the message says where it looked and how to
        install MovieLens), or the file is malformed.
    ValueError
        A bad argument.
    """
    if variant not in MOVIELENS_VARIANTS:
        raise ValueError(
            f"variant must be one of {tuple(MOVIELENS_VARIANTS)}; got {variant!r}."
        )
    for name, value in (("n_items", n_items), ("n_users", n_users)):
        if value is not None and (
            not isinstance(value, (int, np.integer)) or value < 1
        ):
            raise ValueError(
                f"{name} must be a positive integer or None; got {value!r}."
            )
    if not isinstance(min_user_ratings, (int, np.integer)) or min_user_ratings < 1:
        raise ValueError(
            f"min_user_ratings must be a positive integer; got {min_user_ratings!r}."
        )
    file = _find_file(variant, path, data_home)
    X, users, items = binarize_ratings(
        read_movielens(file),
        threshold=threshold,
        min_user_ratings=min_user_ratings,
        n_items=n_items,
        n_users=n_users,
        random_state=random_state,
    )
    names = _read_titles(file)
    titles = None if names is None else np.array([names.get(i, "") for i in items])
    return MovieLensData(
        X=X, user_ids=users, item_ids=items, titles=titles, source=str(file)
    )
