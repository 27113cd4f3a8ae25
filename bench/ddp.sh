#!/usr/bin/env bash
# DDP step throughput: C++ DDP (ctrun-fashion-mnist under ctrun) against
# PyTorch's Python DDP (bench/ddp_reference.py under torchrun), same model,
# batch per rank, optimizer, data order and bucket cap; 2 ranks, Gloo, CPU.
# Batch 16 and 64 per rank, REPS interleaved runs each, medians and min-max.
# Ends with `RESULT ddp_speedup_b16` and `RESULT ddp_speedup_b64` (C++/Python)
# and writes $CTRUN_BUILD_DIR/bench/ddp-<time>.json. Logic and env knobs
# (BATCHES, STEPS, WARMUP, REPS, BUCKET_MB) in bench/ddp.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/ddp.py "$@"
