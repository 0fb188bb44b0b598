"""README.md's printed outputs and timings come from docs/readme_outputs.py."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def producer():
    spec = importlib.util.spec_from_file_location(
        "readme_outputs", ROOT / "docs" / "readme_outputs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_output_block_of_the_readme_has_a_producer(producer):
    text = (ROOT / "README.md").read_text()
    names = [m["name"] for m in producer._BLOCK.finditer(text)]
    assert sorted(names) == sorted(producer.PRODUCERS)  # each block exactly once


def test_the_quick_start_commands_carry_no_hand_written_timings():
    text = (ROOT / "README.md").read_text()
    commands = text.split("## Reproducing the paper")[1].split("```")[1]
    assert not re.search(r"~\d+ ?(s|min)\b", commands)  # before: "(~1 min)" by hand


def test_the_demo_block_matches_a_fresh_run(producer, capsys):
    assert producer.main(["--check", "--only", "demo"]) == 0, capsys.readouterr().err
