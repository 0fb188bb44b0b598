"""Records: atomic writes, JSON round trip, loading."""

from __future__ import annotations

import numpy as np
import pytest

from identrep.experiments import load_records
from identrep.experiments.io import atomic_write_text, write_record


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert sorted(x.name for x in p.parent.iterdir()) == ["f.txt"]


def test_write_record_round_trips_numpy_types(tmp_path):
    metrics = {
        "a": np.float64(1.5),
        "b": np.int64(2),
        "c": np.arange(3),
        "d": np.bool_(True),
    }
    rec = {"run_id": "r", "config": {"seed": np.int64(0)}, "metrics": metrics}
    write_record(tmp_path / "records" / "r.json", rec)
    back = load_records(tmp_path)
    plain = {"a": 1.5, "b": 2, "c": [0, 1, 2], "d": True}
    assert back == [{"run_id": "r", "config": {"seed": 0}, "metrics": plain}]


def test_load_records_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No records folder"):
        load_records(tmp_path)
