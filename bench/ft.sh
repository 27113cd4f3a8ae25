#!/usr/bin/env bash
# Fault-tolerant replica groups (ctrun --ft-replicas, the trainer's --ft)
# against ctrun's whole-job restart from a checkpoint, side by side on the
# same job: 3 agents x 2 ranks of ctrun-fashion-mnist on the loopback under
# one ctrund, one rank SIGKILLed at the same step (docs/fault-tolerance.md).
# Steps recomputed and discarded, the survivors' gap, the heal against the
# loopback, and --ft's step time against plain DDP with no failure. Logic
# and env knobs (ROUNDS, FT_STEPS, KILL_STEP, CKPT_EVERY, OVERHEAD_STEPS,
# QUICK=1, CHART) in bench/ft.py. Needs scripts/build.sh (ctrun, ctrund,
# ctrun-fashion-mnist in $CTRUN_BUILD_DIR or build/) and
# dataset-fashion-mnist; the chart needs python3-matplotlib. Ends with
# RESULT lines.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/ft.py "$@"
