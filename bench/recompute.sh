#!/usr/bin/env bash
# Activation recomputation on the GPT: ctrun-gpt under ctrun with
# --recompute none, full and selective, interleaved (REPS=5 rounds, the
# policy that goes first rotating), side by side in one run, on two GPTs
# (the bench's, where the attention core's activations dominate, and
# bench/parallel.sh's). Prints per policy the step time (wall and the
# rank's CPU clock) and the activation bytes of a step (peak_step_bytes),
# medians with min-max, each against none and against its floor (none's
# step plus the forward it repeats: the attention core's under selective,
# the whole forward under full, timed in none's step of the same round).
# Ends with RESULT lines: the parallel GPT's ratios, the CPU-clock ratios,
# then recompute_activation_ratio, recompute_step_ratio,
# recompute_selective_floor_ratio and recompute_full_floor_ratio. ~4 min on
# a quiet 2-core machine. Uses $CTRUN_BUILD_DIR (default ./build); env knobs
# (model shape, SHAPES, STEPS, REPS, RANKS, RUN_TIMEOUT) in bench/recompute.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/recompute.py "$@"
