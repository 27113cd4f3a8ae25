#!/usr/bin/env bash
# Shared logs at scale: NODES simulated nodes (1024) x RANKS ranks (8), each
# rank writing RATE lines/s (100) for DURATION s (60), shipped with
# --share-logs' protocol (bench/load/logs_load) to one ctrund on 127.0.0.1,
# while `ctrun logs --follow` reads the same run; REPS (3) runs, each with a
# fresh ctrund. Prints a table of medians with the min–max spread, writes a
# JSON file of every run (path printed), and ends with
#   RESULT logs_8k_ranks_ctrund_cpu    <ctrund's cores used while shipping>
#   RESULT logs_8k_ranks_rss_mib       <ctrund's peak RSS, MiB>
#   RESULT logs_8k_ranks_lost_lines    <lines the follower never saw>
#   RESULT logs_8k_ranks_other_lost_lines <of those, not dropped by the ring's policy: 0>
#   RESULT logs_8k_ranks_follow_catchup_s <the follower's lag after the last batch>
#   RESULT logs_8k_ranks_follow_shown_pct <lines the follower showed, % of those sent>
# Uses $CTRUN_BUILD_DIR (default ./build); REF_BUILD_DIR, when set, runs
# the same with that build's ctrund and ctrun, interleaved (the reference).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/logs_scale.py "$@"
