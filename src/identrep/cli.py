"""The ``identrep`` command: demo, reproduce a paper table, rebuild a report."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

__all__ = ["main"]


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


def cmd_report(args) -> int:
    from identrep.experiments import write_report

    if (Path(args.dir) / "qm9_settings.json").is_file():
        from identrep.experiments.qm9 import qm9_report

        _, text = qm9_report(args.dir)
        print(text)
        return 0
    try:
        _, text = write_report(args.dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"identrep report: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def cmd_demo_two_stage(args) -> int:
    import identrep as ir
    from identrep.metrics import (
        causal_scores,
        match_latents,
        mcc,
        mcc_per_task,
        weak_mcc,
    )

    d, k, T, n, p = args.n_latents, args.n_causal, 200, 200, 30
    print(
        f"identrep {ir.__version__} demo, two stages: the non-linear process of "
        f"Chen et al. (2024), Table 2\n"
    )
    data = ir.datasets.make_nonlinear_tasks(
        n_tasks=T,
        n_samples=n,
        n_latents=d,
        n_causal=k,
        n_observed=p,
        random_state=args.seed,
    )
    print(
        f"Data: {T} tasks x {n} samples, {d} latents ({k} causal per task), "
        f"observed through a random ReLU network R^{d} -> R^{p}.\n"
    )
    t0 = time.perf_counter()
    pipe = ir.TaskIdentifiable(n_latents=d, random_state=args.seed)
    pipe.fit(data.X, data.y, task_ids=data.task_ids)
    secs = time.perf_counter() - t0
    h = pipe.mtrn_.history_
    F = pipe.mtrn_.transform(data.X)
    Z_hat = pipe.transform(data.X)
    print(
        f"Stage 1 (MTRN): {h['n_epochs']} epochs, {pipe.mtrn_.fit_seconds_:.1f} s; "
        f"weak MCC (CCA) with the true latents {weak_mcc(data.Z, F):.4f}"
    )
    print(f"Stage 2 (MTLCM on standardised features): {pipe.mtlcm_.fit_seconds_:.2f} s")
    print(
        f"  strong MCC per task (Spearman): "
        f"{mcc_per_task(data.Z, Z_hat, data.task_ids, 'spearman'):.4f}"
    )
    print(f"  strong MCC pooled (Pearson):    {mcc(data.Z, Z_hat):.4f}")
    perm = match_latents(data.Z, Z_hat)
    sc = causal_scores(data.causal, pipe.causal_indicators_, perm)
    print(
        f"  causal sets: accuracy {sc['accuracy']:.3f}, recall {sc['recall']:.3f}, "
        f"exact in {sc['exact_set_rate']:.1%} of tasks"
    )
    print(f"\nTotal {secs:.1f} s. Next: `identrep reproduce table2 --quick`.")
    return 0


def cmd_demo(args) -> int:
    import numpy as np

    if args.two_stage:
        return cmd_demo_two_stage(args)

    import identrep as ir
    from identrep.metrics import causal_scores, match_latents, mcc, mcc_per_task

    d, k, T, n = args.n_latents, args.n_causal, 200, 100
    print(
        f"identrep {ir.__version__} demo: the linear multi-task process of Chen et al."
        f" (2024), Table 1\n"
    )
    data = ir.datasets.make_linear_tasks(
        n_tasks=T,
        n_samples=n,
        n_latents=d,
        n_causal=k,
        mixing="random",
        random_state=args.seed,
    )
    print(
        f"Data: {T} tasks x {n} samples, {d} latents ({k} cause each task's "
        f"target, the other {d - k} are its effects),\n      observed through a "
        f"random {d}x{d} mixing matrix plus noise (std 0.01).\n"
    )
    t0 = time.perf_counter()
    model = ir.MTLCM(random_state=args.seed).fit(data.X, data.y, task_ids=data.task_ids)
    secs = time.perf_counter() - t0
    Z_hat = model.transform(data.X)
    per_task = mcc_per_task(data.Z, Z_hat, data.task_ids, "spearman")
    pooled = mcc(data.Z, Z_hat)
    rng = np.random.default_rng(0)
    rand = mcc_per_task(
        data.Z, data.X @ rng.standard_normal((d, d)), data.task_ids, "spearman"
    )
    print(
        f"MTLCM fit: {secs:.2f} s, {model.n_iter_} L-BFGS iterations, converged="
        f"{model.converged_}, log-likelihood/sample {model.log_likelihood_:.3f}\n"
    )
    print("Recovery of the true latents (up to permutation and scale):")
    print(
        f"  strong MCC per task (Spearman, paper's protocol): {per_task:.4f}"
        f"   (paper's MTLCM: 0.9977 at d=10, k=2)"
    )
    print(f"  strong MCC pooled over all samples (Pearson):       {pooled:.4f}")
    print(
        f"  a random unmixing scores per task / pooled:          {rand:.4f} / "
        f"{mcc(data.Z, data.X @ rng.standard_normal((d, d))):.4f}\n"
    )
    perm = match_latents(data.Z, Z_hat)
    R = np.corrcoef(data.Z.T, Z_hat.T)[:d, d:]
    print("  true latent -> recovered coordinate (correlation)")
    for j in range(d):
        print(f"    z{j:<2d} -> zhat{perm[j]:<2d} ({R[j, perm[j]]:+.4f})")
    sc = causal_scores(data.causal, model.causal_indicators_, perm)
    print("\nCausal structure (which latents cause each task's target):")
    for t in range(args.show_tasks):
        true = sorted(np.flatnonzero(data.causal[t]).tolist())
        found = sorted(
            int(np.flatnonzero(perm == i)[0])
            for i in np.flatnonzero(model.causal_mask_[t])
        )
        probs = ", ".join(
            f"z{j}:{model.causal_indicators_[t, perm[j]]:.2f}" for j in true
        )
        mark = "ok" if true == found else "differs"
        print(
            f"  task {t}: true {true}, recovered {found} [{mark}] "
            f"(indicators of true causes: {probs})"
        )
    print(
        f"\n  over all {T} tasks: accuracy {sc['accuracy']:.3f}, precision "
        f"{sc['precision']:.3f}, recall {sc['recall']:.3f}, exact causal set in "
        f"{sc['exact_set_rate']:.1%} of tasks, AUROC {sc['auroc']:.3f}"
    )
    print(
        "  (a spurious latent with a small effect gamma*y, drowned by its own "
        "noise, looks like a cause:\n   nearly independent of y with unit variance, "
        "so perfect accuracy is not attainable here)"
    )
    print(
        f"\nTotal demo time {time.perf_counter() - t0:.1f} s. Next: `identrep "
        "reproduce table1 --quick`."
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    from identrep import __version__
    from identrep.experiments import TABLES

    p = argparse.ArgumentParser(
        prog="identrep",
        description="Identifiable representation learning from task structure.",
    )
    p.add_argument("--version", action="version", version=f"identrep {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="fit MTLCM on the Table 1 process and explain it")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--n-latents", type=int, default=10)
    d.add_argument("--n-causal", type=int, default=2)
    d.add_argument("--show-tasks", type=int, default=5)
    d.add_argument(
        "--two-stage",
        action="store_true",
        help="non-linear data: MTRN then MTLCM (about a minute)",
    )
    d.set_defaults(func=cmd_demo)

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

    rep = sub.add_parser(
        "report", help="rebuild results.csv and report.md from records"
    )
    rep.add_argument("dir")
    rep.set_defaults(func=cmd_report)

    from identrep.workflow import add_subcommands  # identrep fit / transform

    add_subcommands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
