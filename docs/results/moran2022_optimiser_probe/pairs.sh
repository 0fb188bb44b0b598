#!/usr/bin/env bash
# Rebuild pairs.txt from the probe output here (run from the repository root:
# bash docs/results/moran2022_optimiser_probe/pairs.sh > docs/results/moran2022_optimiser_probe/pairs.txt).
set -euo pipefail
D=docs/results/moran2022_optimiser_probe
P="${PYTHON:-python} benchmarks/moran2022_probe_pairs.py"
pair() { echo "\$ python benchmarks/moran2022_probe_pairs.py $*"; $P "$@"; }
for row in SVAE_KL1overK VAE_KL1overK SparseVAE VAE; do
  for m in "nll 1" "recall_at_5_same_rows 100" "ndcg_at_10_same_rows 100"; do
    set -- $m
    pair docs/results/moran2022_table1a --against $row --metric $1 --scale $2 $D/table1a_*.txt
  done
  pair docs/results/moran2022_table1b --against $row $D/table1b_*.txt
  pair docs/results/moran2022_table2_e50 --against $row $D/table2_*.txt
  pair docs/results/moran2022_table4 --against $row --metric accuracy --scale 100 $D/table4_*.txt
done
