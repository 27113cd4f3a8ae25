#!/bin/bash
# FSDP under NCCL on a GPU: ctrun-gpt with --strategy fsdp and --recompute
# full saves a mesh checkpoint from CUDA shards (fsdp_mesh_checkpoint.h),
# and a run resumed from it ends at the loss of the uninterrupted run (the
# embedding's CUDA backward sums with atomics: equal to 1e-4, not bitwise).
# Builds ctrun-gpt (unity build, -DCTRUN_TRAINER_CUDA=ON) when BUILD_DIR
# has none:
#
#   tests/gpu/fsdp_checkpoint.sh [BUILD_DIR]
#
# Launched with this torch's torchrun, one process on one GPU.
set -u
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
B=${1:-/tmp/ctrun-gpu-build}
. "$HERE/build_gpt.sh" || exit 1
D=$(mktemp -d)
gpt() {
  timeout 300 python3 -m torch.distributed.run --nproc-per-node 1 --no-python "$B/trainer/apps/ctrun-gpt" \
    --backend nccl --strategy fsdp --recompute full --data "$SRC/docs" --log-every 1 --layers 4 --width 256 \
    --heads 8 --seq-len 128 --optimizer adam "$@" 2>&1 | grep -v '^STATS'
}
echo "== uninterrupted, 20 steps"
gpt --steps 20 | tee "$D/straight.txt" | grep -E 'step 20 |error' | sed 's/ step_time.*//'
echo "== 10 steps with --checkpoint-dir, then resumed to 20"
gpt --steps 10 --checkpoint-dir "$D/ckpt" | grep -E 'step 10 |error' | sed 's/ step_time.*//'
gpt --steps 20 --checkpoint-dir "$D/ckpt" | tee "$D/resumed.txt" | grep -E 'resumed|step 20 |error' | sed 's/ step_time.*//'
python3 - "$D/straight.txt" "$D/resumed.txt" <<'PY'
import re, sys
def last(path):
    m = re.findall(r"^step 20 loss (\S+)", open(path).read(), re.M)
    return float(m[-1]) if m else None
a, b = last(sys.argv[1]), last(sys.argv[2])
ok = a is not None and b is not None and abs(a - b) <= 1e-4 * max(1.0, abs(a))
print(f"step 20 loss: uninterrupted {a}, resumed {b}: {'equal within 1e-4' if ok else 'DIFFERENT'}")
sys.exit(0 if ok else 1)
PY
