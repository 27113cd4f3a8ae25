#!/usr/bin/env bash
# DDP step throughput: ctrun-fashion-mnist (C++ DDP, this repo) under ctrun vs
# PyTorch's Python DDP (bench/ddp_reference.py) under torchrun (torch 1.13,
# patched in-process by bench/torchrun_compat.py). Same SmallCnn, batch 64 per
# rank (BATCH), SGD, sampler order, bucket size; 2 ranks, Gloo, CPU, one intra-op
# thread per rank. Each side runs REPS times, alternating; medians compared.
# Prints samples/s of each, the ratio and the share of all-reduce time hidden
# behind backward (C++ side); ends with `RESULT ddp_speedup <cxx/python>`.
# Uses $CTRUN_BUILD_DIR (default ./build). Env: STEPS (300), WARMUP (30), REPS (3),
# BUCKET_MB (25: SmallCnn fits one bucket; 0.1 splits it so all-reduce overlaps),
# BATCH (64, per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${CTRUN_BUILD_DIR:-build}"
CTRUN="$BUILD/launcher/ctrun"
WORKER="$BUILD/trainer/apps/ctrun-fashion-mnist"
STEPS="${STEPS:-300}"
WARMUP="${WARMUP:-30}"
REPS="${REPS:-3}"
BUCKET_MB="${BUCKET_MB:-25}"
BATCH="${BATCH:-64}"
PY=/usr/bin/python3
for f in "$CTRUN" "$WORKER"; do
  [[ -x "$f" ]] || { echo "ddp.sh: $f is not built (build it, or set CTRUN_BUILD_DIR)" >&2; exit 1; }
done
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export OMP_NUM_THREADS=1

run_cxx() {
  "$CTRUN" --nproc-per-node 2 --master-port "$(free_port)" --no-python "$WORKER" \
    --max-steps "$STEPS" --bench-warmup "$WARMUP" --threads 1 --epochs 1000 \
    --test-limit 100 --log-every 0 --checkpoint-every 0 --bucket-cap-mb "$BUCKET_MB" --batch-size "$BATCH" 2>&1 | grep '^BENCH'
}
run_py() {
  "$PY" bench/torchrun_compat.py --nnodes 1 --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$(free_port)" --rdzv_id "ddp-bench-$$-$RANDOM" \
    --monitor_interval 0.1 bench/ddp_reference.py --steps "$STEPS" --warmup "$WARMUP" --bucket-cap-mb "$BUCKET_MB" 2>&1 \
    | grep '^BENCH'
}
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

cxx=(); py=(); hidden=()
for ((i = 1; i <= REPS; i++)); do
  line=$(run_cxx); cxx+=("$(field samples_per_s <<<"$line")"); hidden+=("$(field hidden_share <<<"$line")")
  line=$(run_py); py+=("$(field samples_per_s <<<"$line")")
  echo "rep $i: c++ ${cxx[-1]} samples/s (hidden ${hidden[-1]}), python ${py[-1]} samples/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cxx[@]}"); mp=$(median "${py[@]}"); mh=$(median "${hidden[@]}")
ratio=$(awk -v a="$mc" -v b="$mp" 'BEGIN {printf "%.3f", a / b}')
echo "c++ DDP under ctrun:      $mc samples/s (median of $REPS, $STEPS steps after $WARMUP warm-up, 2 ranks x batch $BATCH, bucket cap $BUCKET_MB MB)"
echo "python DDP under torchrun: $mp samples/s"
echo "all-reduce hidden behind backward (c++): $(awk -v h="$mh" 'BEGIN {printf "%.0f%%", 100 * h}')"
echo "RESULT ddp_speedup $ratio"
