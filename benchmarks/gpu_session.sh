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
# STAGES (default "qm9 cuda tests"; also "probe", run first: gpu_mtrn_probe.py's
# dense / capturable / graph-replay variants on PROBE_N molecules) picks the
# stages; QM9_SEEDS (default "0 1") the seeds of each latent dim; QM9_FEATURES=1
# also returns the runs' MTRN features (benchmarks/qm9_pack_features.py:
# features_d<d>_<k>.npz, two runs a file). QM9_GRAPHS=1 trains with replayed CUDA
# graphs (qm9_logged.py --cuda-graphs), =auto only if the probe found them exact
# and faster. QM9_EPOCHS (default 300): MTRN's max_epochs.
# Training over several sessions (QM9_CKPT=folder, kept between sessions): each run
# checkpoints MTRN every epoch in QM9_CKPT/ckpt (qm9_logged.py --checkpoint-dir) and
# keeps its records in QM9_CKPT/d<d>s<s>; a run that QM9_BUDGET ends is paused (no
# record) and the next session, given the same folder back, continues it to the
# same bits (the cosine schedule follows QM9_EPOCHS; QM9_PATIENCE sets early
# stopping; the same QM9_GRAPHS, or the checkpoint is refused). OUT then also gets
# qm9_ckpt.tar.gz (the folder without latents, which a finished run recomputes from
# its checkpoint without training): unpack it into the folder before the next
# session, also before a second call on the same warm machine (an ignored folder
# that a call does not carry is gone there). The report is made once no run is
# paused. The runs of issue 13 part 4 in progress, and how to continue them:
# docs/results/qm9_gpu_full_d8_ckpt/README.md.
set -u
OUT=${OUT:-/tmp/gpu_session}
WORK=${WORK:-/tmp/qm9_gpu}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python3}
DIMS=${QM9_DIMS:-5 6 7 8}
SEEDS=${QM9_SEEDS:-0 1}
BUDGET=${QM9_BUDGET:-300}
EPOCHS=${QM9_EPOCHS:-300}
QM9_ARGS=${QM9_ARGS:-}
STAGES=${STAGES:-qm9 cuda tests}
CKPT=${QM9_CKPT:-}
RUNS=$WORK
if [ -n "$CKPT" ]; then
  RUNS=$CKPT
  QM9_ARGS="$QM9_ARGS --checkpoint-dir $CKPT/ckpt"
fi
[ -n "${QM9_PATIENCE:-}" ] && QM9_ARGS="$QM9_ARGS --patience $QM9_PATIENCE"
# QM9_GRAPHS=1: MTRN's steps replayed as CUDA graphs (qm9_logged.py --cuda-graphs);
# QM9_GRAPHS=auto: only if the probe stage found them exact and faster
[ "${QM9_GRAPHS:-}" = 1 ] && QM9_ARGS="$QM9_ARGS --cuda-graphs"
has() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 IDENTREP_PROGRESS_SECONDS=0
export IDENTREP_DATA=${IDENTREP_DATA:-$PWD/.devdata}
LOGS=$WORK/logs
mkdir -p "$OUT" "$LOGS"
T0=$(date +%s)
log() { echo "[$(($(date +%s) - T0)) s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
echo "cores $(nproc)"
$PY -c "import sys, numpy, scipy, sklearn, pandas, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__, 'pandas', pandas.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"

if has probe; then
  # one MTRN alone: dense eager, capturable eager, replayed graphs (parameters equal?)
  log "EGNN-MTRN probe"
  timeout "${PROBE_TIMEOUT:-240}" $PY benchmarks/gpu_mtrn_probe.py --device "$DEVICE" \
    --n "${PROBE_N:-12000}" --epochs 3 --profile-steps 0 \
    --variants dense,dense-capturable,dense-graphs 2>&1 | tee "$LOGS/probe.txt"
fi
if [ "${QM9_GRAPHS:-}" = auto ]; then
  # graphs only where the probe showed replay equal to the eager steps and faster
  QM9_GRAPHS=$($PY - "$LOGS/probe.txt" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read() if len(sys.argv) > 1 else ""
diff = re.search(r"largest parameter difference (\S+)", text)
sec = dict(re.findall(r"^(dense-\w+)\s*: ([\d.]+) s/epoch", text, re.M))
ok = diff and float(diff.group(1)) == 0.0 and len(sec) == 2
print(1 if ok and float(sec["dense-graphs"]) < float(sec["dense-capturable"]) else "")
PYEOF
)
  log "QM9_GRAPHS=auto -> '${QM9_GRAPHS}'"
  [ -n "$QM9_GRAPHS" ] && QM9_ARGS="$QM9_ARGS --cuda-graphs"
fi

n_seeds=$(($(echo $SEEDS | tr ' ' '\n' | sort -n | tail -n 1) + 1))
n_runs=$(($(echo $DIMS | wc -w) * $(echo $SEEDS | wc -w)))
threads=$(($(nproc) / n_runs))
threads=$((threads > 0 ? threads : 1))
has qm9 && log "QM9: $n_runs runs (d in $DIMS, seeds $SEEDS), $threads threads and $BUDGET s each"
has qm9 && for d in $DIMS; do
  for s in $SEEDS; do
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads $PY benchmarks/qm9_logged.py --device "$DEVICE" \
      --max-time "$BUDGET" --latent-dims "$d" --seeds "$n_seeds" --where "seed=$s" \
      --max-epochs "$EPOCHS" --out "$RUNS/d${d}s${s}" $QM9_ARGS \
      >"$LOGS/qm9_d${d}_s${s}.log" 2>&1 &
  done
done

if has cuda; then
  log "MTLCM on CUDA"
  timeout 170 $PY benchmarks/bench_cuda.py --json "$OUT/bench_cuda.json" 2>&1 |
    tee "$LOGS/bench_cuda.txt"
fi

if has tests; then
  log "CUDA unit tests"
  timeout 200 $PY -m pytest -q -p no:cacheprovider -m gpu tests/unit \
    >"$LOGS/gpu_tests.txt" 2>&1
  grep -E "passed|failed|error" "$LOGS/gpu_tests.txt" | tail -8
fi

log "waiting for the QM9 runs"
while [ -n "$(jobs -rp)" ]; do
  sleep 30
  log "epochs: $(for f in "$LOGS"/qm9_d*.log; do grep -o "[0-9]*/$EPOCHS epochs" "$f" | tail -n 1 | cut -d/ -f1; done | tr '\n' ' ')"
done
has qm9 || { tar czf "$OUT/logs.tar.gz" -C "$WORK" logs; log "done"; exit 0; }
log "QM9 runs ended"
for f in "$LOGS"/qm9_d*.log; do echo "== $f"; tail -n 4 "$f"; done
if [ -n "$CKPT" ]; then
  tar czf "$OUT/qm9_ckpt.tar.gz" -C "$CKPT" --exclude='./*/latents' .
  if grep -q "paused; run the same command" "$LOGS"/qm9_d*.log; then
    log "runs paused (their checkpoints are in qm9_ckpt.tar.gz): no report yet"
    grep -h "qm9_logged\] qm9-" "$LOGS"/qm9_d*.log
    tar czf "$OUT/logs.tar.gz" -C "$WORK" logs
    log "done"
    exit 0
  fi
fi
mkdir -p "$WORK/all/records" "$WORK/all/latents"
for run in "$RUNS"/d*s*; do
  cp "$run"/records/*.json "$WORK/all/records/" 2>/dev/null
  cp "$run"/latents/* "$WORK/all/latents/" 2>/dev/null
done
# shellcheck disable=SC2086
OMP_NUM_THREADS=4 $PY benchmarks/qm9_logged.py --latent-dims "$(echo $DIMS | tr ' ' ,)" \
  --seeds "$n_seeds" --max-epochs "$EPOCHS" --out "$WORK/all" $QM9_ARGS >"$LOGS/qm9_report.log" 2>&1
tail -n 25 "$LOGS/qm9_report.log"
tar czf "$OUT/qm9_gpu.tar.gz" -C "$WORK/all" --exclude=./latents . 2>/dev/null
[ -n "${QM9_FEATURES:-}" ] && $PY benchmarks/qm9_pack_features.py "$WORK/all" "$OUT"
tar czf "$OUT/logs.tar.gz" -C "$WORK" logs
log "done"
