#!/bin/bash
# Merge the constant-rate Sparse VAE records of stop 33 into the four table folders,
# keep the cosine-decay ones in svae_cosine_records/, rebuild reports and paired.txt.
# Run once at stop 33 on the machine that holds /work/runs/m33 (the re-run folders); kept as the record of the merge.
set -euo pipefail
cd /work/main
R=/work/runs/m33
export IDENTREP_DATA=/work/shared/data OMP_NUM_THREADS=1
declare -A SRC=([table1a]="t1a_A t1a_B" [table1b]="t1b_A t1b_B" [table2_e50]="t2_B" [table4]="t4_A")
for t in ${@:-table1a table1b table2_e50 table4}; do
  F=docs/results/moran2022_$t
  if [ ! -d $F/svae_cosine_records ]; then
    mkdir -p $F/svae_cosine_records
    git mv $F/records/*-SparseVAE-* $F/records/*-SVAE_KL1overK-* $F/svae_cosine_records/
  fi
  for s in ${SRC[$t]}; do cp $R/$s/records/*.json $F/records/; done
  echo "$t: $(ls $F/records | wc -l) records, $(ls $F/svae_cosine_records | wc -l) kept"
  .venv/bin/identrep report $F > /dev/null
  grep '^\$ ' $F/paired.txt | sed 's/^\$ python //; s/ --with-cosine//' > /tmp/cmds_$t
  if [ $t = table1a ] && ! grep -q "ndcg_at_10_same_rows --scale 100 --model SVAE_KL1overK" /tmp/cmds_$t; then
    for m in recall_at_5_same_rows ndcg_at_10_same_rows; do
      echo "benchmarks/moran2022_ordering.py $F $m --scale 100 --model SVAE_KL1overK --with-adam" >> /tmp/cmds_$t
    done
  fi
  while read -r c; do
    echo "\$ python $c --with-cosine"
    .venv/bin/python $c --with-cosine
  done < /tmp/cmds_$t > $F/paired.txt.new
  mv $F/paired.txt.new $F/paired.txt
done
