#!/usr/bin/env bash
# ctrun's fault matrix, N times (--runs N, default 3), with torchrun (torch
# 1.13, c10d) beside it on worker SIGKILL, worker exit != 0 and agent SIGKILL.
# Prints a table per launcher; ends with `RESULT fault_recovered_pct <...>` and
# `RESULT orphans <count>`. The network cases need root and ip netns (else
# they are skipped). Uses $CTRUN_BUILD_DIR (default ./build).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/faults.py "$@"
