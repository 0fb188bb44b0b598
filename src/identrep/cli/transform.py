"""`identrep transform`: apply a model saved by `identrep fit` to a table."""

from __future__ import annotations

from pathlib import Path

from identrep.cli.fit import CLI_ERRORS, cli_error

__all__ = ["add_parser", "cmd_transform"]


def cmd_transform(args) -> int:
    from identrep.tabular import transform

    try:
        frame = transform(args.model, args.data, args.out, progress=not args.quiet)
    except CLI_ERRORS as exc:
        return cli_error("transform", exc)
    out = Path(args.out)
    out = out / "latents.csv" if out.is_dir() else out
    print(f"Wrote {len(frame)} rows to {out}.")
    return 0


def add_parser(sub) -> None:
    t = sub.add_parser(
        "transform",
        help="apply a saved model to a table",
        description="Write the latents of a table's rows under a model saved by "
        "`identrep fit` (its OUT/model folder).",
    )
    t.add_argument("model", help="saved model folder (OUT/model of identrep fit)")
    t.add_argument("data", help="CSV or Parquet file with the model's input columns")
    t.add_argument("--out", required=True, metavar="FILE", help="CSV file to write")
    t.add_argument("--quiet", action="store_true", help="no progress on stderr")
    t.set_defaults(func=cmd_transform)
