"""`identrep report`: rebuild results.csv and the report from a folder of records."""

from __future__ import annotations

import sys

__all__ = ["add_parser", "cmd_report"]


def cmd_report(args) -> int:
    from identrep.experiments import write_report

    try:
        _, text = write_report(args.dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"identrep report: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def add_parser(sub) -> None:
    rep = sub.add_parser(
        "report", help="rebuild results.csv and report.md from records"
    )
    rep.add_argument("dir")
    rep.set_defaults(func=cmd_report)
