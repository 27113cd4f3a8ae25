#!/bin/bash
# The checks that need a GPU, run by hand on a machine with NVIDIA GPUs and
# PyTorch (CI has none). What the last run found is in docs/trainer.md
# (NCCL) and docs/migration.md (torchrun 2.x compared).
#
#   tests/gpu/check.sh CTRUN [DATA_DIR]
#
# CTRUN: a ctrun binary (ctrun-full beside it), e.g. build/launcher/ctrun
# built elsewhere: it needs only libc. DATA_DIR: Fashion-MNIST's IDX .gz
# files (default /usr/share/datasets/fashion-mnist). It builds trainer/
# against this Python's libtorch in /tmp/ctrun-gpu-build, then:
#  1. diffs the workers' environment under ctrun and this torch's torchrun
#     (tests/gpu/envdiff.py);
#  2. runs a stock NCCL DDP script under both, crashes it once with NCCL up
#     (a restart), and kills ctrun with SIGTERM and SIGKILL while a worker
#     loops on the GPU: no process may be left, the GPU must be freed;
#  3. trains ctrun-fashion-mnist (DDP, ZeRO-2, FSDP, FSDP + bf16 with a
#     checkpoint and a resume) and ctrun-gpt (DDP, FSDP, a mesh checkpoint
#     and a resume) with --backend nccl;
#  4. runs ctrun-gpt with --recompute none, full and selective
#     (tests/gpu/recompute.sh): the same losses; and FSDP with recomputation
#     saving a checkpoint and resuming it (tests/gpu/fsdp_checkpoint.sh);
#  5. runs ctrun-gpt with --precision fp16 (DDP and FSDP) and FSDP with
#     --cpu-offload params and optimizer (tests/gpu/fp16_offload.sh): finite,
#     falling losses, fp16 close to fp32, offload like no offload.
set -u
CT=$(readlink -f "$1"); DATA=${2:-/usr/share/datasets/fashion-mnist}
HERE=$(cd "$(dirname "$0")" && pwd); SRC=$(cd "$HERE/../.." && pwd)
B=/tmp/ctrun-gpu-build; export PYTHONUNBUFFERED=1
step() { echo; echo "== $*"; }

TD=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch
cmake -S "$SRC" -B $B -G Ninja -DCTRUN_BUILD_LAUNCHER=OFF -DCTRUN_TRAINER_CUDA=ON -DTorch_DIR="$TD" \
  -DCMAKE_BUILD_TYPE=Release > $B.configure.log 2>&1 && cmake --build $B > $B.build.log 2>&1 &
BUILD=$!

step "the workers' environment, ctrun against torchrun"
timeout 300 python3 "$HERE/envdiff.py" "$CT"

step "a stock NCCL DDP script under ctrun, then torchrun (the same loss)"
timeout 120 "$CT" --nproc-per-node gpu "$HERE/nccl_stock.py"; echo "ctrun exit $?"
timeout 120 python3 -m torch.distributed.run --nproc-per-node gpu "$HERE/nccl_stock.py"; echo "torchrun exit $?"
step "rank 0 dies with NCCL up; --max-restarts 1"
CRASH_ONCE=1 timeout 120 "$CT" --nproc-per-node 1 --max-restarts 1 "$HERE/nccl_stock.py"; echo "exit $?"
for sig in TERM KILL; do
  step "SIG$sig to ctrun while its worker loops on NCCL"
  HANG=1 "$CT" --nproc-per-node 1 "$HERE/nccl_stock.py" > /tmp/ctrun-gpu-hang.log 2>&1 & P=$!
  for _ in $(seq 300); do grep -q hanging /tmp/ctrun-gpu-hang.log && break; sleep 0.1; done
  kill -$sig $P; wait $P; echo "ctrun exit $?"
  for _ in $(seq 100); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 0.1; done
  echo "workers left: $(pgrep -f nccl_stock.py | wc -l); GPU processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
done

step "building trainer/ against this libtorch"
wait $BUILD || { echo "build failed: $B.configure.log, $B.build.log"; tail -20 $B.build.log; exit 1; }
A=$B/trainer/apps
run() { timeout 300 "$CT" --nproc-per-node 1 --no-python "$@" 2>&1 | grep -v '^STATS' | tail -3; }
for s in ddp zero2 fsdp; do
  step "ctrun-fashion-mnist --strategy $s --backend nccl"
  run $A/ctrun-fashion-mnist --backend nccl --strategy $s --data-dir "$DATA" --max-steps 60 --log-every 20 --test-limit 1000
done
step "ctrun-fashion-mnist FSDP + bf16: a checkpoint at step 30, resumed to 40"
rm -rf /tmp/ctrun-gpu-ck
run $A/ctrun-fashion-mnist --backend nccl --strategy fsdp --mixed-precision --data-dir "$DATA" --max-steps 30 --checkpoint-dir /tmp/ctrun-gpu-ck --checkpoint-every 10 --test-limit 1000
run $A/ctrun-fashion-mnist --backend nccl --strategy fsdp --mixed-precision --data-dir "$DATA" --max-steps 40 --checkpoint-dir /tmp/ctrun-gpu-ck --log-every 10 --test-limit 1000
for s in ddp fsdp; do
  step "ctrun-gpt --strategy $s --backend nccl"
  run $A/ctrun-gpt --backend nccl --strategy $s --data "$SRC/docs" --steps 40 --log-every 20
done
step "ctrun-gpt: a mesh checkpoint at step 20, resumed to 30 (the same loss as unbroken)"
rm -rf /tmp/ctrun-gpu-gck
run $A/ctrun-gpt --backend nccl --data "$SRC/docs" --steps 20 --log-every 10 --checkpoint-dir /tmp/ctrun-gpu-gck --checkpoint-every 10
run $A/ctrun-gpt --backend nccl --data "$SRC/docs" --steps 30 --log-every 10 --checkpoint-dir /tmp/ctrun-gpu-gck
run $A/ctrun-gpt --backend nccl --data "$SRC/docs" --steps 30 --log-every 10
step "ctrun-gpt --recompute none, full, selective with NCCL (the same losses)"
"$HERE/recompute.sh" "$B"
step "ctrun-gpt --strategy fsdp --recompute full: a checkpoint from CUDA shards, resumed (tests/gpu/fsdp_checkpoint.sh)"
"$HERE/fsdp_checkpoint.sh" "$B"
step "ctrun-gpt --precision fp16 and --cpu-offload params, optimizer with NCCL"
"$HERE/fp16_offload.sh" "$B"
