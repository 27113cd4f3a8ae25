#!/usr/bin/env bash
# Chaos: a fault every 10 s for 10 minutes into fault-tolerant replica groups
# (ctrun --ft-replicas, ctrun-fashion-mnist --ft) and the same schedule into
# ctrun's whole-job restart from checkpoints, side by side
# (docs/fault-tolerance.md, "Chaos"). Faults: a worker killed, an agent
# killed and relaunched, a worker stopped (a hang), a group's network cut
# (as root: network namespaces), a slow group, ctrund killed and restarted.
# Prints a table per fault kind and ends with RESULT lines; exits 1 when a
# check fails (an agent's exit, an orphan, a lost sample). Logic and env
# knobs (NGROUPS, NPROC, PERIOD, MINUTES, FAULTS, KINDS, SEED, QUICK=1, ...)
# in bench/chaos.py. Needs scripts/build.sh ($CTRUN_BUILD_DIR or build/) and
# dataset-fashion-mnist; the chart needs python3-matplotlib.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/chaos.py "$@"
