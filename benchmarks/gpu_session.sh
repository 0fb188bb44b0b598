#!/usr/bin/env bash
# One session on a GPU machine (issues 13 and 16), every stage independent:
#   1. full QM9 (Figure 3): one EGNN-MTRN + MTLCM run per (latent dim, seed), all
#      started at once on the one GPU, each with a wall-clock training budget
#      (MTRN max_time; the cosine schedule ends within it), then one report;
#   2. MTLCM on CUDA against the CPU (benchmarks/bench_cuda.py), while the QM9
#      processes still parse their data on the CPU;
#   3. the CUDA-parametrised unit tests (pytest -m gpu).
# Usage, from the repository root, with python3 holding torch and QM9 from qm9pack
# or in $IDENTREP_DATA/qm9 (qm9pack's files or load_qm9's subset format):
#   OUT=/tmp/gpu QM9_BUDGET=300 QM9_DIMS="5 6 7 8" bash benchmarks/gpu_session.sh
# OUT receives at most 5 files: bench_cuda.json, qm9_gpu.tar.gz (records, report,
# plots; no latents), logs.tar.gz; everything important is also printed.
# A dry run without a GPU: DEVICE=cpu QM9_ARGS="--qm9-source tests/data/qm9".
set -u
OUT=${OUT:-/tmp/gpu_session}
WORK=${WORK:-/tmp/qm9_gpu}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
DIMS=${QM9_DIMS:-5 6 7 8}
BUDGET=${QM9_BUDGET:-300}
QM9_ARGS=${QM9_ARGS:-}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 IDENTREP_PROGRESS_SECONDS=0
export IDENTREP_DATA=${IDENTREP_DATA:-$PWD/.devdata}
LOGS=$WORK/logs
mkdir -p "$OUT" "$LOGS"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0)) s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "cores $(nproc)"
$PY -c "import sys, numpy, scipy, sklearn, pandas, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__, 'pandas', pandas.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"

n_runs=$(($(echo $DIMS | wc -w) * 2))
threads=$(($(nproc) / n_runs))
threads=$((threads > 0 ? threads : 1))
log "QM9: $n_runs runs (d in $DIMS, seeds 0 1), $threads threads and $BUDGET s each"
for d in $DIMS; do
  for s in 0 1; do
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads $PY benchmarks/qm9_logged.py --device "$DEVICE" \
      --max-time "$BUDGET" --latent-dims "$d" --seeds 2 --where "seed=$s" \
      --max-epochs 300 --out "$WORK/d${d}s${s}" $QM9_ARGS \
      >"$LOGS/qm9_d${d}_s${s}.log" 2>&1 &
  done
done

log "MTLCM on CUDA"
timeout 170 $PY benchmarks/bench_cuda.py --json "$OUT/bench_cuda.json" 2>&1 |
  tee "$LOGS/bench_cuda.txt"

log "CUDA unit tests"
timeout 200 $PY -m pytest -q -p no:cacheprovider -m gpu tests/unit \
  >"$LOGS/gpu_tests.txt" 2>&1
grep -E "passed|failed|error" "$LOGS/gpu_tests.txt" | tail -8

log "waiting for the QM9 runs"
while [ -n "$(jobs -rp)" ]; do
  sleep 30
  log "epochs: $(for f in "$LOGS"/qm9_d*.log; do grep -o '[0-9]*/300 epochs' "$f" | tail -n 1 | cut -d/ -f1; done | tr '\n' ' ')"
done
log "QM9 runs ended"
for f in "$LOGS"/qm9_d*.log; do echo "== $f"; tail -n 4 "$f"; done
mkdir -p "$WORK/all/records" "$WORK/all/latents"
for run in "$WORK"/d*s*; do
  cp "$run"/records/*.json "$WORK/all/records/" 2>/dev/null
  cp "$run"/latents/* "$WORK/all/latents/" 2>/dev/null
done
# shellcheck disable=SC2086
OMP_NUM_THREADS=4 $PY benchmarks/qm9_logged.py --latent-dims "$(echo $DIMS | tr ' ' ,)" \
  --seeds 2 --max-epochs 300 --out "$WORK/all" $QM9_ARGS >"$LOGS/qm9_report.log" 2>&1
tail -n 25 "$LOGS/qm9_report.log"
tar czf "$OUT/qm9_gpu.tar.gz" -C "$WORK/all" --exclude=./latents . 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C "$WORK" logs
log "done"
