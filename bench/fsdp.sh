#!/usr/bin/env bash
# FSDP / ZeRO memory and step time: ctrun-fashion-mnist (SmallCnn, batch 64
# per rank, SGD with momentum, one intra-op thread per rank) under ctrun with
# --strategy ddp, zero1, zero2 and fsdp, at 2 and 4 ranks (Gloo, CPU).
# For each run, rank 0's BENCH line gives:
#   step_ms      mean step time over STEPS steps after WARMUP warm-up steps;
#   state_bytes  parameter + gradient + optimizer-state bytes held between
#                steps (tensor storage the core owns, each storage once);
#   peak_bytes   state_bytes plus the most held during a step (DDP/ZeRO-1: the
#                gradient buckets; ZeRO-2/FSDP: gathered units and gradient
#                buffers in flight, incl. Gloo's all-to-all receive buffer);
#   maxrss_kb    the process's peak RSS (mostly libtorch itself at this size).
# Ends with `RESULT fsdp_mem_ratio <fsdp state_bytes / (ddp state_bytes / N)>`
# at N = 4 (1.0 would be a perfect 1/N). Uses $CTRUN_BUILD_DIR (default
# ./build). Env: STEPS (150), WARMUP (20), MIN_UNIT (1000: SmallCnn in 3 FSDP
# units), WORLDS ("2 4").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${CTRUN_BUILD_DIR:-build}"
CTRUN="$BUILD/launcher/ctrun"
WORKER="$BUILD/trainer/apps/ctrun-fashion-mnist"
STEPS="${STEPS:-150}"
WARMUP="${WARMUP:-20}"
MIN_UNIT="${MIN_UNIT:-1000}"
WORLDS="${WORLDS:-2 4}"
for f in "$CTRUN" "$WORKER"; do
  [[ -x "$f" ]] || { echo "fsdp.sh: $f is not built (build it, or set CTRUN_BUILD_DIR)" >&2; exit 1; }
done
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export OMP_NUM_THREADS=1
field() { sed -n "s/.*[ ]$1=\([0-9.]*\).*/\1/p"; }

printf '%-8s %5s %10s %12s %12s %8s %14s %14s\n' strategy ranks step_ms state_bytes peak_bytes rss_MiB \
  "state/(ddp/N)" "peak/(ddp/N)"
declare -A state peak
ratio=""
for world in $WORLDS; do
  for strategy in ddp zero1 zero2 fsdp; do
    line=$("$CTRUN" --nproc-per-node "$world" --master-port "$(free_port)" --no-python "$WORKER" \
      --strategy "$strategy" --min-unit-params "$MIN_UNIT" --max-steps $((STEPS + WARMUP)) \
      --bench-warmup "$WARMUP" --threads 1 --epochs 1000 --test-limit 100 --log-every 0 \
      --checkpoint-every 0 2>&1 | grep '^BENCH')
    state[$strategy]=$(field state_bytes <<<"$line")
    peak[$strategy]=$(field peak_bytes <<<"$line")
    r=$(awk -v s="${state[$strategy]}" -v d="${state[ddp]}" -v n="$world" 'BEGIN {printf "%.3f", s / (d / n)}')
    p=$(awk -v s="${peak[$strategy]}" -v d="${peak[ddp]}" -v n="$world" 'BEGIN {printf "%.3f", s / (d / n)}')
    printf '%-8s %5s %10s %12s %12s %8s %14s %14s\n' "$strategy" "$world" "$(field step_ms <<<"$line")" \
      "${state[$strategy]}" "${peak[$strategy]}" \
      "$(awk -v k="$(field maxrss_kb <<<"$line")" 'BEGIN {printf "%.0f", k / 1024}')" "$r" "$p"
    [[ "$strategy" == fsdp ]] && ratio="$r"
  done
done
echo "RESULT fsdp_mem_ratio $ratio"
