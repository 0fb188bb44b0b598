"""The ``identrep`` command, one module per subcommand (each has ``add_parser``)."""

from __future__ import annotations

import argparse

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from identrep._version import __version__
    from identrep.cli import demo, fit, report, reproduce, transform

    p = argparse.ArgumentParser(
        prog="identrep",
        description="Identifiable representation learning from task structure.",
    )
    p.add_argument("--version", action="version", version=f"identrep {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo.add_parser(sub)
    reproduce.add_parser(sub)
    report.add_parser(sub)
    fit.add_parser(sub)
    transform.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)
