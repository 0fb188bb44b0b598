"""Table 2 with the authors' stage-1 training: each probe run and cell by the paper.

Reads the JSON files that ``chen2024_table2_p200_probe.py --json`` writes (from
the folders or files given), groups the runs by (k, p) and, for the runs trained
to ``--epochs`` (default 2,000, the reference's count; a longer run is read at
that epoch), prints one markdown table
per run (weak MCC at the last epoch, smallest canonical correlation, escaped or
not, MTLCM when fitted) and one per cell: the mean ± std (ddof 0, as the vs-paper
documents) over seeds of the weak MCC and of MTLCM, the number of seeds that left
the saddle, and a two-sided Welch test against the paper's mean ± std over its 5
seeds (``vs_paper_significance.test_cell``). A run "escaped" when its smallest
canonical correlation at the last epoch is above ``--escape`` (0.9). Runs of a
variant (any probe setting other than the authors', e.g. ``--layers 2`` or
``--torch-decoder``) form cells of their own, the setting beside k and p, and are
left out of the plot.

With ``--plot FILE`` it also draws, per cell (rows by p, columns by k), the weak
MCC and, below it, the smallest canonical correlation against the epoch, one line
per seed, with the paper's MTRN weak MCC as a band (mean ± std); runs stopped
before ``--epochs`` are drawn dashed and left out of the tables.

Run from the repository root, e.g.::

    PYTHONPATH=src python benchmarks/chen2024_table2_p200_summary.py \
        docs/results/table2_p200_probe_s40 docs/results/table2_p200_probe_s41 \
        --plot docs/results/plots/chen2024_table2_p200_trajectories.png
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from identrep.experiments.plots import _pyplot, save_figure
from identrep.experiments.registry import published_results
from vs_paper_significance import Cell, test_cell

PAPER_SEEDS = 5
SUFFIXES = {".json", ".txt", ".log"}
# the probe's settings that the authors' configuration has (a run with any other
# value is a variant, tabulated apart and left out of the plot)
AUTHORS = {
    "n_tasks": 500,
    "hidden": 200,
    "layers": 1,
    "torch_decoder": False,
    "lr": 1e-3,
    "batch": 1024,
    "std_inputs": False,
    "std_targets": False,
    "refit_heads": False,
    "library": False,
}


def variant(args: dict) -> str:
    """'' for the authors' configuration, else the settings that differ from it
    (older logs lack the later options, which then take the authors' value)."""
    return ", ".join(
        f"{k}={args[k]}" for k, v in AUTHORS.items() if args.get(k, v) != v
    )


def _read(f: Path) -> dict:
    """A probe's ``--json`` file, or its log (stdout: one JSON object per line,
    the arguments first, the evaluations, then the final scores if it finished)."""
    if f.suffix == ".json":
        return json.loads(f.read_text())
    d: dict = {"rows": [], "final": {}}
    for line in f.read_text().splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)  # the json module reads NaN
        if "args" in obj:
            d["args"] = obj["args"]
        elif "epoch" in obj:
            d["rows"].append(obj)
        else:
            d["final"] = obj
    if "args" not in d:
        raise ValueError(f"{f}: no probe arguments line; is it a probe log?")
    return d


def load_runs(paths: list[str]) -> list[dict]:
    """Every probe JSON or log (``*.json``, ``*.txt``, ``*.log``) under the given
    folders, or the files themselves, keyed by (k, p, seed) read from the file; of
    two records of the same run the one with more epochs is kept."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.suffix in SUFFIXES))
        else:
            files.append(p)
    best: dict[tuple[int, int, int], dict] = {}
    for f in files:
        d = _read(f)
        a, rows = d["args"], d["rows"]
        if not rows:
            continue
        run = {
            "variant": variant(a),
            "k": a["k"],
            "p": a["p"],
            "seed": a["seed"],
            "file": f,
            "epochs": [r["epoch"] for r in rows],
            "weak": [100.0 * r["weak_mcc"] for r in rows],
            "cc_min": [min(r["cc_min3"]) for r in rows],
            "mtlcm": None,
        }
        final = d.get("final") or {}
        if "mcc_task_spearman" in final:
            run["mtlcm"] = 100.0 * final["mcc_task_spearman"]
        key = (run["variant"], run["k"], run["p"], run["seed"])
        old = best.get(key)
        if old is None or (run["epochs"][-1], run["mtlcm"] is not None) > (
            old["epochs"][-1],
            old["mtlcm"] is not None,
        ):
            best[key] = run
    return [best[k] for k in sorted(best)]


def _mean_std(xs: list[float]) -> tuple[float, float]:
    return float(np.mean(xs)), float(np.std(xs))


def _welch(xs: list[float], mean: float, std: float) -> float:
    """Two-sided Welch p of the seeds ``xs`` against the paper's mean ± std over
    its seeds, as ``vs_paper_significance`` tests every vs-paper cell."""
    if len(xs) < 2:
        return math.nan
    m, s0 = _mean_std(xs)
    return test_cell(Cell("", "", m, s0, len(xs), mean, std, False), PAPER_SEEDS)[2]


def paper_cells() -> dict[tuple[str, int, int], tuple[float, float]]:
    pub = published_results("table2")
    return {
        (r.model, int(r.n_causal), int(r.n_observed)): (r.mcc_mean, r.mcc_std)
        for r in pub.itertuples()
    }


def _cell(var: str, k: int, p: int) -> str:
    return f"{k}, {p}" + (f" ({var})" if var else "")


def _at_epoch(run: dict, full: int) -> dict | None:
    """The run as it stood at epoch ``full`` (None if not evaluated there); a
    longer run is cut there, without its MTLCM, which is fitted at the end only."""
    if full not in run["epochs"]:
        return None
    i = run["epochs"].index(full) + 1
    if i == len(run["epochs"]):
        return run
    cut = {key: run[key][:i] for key in ("epochs", "weak", "cc_min")}
    return {**run, **cut, "mtlcm": None}


def tables(runs: list[dict], full: int, escape: float) -> str:
    paper = paper_cells()
    out = [
        f"Runs trained to {full:,} epochs (weak MCC x100 at the last epoch; "
        f"escaped: smallest canonical correlation above {escape}):",
        "",
        "| k, p | seed | weak MCC | smallest canonical correlation | escaped? "
        "| MTLCM |",
        "|---|---|---|---|---|---|",
    ]
    cells = defaultdict(list)
    for r in filter(None, (_at_epoch(r, full) for r in runs)):
        cells[(r["variant"], r["k"], r["p"])].append(r)
        mt = "-" if r["mtlcm"] is None else f"{r['mtlcm']:.2f}"
        esc = "yes" if r["cc_min"][-1] > escape else "no"
        out.append(
            f"| {_cell(r['variant'], r['k'], r['p'])} | {r['seed']} | "
            f"{r['weak'][-1]:.2f} | {r['cc_min'][-1]:.3f} | {esc} | {mt} |"
        )
    out += [
        "",
        "Per cell (mean ± std over the seeds above, ddof 0; Welch p against the "
        "paper's mean ± std over its 5 seeds):",
        "",
        "| k, p | seeds | escaped | weak MCC | paper weak | Welch p | MTLCM (seeds) "
        "| paper MTLCM | Welch p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (var, k, p), rs in sorted(cells.items()):
        weak = [r["weak"][-1] for r in rs]
        mt = [r["mtlcm"] for r in rs if r["mtlcm"] is not None]
        pw, pm = paper[("MTRN-weak", k, p)], paper[("MTLCM", k, p)]
        n_esc = sum(r["cc_min"][-1] > escape for r in rs)
        m, s = _mean_std(weak)
        mt_txt, mt_p = "-", "-"
        if mt:
            mm, ms = _mean_std(mt)
            mt_txt = f"{mm:.2f} ± {ms:.2f} ({len(mt)})"
            mt_p = f"{_welch(mt, *pm):.3g}"
        seeds = ", ".join(str(r["seed"]) for r in rs)
        out.append(
            f"| {_cell(var, k, p)} | {len(rs)} ({seeds}) | "
            f"{n_esc} of {len(rs)} | {m:.2f} ± {s:.2f} | {pw[0]:.2f} ± {pw[1]:.2f} | "
            f"{_welch(weak, *pw):.3g} | {mt_txt} | {pm[0]:.2f} ± {pm[1]:.2f} | {mt_p} |"
        )
    stopped = [r for r in runs if r["epochs"][-1] < full]
    if stopped:
        out += ["", "Stopped before the last epoch (left out above):", ""]
        for r in stopped:
            out.append(
                f"- k = {r['k']}, p = {r['p']}"
                + (f" ({r['variant']})" if r["variant"] else "")
                + f", seed {r['seed']}: epoch "
                f"{r['epochs'][-1]:,}, weak MCC {r['weak'][-1]:.2f}, smallest "
                f"canonical correlation {r['cc_min'][-1]:.3f}"
                + ("" if r["mtlcm"] is None else f", MTLCM {r['mtlcm']:.2f}")
            )
    return "\n".join(out)


def plot(runs: list[dict], path: str, full: int, escape: float) -> Path:
    """One row pair per p (weak MCC above, smallest canonical correlation below),
    one column per k, the authors' configuration only; panels without runs are
    left blank."""
    plt = _pyplot()
    paper = paper_cells()
    runs = [r for r in runs if not r["variant"]]
    ks = sorted({r["k"] for r in runs})
    ps = sorted({r["p"] for r in runs})
    fig, axes = plt.subplots(
        2 * len(ps), len(ks), figsize=(3.6 * len(ks), 2.3 * 2 * len(ps)), squeeze=False
    )
    for i, p in enumerate(ps):
        for j, k in enumerate(ks):
            top, bottom = axes[2 * i, j], axes[2 * i + 1, j]
            cell = [r for r in runs if (r["k"], r["p"]) == (k, p)]
            if not cell:
                top.axis("off")
                bottom.axis("off")
                continue
            mean, std = paper[("MTRN-weak", k, p)]
            top.axhspan(mean - std, mean + std, color="0.85", label="paper ± std")
            top.axhline(mean, color="0.4", lw=1)
            for r in cell:
                ls = "-" if r["epochs"][-1] >= full else "--"
                lab = f"seed {r['seed']}" + ("" if ls == "-" else " (stopped)")
                (line,) = top.plot(r["epochs"], r["weak"], ls, lw=1.3, label=lab)
                bottom.plot(
                    r["epochs"], r["cc_min"], ls, lw=1.3, color=line.get_color()
                )
            bottom.axhline(escape, color="0.4", lw=1, ls=":")
            top.set_title(f"k = {k}, p = {p}", fontsize=10)
            top.set_ylim(80, 100)
            bottom.set_ylim(0, 1.02)
            top.tick_params(labelbottom=False)
            bottom.set_xlabel("epoch", fontsize=8)
            top.set_ylabel("weak MCC x100", fontsize=8)
            bottom.set_ylabel("smallest canon. corr.", fontsize=8)
            top.legend(fontsize=6, loc="lower right")
    fig.suptitle(
        "Table 2, stage 1 trained the authors' way: MTRN weak MCC and the weakest "
        "latent direction per epoch",
        fontsize=10,
    )
    fig.tight_layout()
    out = save_figure(fig, path, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="probe JSON files or folders of them")
    ap.add_argument("--epochs", type=int, default=2000, help="a full run's epochs")
    ap.add_argument("--escape", type=float, default=0.9)
    ap.add_argument("--plot", default=None, help="write the trajectories here")
    args = ap.parse_args(argv)
    runs = load_runs(args.paths)
    if not runs:
        raise SystemExit(f"no probe JSON found under {args.paths}")
    print(tables(runs, args.epochs, args.escape))
    if args.plot:
        print(f"\nwrote {plot(runs, args.plot, args.epochs, args.escape)}")


if __name__ == "__main__":
    main()
