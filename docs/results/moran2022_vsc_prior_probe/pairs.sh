#!/usr/bin/env bash
# Rebuild pairs.txt from the probe output here (run from the repository root:
# bash docs/results/moran2022_vsc_prior_probe/pairs.sh > docs/results/moran2022_vsc_prior_probe/pairs.txt).
set -euo pipefail
D=docs/results/moran2022_vsc_prior_probe
P="${PYTHON:-python} benchmarks/moran2022_probe_pairs.py"
pair() { echo "\$ python benchmarks/moran2022_probe_pairs.py $*"; $P "$@"; }
# the pseudo-input prior at KL weight 1 (the authors' VSC weight) against the stored VSC row
pair docs/results/moran2022_table1b --against VSC $D/table1b_vsc.txt
pair docs/results/moran2022_table2_e50 --against VSC $D/table2_vsc.txt
pair docs/results/moran2022_table4 --against VSC --metric accuracy --scale 100 $D/table4_vsc.txt
# at KL weight 1/K: the study's VSC_KL1overK reproduced ([]) and with the prior
pair docs/results/moran2022_table1b --against VSC_KL1overK $D/table1b_vsc_kl1overk.txt
pair docs/results/moran2022_table2_e50 --against VSC_KL1overK $D/table2_vsc_kl1overk.txt
pair docs/results/moran2022_table4 --against VSC_KL1overK --metric accuracy --scale 100 $D/table4_vsc_kl1overk.txt
pair docs/results/moran2022_table1a --against VSC_KL1overK $D/table1a_vsc_kl1overk.txt
pair docs/results/moran2022_table1a --against VSC_KL1overK --metric recall_at_5_same_rows --scale 100 $D/table1a_vsc_kl1overk.txt
# the authors' pairing: their VSC (KL weight 1) against their VAE (KL weight 1/K)
pair docs/results/moran2022_table1b --against VAE_KL1overK $D/table1b_vsc.txt $D/table1b_vsc_kl1overk.txt
pair docs/results/moran2022_table2_e50 --against VAE_KL1overK $D/table2_vsc.txt $D/table2_vsc_kl1overk.txt
pair docs/results/moran2022_table4 --against VAE_KL1overK --metric accuracy --scale 100 $D/table4_vsc.txt $D/table4_vsc_kl1overk.txt
# the port's whole VSC on Table 4 (alpha 0.01, c 10, no warm-up, penalty weight G / K = 558 / 15), KL weight 1
pair docs/results/moran2022_table4 --against VSC --metric accuracy --scale 100 $D/table4_vsc_port.txt
# Table 4 with VSC's features from the slab mean mu (--slab-mean; the authors' evaluator's codes), fixed and pseudo-input prior
pair docs/results/moran2022_table4 --against VSC --metric accuracy --scale 100 $D/table4_vsc_slab_mean.txt
pair docs/results/moran2022_table4 --against VAE_KL1overK --metric accuracy --scale 100 $D/table4_vsc_slab_mean.txt
pair docs/results/moran2022_table4 --against VSC_KL1overK --metric accuracy --scale 100 $D/table4_vsc_kl1overk_slab_mean.txt
