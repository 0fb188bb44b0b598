"""The :mod:`identrep.tabular` package: public names, one-way imports."""

from __future__ import annotations

import ast
from pathlib import Path

import identrep.tabular as tabular

# DESIGN.md section 1: cli -> tabular -> models/datasets/metrics/persistence -> ...
FORBIDDEN = ("identrep.cli", "identrep.experiments")


def test_public_names():
    # the names of the former workflow module, less add_subcommands (now
    # identrep.cli.fit and identrep.cli.transform, each with add_parser)
    assert sorted(tabular.__all__) == [
        "FitResult", "TableData", "fit", "load_table", "read_table", "transform",
    ]  # fmt: skip
    for name in tabular.__all__:
        assert getattr(tabular, name).__module__.startswith("identrep.tabular.")


def test_imports_flow_one_way():
    for path in Path(tabular.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"
