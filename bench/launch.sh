#!/usr/bin/env bash
# Launch overhead of ctrun vs torchrun, side by side in one run:
#   --standalone --nproc-per-node N --no-python /bin/true   for N = 1, 2, 4, 8
#   a 2- and 4-process Gloo all-reduce script, plus the same launched by hand.
# Prints min/median and ratios; ends with `RESULT launch_ratio <torchrun/ctrun
# median at N=8>`. Uses $CTRUN_BUILD_DIR (default ./build).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/launch.py "$@"
