"""Is each difference to the paper larger than two seed samples of the same model give?

The vs-paper reports (``docs/results/*_vs_paper.md``) flag a cell when ours minus
the paper exceeds the paper's std. That criterion compares a difference of two
*means* with the spread of single seeds: two 5-seed samples of one and the same
model differ by more than one std about one time in ten (|t| > 1.58 for the
difference of two means, each with std sigma over 5 seeds), so among a hundred cells
some are flagged by seed noise alone. This script reads every cell of a report whose
"ours" column is ``mean ± std (n)`` and whose "paper" column is ``mean ± std``
and gives Welch's t-test for the two means:

- ours' std is stored with ddof 0 (the reports say so) and converted to ddof 1;
  the paper's std is taken as printed, 5 seeds or splits (``--paper-n``) — were it
  ddof 0 as well, its true standard error is larger, so the p-values here are, if
  anything, too small (the test errs towards calling a difference real);
- cells that are agreements across seed pairs (a table title with "pairs", e.g.
  Table 3: 10 pairs of 5 seeds, not independent) get two bounds: pairs taken as
  independent (standard error std / sqrt(pairs), the smallest, so the smallest p)
  and Hoeffding's bound for a mean over all pairs (variance at most 2 / n_seeds
  times the pairs' variance, the largest p). A cell is "indistinguishable" only if
  even the smallest p is at least ``--alpha``, "different" only if even the largest
  is below it, otherwise "undecided";
- Holm's correction over all tested cells of the report is printed beside the raw
  p-value, but the verdicts use the raw p-value (so "indistinguishable" is never
  the product of the correction).

Run from the repository root (writes nothing; the stored outputs are
``docs/results/*_vs_paper_significance.txt``)::

    python benchmarks/vs_paper_significance.py docs/results/chen2024_vs_paper.md
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

_OURS = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*±\s*(\d+(?:\.\d+)?)\s*\((\d+)\)")
_PAPER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*±\s*(\d+(?:\.\d+)?)\s*$")


@dataclass
class Cell:
    section: str
    key: str
    ours: float
    ours_sd: float  # ddof 0, as stored
    n: int
    paper: float
    paper_sd: float
    pairs: bool


def read_cells(path: Path) -> list[Cell]:
    """Every table row with ``mean ± std (n)`` then ``mean ± std`` in columns 2-3."""
    cells, heading, pairs = [], "", False
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            pairs = "pairs" in heading.lower()
            continue
        if not line.startswith("|"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) < 3:
            continue
        if "pairs" in cols[1].lower():  # a header naming pairs marks the table
            pairs = True
        mo, mp = _OURS.match(cols[1]), _PAPER.match(cols[2])
        if mo is None or mp is None:
            continue
        cells.append(
            Cell(
                heading,
                cols[0],
                float(mo[1]),
                float(mo[2]),
                int(mo[3]),
                float(mp[1]),
                float(mp[2]),
                pairs,
            )
        )
    return cells


def welch_p(m1: float, se1: float, df1: float, m2: float, se2: float, df2: float):
    """Two-sided Welch t-test from means, standard errors and degrees of freedom."""
    se = math.hypot(se1, se2)
    if se == 0.0:
        return (math.inf if m1 != m2 else 0.0), math.inf, (0.0 if m1 != m2 else 1.0)
    t = (m1 - m2) / se
    df = se**4 / (se1**4 / df1 + se2**4 / df2)  # Welch-Satterthwaite
    return t, df, 2.0 * stats.t.sf(abs(t), df)


def test_cell(c: Cell, paper_n: int) -> tuple[float, float, float, float]:
    """(t, df, smallest p, largest p); the two p agree for independent seeds."""
    s1 = c.ours_sd * math.sqrt(c.n / (c.n - 1)) if c.n > 1 else math.nan
    if not c.pairs:
        t, df, p = welch_p(
            c.ours,
            s1 / math.sqrt(c.n),
            c.n - 1,
            c.paper,
            c.paper_sd / math.sqrt(paper_n),
            paper_n - 1,
        )
        return t, df, p, p
    n_pairs, p_pairs = math.comb(c.n, 2), math.comb(paper_n, 2)
    s1 = c.ours_sd * math.sqrt(n_pairs / (n_pairs - 1))
    t, df, p_small = welch_p(
        c.ours,
        s1 / math.sqrt(n_pairs),
        n_pairs - 1,
        c.paper,
        c.paper_sd / math.sqrt(p_pairs),
        p_pairs - 1,
    )
    _, _, p_large = welch_p(
        c.ours,
        s1 * math.sqrt(2.0 / c.n),
        c.n - 1,
        c.paper,
        c.paper_sd * math.sqrt(2.0 / paper_n),
        paper_n - 1,
    )
    return t, df, p_small, p_large


def _over(c: Cell) -> bool:
    """The reports' "exceeds paper std?" (on the difference as printed, 2 decimals)."""
    return round(abs(c.ours - c.paper), 2) > c.paper_sd


def holm(ps: list[float]) -> list[float]:
    order = sorted(range(len(ps)), key=ps.__getitem__)
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, nargs="*")
    ap.add_argument(
        "--cell",
        nargs=2,
        action="append",
        default=[],
        metavar=("OURS", "PAPER"),
        help='a cell not in a report, e.g. --cell "58.06 ± 0.56 (5)" "58.70 ± 0.33"',
    )
    ap.add_argument(
        "--pairs",
        action="store_true",
        help="--cell values are agreements over seed pairs",
    )
    ap.add_argument(
        "--paper-n", type=int, default=5, help="the paper's seeds or splits per cell"
    )
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument(
        "--only-flagged",
        action="store_true",
        help="cells whose difference exceeds the paper's std",
    )
    args = ap.parse_args(argv)
    for ours, paper in args.cell:
        mo, mp = _OURS.match(ours), _PAPER.match(paper)
        if mo is None or mp is None:
            ap.error(
                "--cell expects 'mean ± std (n)' and 'mean ± std', "
                f"got {ours!r} and {paper!r}"
            )
        if int(mo[3]) < 2:
            ap.error(f"--cell needs at least 2 seeds on our side, got {ours!r}")
        c = Cell(
            "--cell",
            ours,
            float(mo[1]),
            float(mo[2]),
            int(mo[3]),
            float(mp[1]),
            float(mp[2]),
            args.pairs,
        )
        t, df, p_lo, p_hi = test_cell(c, args.paper_n)
        print(
            f"{ours} against {paper}: {c.ours - c.paper:+.2f}, t {t:+.2f}, "
            f"df {df:.1f}, p {p_lo:.3g} to {p_hi:.3g}"
        )
    for path in args.report:
        cells = [c for c in read_cells(path) if c.n > 1]
        if args.only_flagged:
            cells = [c for c in cells if _over(c)]
        res = [test_cell(c, args.paper_n) for c in cells]
        adj = holm([r[3] for r in res])
        over = sum(_over(c) for c in cells)
        print(
            f"# {path} ({len(cells)} cells with a std on both sides; "
            f"{over} over the paper's std)"
        )
        print(
            "| table | cell | ours − paper | t | df "
            "| p (smallest) | p (largest) | Holm p | verdict |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        counts = {"different": 0, "indistinguishable": 0, "undecided": 0}
        for c, (t, df, p_lo, p_hi), h in zip(cells, res, adj, strict=True):
            if p_lo >= args.alpha:
                verdict = "indistinguishable"
            elif p_hi < args.alpha:
                verdict = "different"
            else:
                verdict = "undecided"
            counts[verdict] += 1
            flag = "" if _over(c) else " (within the paper's std)"
            print(
                f"| {c.section} | {c.key} | {c.ours - c.paper:+.2f}{flag} "
                f"| {t:+.2f} | {df:.1f} "
                f"| {p_lo:.3g} | {p_hi:.3g} | {h:.3g} | {verdict} |"
            )
        print()
        print(
            f"{counts['different']} different, "
            f"{counts['indistinguishable']} indistinguishable, "
            f"{counts['undecided']} undecided at alpha {args.alpha} "
            f"(raw p; Holm over {len(cells)} cells beside it)"
        )
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
