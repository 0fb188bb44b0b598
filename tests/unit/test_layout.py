"""The package layout of DESIGN.md section 1, checked from the source itself.

Imports flow one way, ``cli -> experiments/tabular -> models/datasets/metrics/
persistence -> training -> utils`` (module- and function-level imports alike; the
package root and ``_version``/``_typing``/``exceptions`` are leaves every layer may
use); ``datasets/`` and ``metrics/`` never import torch; no source file grows past
600 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "identrep"

# lower number = higher layer; a module may import its own layer or lower ones
LAYERS = {
    "cli": 0,
    "experiments": 1,
    "tabular": 1,
    "models": 2,
    "datasets": 2,
    "metrics": 2,
    "persistence": 2,
    "training": 3,
    "utils": 4,
    "_version": 5,
    "_typing": 5,
    "exceptions": 5,
}
# siblings of layer 2 that may not import each other (models may not import the
# experiment or data layers, and data/metrics stay free of the models)
FORBIDDEN = {
    ("datasets", "models"),
    ("datasets", "persistence"),
    ("metrics", "models"),
    ("metrics", "persistence"),
    ("metrics", "datasets"),
    ("models", "persistence"),
}

MODULES = sorted(p for p in SRC.rglob("*.py") if p.name != "__main__.py")


def _top(path: Path) -> str | None:
    parts = path.relative_to(SRC).parts
    return None if parts == ("__init__.py",) else parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported identrep top-level package or 'torch', line) of every import."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "torch":
                out.append(("torch", node.lineno))
            elif parts[0] == "identrep":
                if len(parts) == 1:  # `from identrep import X`: the package root
                    out.append(("<root>", node.lineno))
                else:
                    out.append((parts[1], node.lineno))
    return out


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_flow_one_way(path):
    top = _top(path)
    if top is None:
        return
    for target, line in _imports(path):
        if target == "torch" or target == top:
            continue
        where = f"{path.relative_to(SRC)}:{line} imports identrep.{target}"
        if target == "<root>":  # the package root re-exports every layer
            assert top == "cli", f"{where} (the package root): import the module"
            continue
        assert target in LAYERS, f"{where}, a package the layout does not know"
        assert LAYERS[target] >= LAYERS[top], f"{where}, a higher layer"
        assert (top, target) not in FORBIDDEN, f"{where}, a sibling it must not use"


@pytest.mark.parametrize("package", ["datasets", "metrics"])
def test_datasets_and_metrics_never_import_torch(package):
    for path in sorted((SRC / package).rglob("*.py")):
        lines = [line for target, line in _imports(path) if target == "torch"]
        assert not lines, f"{path.relative_to(SRC)} imports torch at lines {lines}"


def test_no_source_file_is_over_600_lines():
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in MODULES
    }
    assert {k: v for k, v in sizes.items() if v > 600} == {}
