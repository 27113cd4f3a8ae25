#!/usr/bin/env bash
# Launch overhead, side by side in one run, interleaved:
#   the floor: a C program built here (bench/launch_floor.c) that forks, execs
#     and reaps N /bin/true;
#   ctrun --standalone --nproc-per-node N --no-python /bin/true;
#   torchrun (torch 1.13, patched in-process by bench/torchrun_compat.py);
# for N = 1, 8 and 64, each run timed from spawn to reap by
# bench/launch_timer.c, at real-time priority with TMPDIR on tmpfs; in the
# same rounds at N=8, the floor and ctrun again as a user runs them (normal
# priority, the caller's own TMPDIR, /tmp when unset); then a 2- and
# 4-process Gloo all-reduce script under ctrun, torchrun and launched by
# hand. Prints medians with the min–max spread, writes a JSON file of every
# run (path printed), and ends with
#   RESULT launch_floor_ratio <ctrun / floor, medians at N=8>
#   RESULT launch_floor_ratio_default <the same, as a user runs them>
#   RESULT launch_ratio <torchrun / ctrun, medians at N=8>
# Uses $CTRUN_BUILD_DIR (default ./build) and cc. --help lists the options.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/launch.py "$@"
