"""`identrep fit`: fit identrep on a user's own CSV/Parquet table."""

from __future__ import annotations

import argparse
import sys

__all__ = ["CLI_ERRORS", "add_parser", "cli_error", "cmd_fit", "fit_command"]

#: Errors that ``identrep fit`` / ``transform`` report as one line (exit status 2).
CLI_ERRORS = (ValueError, TypeError, OSError, ImportError)

_FIT_EPILOG = """\
layouts:
  wide  one row per input, one column per task:   --target Y1 Y2 Y3 ...
        (empty cell = task not measured on that row)
  long  one row per (input, task) observation:     --target VALUE --task-col TASK
inputs: --features COL ..., or by default every other numeric column except one
        that numbers the rows (distinct integers in order; the report says so).
n_latents: --n-latents K, at most the number of inputs (and of tasks, for
        identifiability); by default min(10, tasks, inputs).

outputs in --out DIR:
  latents.csv     z0..z{K-1} (plus the --id-col column). Wide: one row per input
                  row. Long: one row per distinct input, identified by --id-col or
                  else by its feature values, with a 'row' column giving the
                  0-based row index where it first appears.
  causal_map.csv  one row per task: task, causal indicator (0..1) of each latent
  causal_map.png  heat-map of causal_map.csv
  model/          the fitted model, for `identrep transform MODEL DATA --out FILE`
  report.md, report.html  data, settings, fit (held-out R^2), warnings about a
                  degenerate result, causal map, latents vs inputs, seed agreement

example:
  identrep fit data.csv --target y0 y1 y2 y3 --n-latents 3 --seeds 3 --out fit1
"""


def cli_error(prog: str, exc: BaseException) -> int:
    """Print ``identrep PROG: error: ...`` on stderr and return exit status 2."""
    print(f"identrep {prog}: error: {exc}", file=sys.stderr)
    return 2


def fit_command(args) -> str:
    """The canonical command line of parsed ``identrep fit`` arguments."""
    import shlex

    q = shlex.quote
    parts = ["identrep", "fit", q(str(args.data)), "--target", *map(q, args.target)]
    for opt in ("task_col", "id_col"):
        if getattr(args, opt) is not None:
            parts += [f"--{opt.replace('_', '-')}", q(getattr(args, opt))]
    if args.features:
        parts += ["--features", *map(q, args.features)]
    if args.n_latents is not None:
        parts += ["--n-latents", str(args.n_latents)]
    if args.stage2_only:
        parts.append("--stage2-only")
    parts += ["--seed", str(args.seed)]
    if args.seeds != 1:
        parts += ["--seeds", str(args.seeds)]
    if not args.stage2_only:
        parts += ["--max-epochs", str(args.max_epochs)]
    for flag, v in (("--max-iter", args.max_iter), ("--n-init", args.n_init)):
        if v is not None:
            parts += [flag, str(v)]
    return " ".join([*parts, "--out", q(str(args.out))])


def cmd_fit(args) -> int:
    from identrep.tabular import fit

    try:
        res = fit(
            args.data,
            target=args.target,
            out=args.out,
            task_col=args.task_col,
            features=args.features,
            id_col=args.id_col,
            n_latents=args.n_latents,
            stage2_only=args.stage2_only,
            seed=args.seed,
            seeds=args.seeds,
            max_epochs=args.max_epochs,
            max_iter=args.max_iter,
            n_init=args.n_init,
            progress=not args.quiet,
            command=fit_command(args),
        )
    except CLI_ERRORS as exc:
        return cli_error("fit", exc)
    K = res.latents.filter(regex=r"^z\d+$").shape[1]
    print(f"Fitted {len(res.causal_map)} tasks, {K} latents in {res.seconds[0]:.1f} s.")
    if res.cross_seed is not None:
        print(
            f"Cross-seed MCC of the latents: {res.cross_seed['mean']:.4f} +/- "
            f"{res.cross_seed['std']:.4f} ({len(res.seconds)} seeds)."
        )
    for name, p in res.files.items():
        print(f"  {name:<15} {p}")
    return 0


def add_parser(sub) -> None:
    f = sub.add_parser(
        "fit",
        help="fit identrep on your own CSV/Parquet table",
        usage="identrep fit DATA --target COL [COL ...] [options] --out DIR",
        description="Learn identified latents and per-task causal maps from a\n"
        "table of inputs and many related task targets (MTRN then MTLCM, or\n"
        "MTLCM alone with --stage2-only). Give DATA first: --target takes\n"
        "every name that follows it.",
        epilog=_FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("data", help="CSV or Parquet file (Parquet needs pyarrow)")
    f.add_argument(
        "--target",
        nargs="+",
        required=True,
        metavar="COL",
        help="target column(s): one per task (wide), or one with --task-col (long)",
    )
    f.add_argument("--task-col", metavar="COL", help="task label column (long layout)")
    f.add_argument(
        "--features",
        nargs="+",
        metavar="COL",
        help="input columns (default: every other numeric column)",
    )
    f.add_argument("--id-col", metavar="COL", help="id column carried into latents.csv")
    f.add_argument(
        "--n-latents",
        type=int,
        metavar="K",
        help="latent dimension (default: min(10, n_tasks, n_features); with "
        "--stage2-only the rank of the inputs centred within tasks); "
        "checked against the data before any fit",
    )
    f.add_argument(
        "--stage2-only",
        action="store_true",
        help="fit MTLCM directly on the features (linear mixing) instead of "
        "MTRN then MTLCM",
    )
    f.add_argument("--seed", type=int, default=0, help="seed of the saved model")
    f.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="fit N seeds (seed, seed+1, ...) and report the cross-seed MCC",
    )
    f.add_argument(
        "--max-epochs",
        type=int,
        default=1000,
        metavar="E",
        help="cap on MTRN epochs (default 1000); early stopping on a 10%% "
        "validation split usually ends training sooner, and the report says when "
        "the cap ended it while validation still improved",
    )
    f.add_argument(
        "--max-iter",
        type=int,
        metavar="N",
        help="MTLCM L-BFGS iterations (default 3000); raise it if stage 2 did not "
        "converge",
    )
    f.add_argument(
        "--n-init",
        type=int,
        metavar="N",
        help="MTLCM restarts, the best likelihood kept (default 1)",
    )
    f.add_argument("--out", required=True, metavar="DIR", help="output folder")
    f.add_argument("--quiet", action="store_true", help="no progress on stderr")
    f.set_defaults(func=cmd_fit)
