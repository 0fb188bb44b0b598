#!/usr/bin/env bash
# Rebuild pairs.txt from the probe output here (run from the repository root:
# bash docs/results/moran2022_lr_probe/pairs.sh > docs/results/moran2022_lr_probe/pairs.txt).
set -euo pipefail
D=docs/results/moran2022_lr_probe
P="${PYTHON:-python} benchmarks/moran2022_probe_pairs.py"
pair() { echo "\$ python benchmarks/moran2022_probe_pairs.py $*"; $P "$@"; }
# each refit at the authors' Adam learning rate 1e-2 against the stored row (1e-3)
for row in VAE:vae VAE_KL1overK:vae_kl1overk SparseVAE:svae SVAE_KL1overK:svae_kl1overk; do
  f=$D/table4_${row#*:}_lr1e-2.txt
  [ -f $f ] && pair docs/results/moran2022_table4 --against ${row%%:*} --metric accuracy --scale 100 $f
done
for t in table1b table1a; do
  for row in VAE:vae VAE_KL1overK:vae_kl1overk SparseVAE:svae SVAE_KL1overK:svae_kl1overk; do
    f=$D/${t}_${row#*:}_lr1e-2.txt
    [ -f $f ] && pair docs/results/moran2022_$t --against ${row%%:*} --metric nll $f
  done
done
# the like-for-like pair, both at 1e-2
pair $D/table4_vae_kl1overk_lr1e-2.txt --against VAE_KL1overK --metric accuracy --scale 100 $D/table4_svae_kl1overk_lr1e-2.txt
pair $D/table4_vae_lr1e-2.txt --against VAE --metric accuracy --scale 100 $D/table4_svae_lr1e-2.txt
pair $D/table1b_vae_kl1overk_lr1e-2.txt --against VAE_KL1overK --metric nll $D/table1b_svae_kl1overk_lr1e-2.txt
pair $D/table1b_vae_lr1e-2.txt --against VAE --metric nll $D/table1b_svae_lr1e-2.txt
[ -s $D/table1a_svae_kl1overk_lr1e-2.txt ] && pair $D/table1a_vae_kl1overk_lr1e-2.txt --against VAE_KL1overK --metric nll $D/table1a_svae_kl1overk_lr1e-2.txt
true
