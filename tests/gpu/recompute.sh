#!/bin/bash
# Activation recomputation on a GPU (NCCL): ctrun-gpt's losses with
# --recompute none, full and selective must be the same, step for step.
# Run by tests/gpu/check.sh after it built trainer/ (or alone, which builds
# ctrun-gpt itself):
#
#   tests/gpu/recompute.sh [BUILD_DIR]
#
# Launched with this torch's torchrun (the workers' side is what is checked).
set -u
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
B=${1:-/tmp/ctrun-gpu-build}
. "$HERE/build_gpt.sh" || exit 1
status=0
for p in none full selective; do
  echo "== ctrun-gpt --recompute $p --backend nccl"
  timeout 300 python3 -m torch.distributed.run --nproc-per-node 1 --no-python "$B/trainer/apps/ctrun-gpt" \
    --backend nccl --recompute "$p" --data "$SRC/docs" --steps 30 --log-every 10 --layers 4 --width 256 --heads 8 \
    --seq-len 128 2>&1 | grep -v '^STATS' | grep -i 'loss\|error' | sed 's/ step_time.*//' | tee "/tmp/ctrun-gpu-recompute-$p.txt"
done
for p in full selective; do
  if cmp -s /tmp/ctrun-gpu-recompute-none.txt "/tmp/ctrun-gpu-recompute-$p.txt" &&
     [ -s /tmp/ctrun-gpu-recompute-none.txt ]; then
    echo "recompute $p: the same losses as none"
  else
    echo "recompute $p: DIFFERENT losses from none"; status=1
  fi
done
exit $status
