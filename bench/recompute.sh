#!/usr/bin/env bash
# Activation recomputation on the GPT: ctrun-gpt under ctrun with
# --recompute none, full and selective, interleaved (REPS=3 rounds, the
# policy that goes first rotating), side by side in one run. Prints per
# policy the step time and the activation bytes of a step (peak_step_bytes),
# medians with min-max, each against none. Ends with
# `RESULT recompute_activation_ratio` (selective / none, activation bytes)
# and `RESULT recompute_step_ratio` (selective / none, step time); full
# recomputation's two ratios are printed on the line before. ~3 min on a
# 2-core machine. Uses $CTRUN_BUILD_DIR (default ./build); env knobs (model
# shape, STEPS, REPS, RANKS, RUN_TIMEOUT) in bench/recompute.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/recompute.py "$@"
