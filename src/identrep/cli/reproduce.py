"""`identrep reproduce`: run a registered study's grid through the sweep and report
it beside the paper. The study options (``--mixing``, ``--latent-dims``, ...) are
declared by the studies (``Study.options``), not here."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

__all__ = ["add_parser", "cmd_reproduce"]


def _parse_where(items: list[str] | None) -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise SystemExit(f"--where expects FIELD=V1,V2,...; got {item!r}.")
        where.setdefault(key.strip(), set()).update(
            v.strip() for v in values.split(",")
        )
    return where


def _filter(configs, where):
    if not where:
        return configs
    fields = {f.name for f in dataclasses.fields(configs[0])} if configs else set()
    unknown = set(where) - fields
    if unknown:
        raise SystemExit(
            f"--where: unknown field(s) {sorted(unknown)}; "
            f"choose from {sorted(fields)}."
        )
    return [
        c
        for c in configs
        if all(str(getattr(c, k)) in vals for k, vals in where.items())
    ]


def _parse_models(text: str | None, study):
    if text is None or text == "all":
        return study.models
    models = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in models if m not in study.models]
    if unknown or not models:
        raise SystemExit(
            f"--models: unknown model(s) {unknown}; choose from "
            f"{', '.join(study.models)} or 'all'."
        )
    return models


def _study_options() -> dict[str, tuple]:
    """Every study-declared option by flag: (the option, the studies declaring
    it). Studies sharing a flag share its definition (the first one)."""
    from identrep.experiments import STUDIES

    found: dict[str, tuple] = {}
    for name in sorted(STUDIES):
        for opt in STUDIES[name].options:
            first, names = found.get(opt.flag, (opt, ()))
            found[opt.flag] = (first, (*names, name))
    return found


def _option_values(args, study) -> dict:
    """The grid keywords of the study's own options; another study's option
    given a non-default value is an error (SystemExit-free: ValueError)."""
    mine = {opt.flag for opt in study.options}
    for flag, (opt, names) in _study_options().items():
        if flag not in mine and getattr(args, opt.dest) != opt.default:
            raise ValueError(f"{flag} applies to {', '.join(names)} only.")
    return {opt.param: opt.value(getattr(args, opt.dest)) for opt in study.options}


def cmd_reproduce(args) -> int:
    from identrep.experiments import get_study, run_sweep, write_report

    study = get_study(args.table)
    try:
        configs = study.grid(
            seeds=args.seeds,
            quick=args.quick,
            models=_parse_models(args.models, study),
            **_option_values(args, study),
        )
    except ValueError as exc:
        print(f"identrep reproduce {args.table}: {exc}", file=sys.stderr)
        return 2
    configs = _filter(configs, _parse_where(args.where))
    if not configs:
        print("No configuration left after --where.", file=sys.stderr)
        return 2
    out = Path(args.out or f"results/{args.table}")
    if out.exists() and not out.is_dir():
        print(
            f"identrep reproduce {args.table}: --out {out} is a file; give a folder "
            "(new, or one a previous `identrep reproduce` wrote).",
            file=sys.stderr,
        )
        return 2
    where = f"backend={args.backend}, jobs={args.jobs}" + (
        f", scheduler={args.scheduler}" if args.scheduler else ""
    )
    print(f"{study.title}\n{len(configs)} run(s) -> {out} ({where})", file=sys.stderr)
    if args.dry_run:
        for c in configs:
            print(c.run_id)
        return 0
    t0 = time.perf_counter()
    try:
        run_sweep(
            configs,
            out,
            jobs=args.jobs,
            backend=args.backend,
            scheduler=args.scheduler,
            progress=not args.no_progress,
        )
        _, text = write_report(out)
    except (ImportError, RuntimeError, ValueError, OSError) as exc:
        # OSError: files (permissions, a full disk) and an unreachable scheduler
        msg = " ".join(str(exc).split())  # one line
        print(f"identrep reproduce {args.table}: {msg}", file=sys.stderr)
        return 2
    print(text)
    print(
        f"Wall time {time.perf_counter() - t0:.1f} s. Wrote {out / 'results.csv'}, "
        f"{out / 'report.md'} and {len(configs)} record(s) in {out / 'records'}."
    )
    return 0


def add_parser(sub) -> None:
    from identrep.experiments import STUDIES

    r = sub.add_parser("reproduce", help="reproduce a paper study")
    r.add_argument(
        "table",
        choices=sorted(STUDIES),
        help="a registered study: "
        + "; ".join(f"{n}: {STUDIES[n].title}" for n in sorted(STUDIES)),
    )
    r.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="seeds per configuration (default: the study's own, the paper's: 10 "
        "for moran2022_synthetic, 5 for the others)",
    )
    r.add_argument(
        "--quick", action="store_true", help="the study's cheap variant (few seeds)"
    )
    r.add_argument("--out", default=None, help="output folder (results/<table>)")
    r.add_argument(
        "--models",
        default="all",
        metavar="M1,M2",
        help="models to run, comma-separated (the study's models; default all)",
    )
    r.add_argument("--jobs", type=int, default=1, help="worker processes")
    r.add_argument(
        "--backend",
        default="loky",
        choices=["loky", "dask"],
        help="local processes (loky) or a Dask cluster (needs identrep[dask])",
    )
    r.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="address of a running Dask scheduler (with --backend dask); "
        "without it a local cluster of --jobs workers is started",
    )
    r.add_argument(
        "--where",
        action="append",
        metavar="FIELD=V1,V2",
        help="keep configurations whose FIELD is one of the values",
    )
    r.add_argument("--dry-run", action="store_true", help="list the runs only")
    r.add_argument("--no-progress", action="store_true")
    group = r.add_argument_group("study options (declared by the studies)")
    for flag, (opt, names) in _study_options().items():
        kwargs = {"default": opt.default, "help": f"{opt.help} [{', '.join(names)}]"}
        if opt.type is not None:
            kwargs["type"] = opt.type
        if opt.choices is not None:
            kwargs["choices"] = list(opt.choices)
        if opt.metavar is not None:
            kwargs["metavar"] = opt.metavar
        group.add_argument(flag, dest=opt.dest, **kwargs)
    r.set_defaults(func=cmd_reproduce)
