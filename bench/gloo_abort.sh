#!/usr/bin/env bash
# How long a survivor's Gloo collective blocks after a peer is SIGKILLed,
# with and without tearing down the survivors' process groups: the
# measurement behind fault-tolerant training's cross-replica transport
# (docs/fault-tolerance.md). Needs only Debian's python3-torch. Logic and env
# knobs (RANKS, REPS, PG_TIMEOUT) in bench/gloo_abort.py; ends with RESULT
# lines.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 bench/gloo_abort.py "$@"
