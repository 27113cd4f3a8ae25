#!/usr/bin/env bash
# The verdict's accuracy: faults of every class (docs/why-did-my-job-fail.md)
# injected into 2- and 3-node jobs under one ctrund on the loopback, each
# compared with `ctrun status --why --json`; a confusion matrix and RESULT
# lines (verdict_top1_accuracy, verdict_latency_p99_s, verdict_orphans).
# Logic and env knobs (PER_CLASS, CLASSES, SEED, QUICK=1) in bench/verdict.py.
# Needs scripts/build.sh ($CTRUN_BUILD_DIR or build/); root for the OOM
# faults' memory cgroup (left out otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/verdict.py "$@"
