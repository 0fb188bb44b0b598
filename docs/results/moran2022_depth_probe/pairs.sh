#!/usr/bin/env bash
# Rebuild pairs.txt from the probe output here (run from the repository root:
# bash docs/results/moran2022_depth_probe/pairs.sh > docs/results/moran2022_depth_probe/pairs.txt).
set -euo pipefail
D=docs/results/moran2022_depth_probe
P="${PYTHON:-python} benchmarks/moran2022_probe_pairs.py"
pair() { echo "\$ python benchmarks/moran2022_probe_pairs.py $*"; $P "$@"; }
# the Sparse VAE against the VAE, both at three hidden layers (like for like)
pair $D/table1b_vae_kl1overk_3layers.txt --against VAE_KL1overK $D/table1b_svae_kl1overk_3layers.txt
pair $D/table2_vae_kl1overk_3layers.txt --against VAE_KL1overK $D/table2_svae_kl1overk_3layers.txt
# each three-layer refit against the stored two-layer row of the same model
pair docs/results/moran2022_table1b --against VAE_KL1overK $D/table1b_vae_kl1overk_3layers.txt
pair docs/results/moran2022_table1b --against SVAE_KL1overK $D/table1b_svae_kl1overk_3layers.txt
pair docs/results/moran2022_table1b --against VAE $D/table1b_vae_3layers.txt
pair docs/results/moran2022_table2_e50 --against VAE_KL1overK $D/table2_vae_kl1overk_3layers.txt
pair docs/results/moran2022_table2_e50 --against SVAE_KL1overK $D/table2_svae_kl1overk_3layers.txt
# Table 1a (stop 34): the pair at three layers, each refit against its stored row (NLL, then same-rows Recall@5 and NDCG@10 x100)
pair $D/table1a_vae_kl1overk_3layers.txt --against VAE_KL1overK $D/table1a_svae_kl1overk_3layers.txt
pair docs/results/moran2022_table1a --against VAE_KL1overK $D/table1a_vae_kl1overk_3layers.txt
pair docs/results/moran2022_table1a --against SVAE_KL1overK $D/table1a_svae_kl1overk_3layers.txt
for m in recall_at_5_same_rows ndcg_at_10_same_rows; do
  pair $D/table1a_vae_kl1overk_3layers.txt --against VAE_KL1overK --metric $m --scale 100 $D/table1a_svae_kl1overk_3layers.txt
done
# Table 1b at KL 1 (stop 34): the Sparse VAE at three layers against the VAE at three layers, and against its stored two-layer row
pair $D/table1b_vae_3layers.txt --against VAE $D/table1b_svae_3layers.txt
pair docs/results/moran2022_table1b --against SparseVAE $D/table1b_svae_3layers.txt
# Table 4 (stop 34): the KL-1/K pair at three layers (accuracy x100), each refit against its stored row
pair $D/table4_vae_kl1overk_3layers.txt --against VAE_KL1overK --metric accuracy --scale 100 $D/table4_svae_kl1overk_3layers.txt
pair docs/results/moran2022_table4 --against VAE_KL1overK --metric accuracy --scale 100 $D/table4_vae_kl1overk_3layers.txt
pair docs/results/moran2022_table4 --against SVAE_KL1overK --metric accuracy --scale 100 $D/table4_svae_kl1overk_3layers.txt
# Table 1b (stop 47): the beta-VAE and VSC at the authors' KL scaling, three layers, against the VAE at three layers and their stored two-layer rows
pair $D/table1b_vae_kl1overk_3layers.txt --against VAE_KL1overK $D/table1b_betavae_klbetaoverk_3layers.txt
pair $D/table1b_vae_kl1overk_3layers.txt --against VAE_KL1overK $D/table1b_vsc_kl1overk_3layers.txt
pair docs/results/moran2022_table1b --against BetaVAE_KLbetaoverK $D/table1b_betavae_klbetaoverk_3layers.txt
pair docs/results/moran2022_table1b --against VSC_KL1overK $D/table1b_vsc_kl1overk_3layers.txt
