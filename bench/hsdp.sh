#!/usr/bin/env bash
# HSDP (FSDP/ZeRO on ctrun-gpt's mesh dp dimension, dp = dp_replicate x
# dp_shard) against DDP over the same dp, side by side in one run (Gloo,
# CPU): per-rank state bytes (parameters + gradients + optimizer state) and
# step time, medians with min-max over REPS interleaved rounds. Ends with
# `RESULT hsdp_state_ratio` (HSDP state / (DDP state / dp_shard); goal
# <= 1.05); writes $CTRUN_BUILD_DIR/bench/hsdp-<time>.json. ~2 min on a
# 2-core machine; the layouts and env knobs are in bench/hsdp.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/hsdp.py "$@"
