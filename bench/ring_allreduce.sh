#!/usr/bin/env bash
# The fault-tolerant mode's abortable ring all-reduce against torch's Gloo
# all-reduce on the loopback, side by side (bench/ring_allreduce.py has the
# logic and the env knobs RANKS, SIZES, REPS, ROUNDS). Needs scripts/build.sh
# (bench/ring_allreduce, in $CTRUN_BUILD_DIR or build/). Ends with RESULT
# lines.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/ring_allreduce.py "$@"
