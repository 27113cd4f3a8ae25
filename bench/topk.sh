#!/usr/bin/env bash
# Top-k gradient compression with error feedback (DGC): gradient bytes on
# the wire and step time of ctrun-fashion-mnist under ctrun with
# --grad-compression topk:D against dense DDP, same model, batch, data and
# steps; RANKS ranks, Gloo, CPU. REPS interleaved runs per mode, medians and
# min-max. Ends with `RESULT topk_wire_ratio` (wire bytes / dense, sparse
# steps) and `RESULT topk_step_ratio` (step time, top-k / dense), and writes
# $CTRUN_BUILD_DIR/bench/topk-<time>.json. Logic and env knobs (RANKS,
# DENSITY, BATCH, STEPS, WARMUP, REPS) in bench/topk.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/topk.py "$@"
