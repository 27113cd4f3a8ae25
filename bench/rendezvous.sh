#!/usr/bin/env bash
# Rendezvous at scale and node-loss recovery, ctrun vs torchrun in one run:
#   N ctrun agents (one tiny worker each), N = 4, 64, 256, 1024, from launch
#   until every worker has started, beside the time to merely start N
#   gRPC-linked processes, and
#   torchrun c10d for N = 4 and 16; then 3 agents (2:3) with one killed by
#   SIGKILL: seconds until the survivors' new workers run.
# Ends with `RESULT rdzv_4_agents_s <s>` and `RESULT node_loss_restart_s <s>`.
# Uses $CTRUN_BUILD_DIR (default ./build). Options: --sizes 4,64 --reps 3
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/rendezvous.py "$@"
