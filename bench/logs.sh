#!/usr/bin/env bash
# The cost of --share-logs: a job of 2 ranks printing 100,000 lines each
# (bench/logs.py's worker) under ctrun against a ctrund on 127.0.0.1, with
# and without --share-logs (and with --tee 3: the output read through pipes,
# not shipped), interleaved; the console goes to a file. Prints
# medians with the min–max spread, writes a JSON file of every run (path
# printed), and ends with
#   RESULT logs_overhead_ratio <wall time with --share-logs / without, medians>
#   RESULT logs_bytes_per_line <protobuf bytes per shipped line>
# Uses $CTRUN_BUILD_DIR (default ./build). Env: LINES (100000), REPS (7),
# WRITES (line: a write() per line, as logging/print(flush=True); block).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/logs.py "$@"
