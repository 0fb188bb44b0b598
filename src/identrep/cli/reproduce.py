"""`identrep reproduce`: run a paper study's grid and report it beside the paper."""

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


def _parse_models(text: str | None):
    from identrep.experiments.configs import MODELS

    if text is None or text == "all":
        return MODELS
    models = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise SystemExit(
            f"--models: unknown model(s) {unknown}; choose from {', '.join(MODELS)} "
            "or 'all'."
        )
    return models


_QM9_DIMS = "5,6,7,8,9,10"


def _parse_ints(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(
            f"{name} must be comma-separated integers, e.g. 5,6,7; got {text!r}."
        ) from None
    if not values:
        raise ValueError(f"{name} must list at least one integer; got {text!r}.")
    return values


def cmd_reproduce_qm9(args) -> int:
    from identrep.experiments.qm9 import qm9_report, run_qm9

    out = Path(args.out or "results/qm9")
    t0 = time.perf_counter()
    try:
        dims = _parse_ints(args.latent_dims, "--latent-dims")
        run_qm9(
            out,
            latent_dims=dims,
            seeds=args.seeds,
            n_molecules=args.n_molecules,
            max_epochs=args.max_epochs,
            jobs=args.jobs,
            progress=not args.no_progress,
            source=args.qm9_source,
        )
    except (ImportError, FileNotFoundError, RuntimeError, ValueError) as exc:
        print(f"identrep reproduce qm9: {exc}", file=sys.stderr)
        return 2
    _, text = qm9_report(out)
    print(text)
    print(f"Wall time {time.perf_counter() - t0:.1f} s. Wrote the report to {out}.")
    return 0


def cmd_reproduce(args) -> int:
    from identrep.experiments import get_table, run_sweep, write_report

    if args.table == "qm9":
        return cmd_reproduce_qm9(args)
    for flag, value, default in (
        ("--latent-dims", args.latent_dims, _QM9_DIMS),
        ("--n-molecules", args.n_molecules, None),
        ("--max-epochs", args.max_epochs, 20),
    ):
        if value != default:
            print(f"identrep reproduce: {flag} applies to qm9 only.", file=sys.stderr)
            return 2
    table = get_table(args.table)
    configs = table.grid(
        seeds=args.seeds,
        quick=args.quick,
        mixing=args.mixing,
        mixing_source=args.mixing_source,
        models=_parse_models(args.models),
    )
    configs = _filter(configs, _parse_where(args.where))
    if not configs:
        print("No configuration left after --where.", file=sys.stderr)
        return 2
    out = Path(args.out or f"results/{args.table}")
    where = f"backend={args.backend}, jobs={args.jobs}" + (
        f", scheduler={args.scheduler}" if args.scheduler else ""
    )
    print(f"{table.title}\n{len(configs)} run(s) -> {out} ({where})", file=sys.stderr)
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
    except (ImportError, RuntimeError, ValueError) as exc:
        print(f"identrep reproduce: {exc}", file=sys.stderr)
        return 2
    _, text = write_report(out)
    print(text)
    print(
        f"Wall time {time.perf_counter() - t0:.1f} s. Wrote {out / 'results.csv'}, "
        f"{out / 'report.md'} and {len(configs)} record(s) in {out / 'records'}."
    )
    return 0


def add_parser(sub) -> None:
    from identrep.experiments import TABLES

    r = sub.add_parser("reproduce", help="reproduce a paper table")
    r.add_argument(
        "table",
        choices=[*sorted(TABLES), "qm9"],
        help="a table of Chen et al. (2024), or qm9 (their Figure 3)",
    )
    r.add_argument("--seeds", type=int, default=5, help="seeds per configuration")
    r.add_argument("--quick", action="store_true", help="every configuration, one seed")
    r.add_argument(
        "--mixing", default="random", choices=["random", "orthogonal", "identity"]
    )
    r.add_argument(
        "--mixing-source",
        default="reference",
        choices=["reference", "seeded"],
        help="'reference': the authors' mixing matrix for each seed index "
        "(torch.manual_seed(s); randn(d, d)); 'seeded': identrep's own "
        "config-derived draw",
    )
    r.add_argument("--out", default=None, help="output folder (results/<table>)")
    r.add_argument(
        "--models",
        default="all",
        metavar="M1,M2",
        help="models to run, comma-separated: MTLCM (Table 2: MTRN then MTLCM), "
        "iVAE, MT-iVAE, iCaRL, MT-iCaRL; default all",
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
    q = r.add_argument_group("qm9 only")
    q.add_argument(
        "--latent-dims",
        default=_QM9_DIMS,
        metavar="D1,D2",
        help=f"latent dimensions (default {_QM9_DIMS})",
    )
    q.add_argument(
        "--n-molecules",
        type=int,
        default=None,
        help="random subset of molecules (default all 130,831)",
    )
    q.add_argument(
        "--max-epochs", type=int, default=20, help="MTRN epochs (paper: 300)"
    )
    q.add_argument(
        "--qm9-source",
        default="qm9pack",
        help="'qm9pack' (pip install \"identrep[molecules]\") or a folder",
    )
    r.set_defaults(func=cmd_reproduce)
