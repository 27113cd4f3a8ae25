#!/usr/bin/env bash
# Rendezvous at scale:
#   N simulated agents (build/bench/rdzv_load: one process, one gRPC channel,
#   Join stream and keep-alive per agent) against a real ctrund, for
#   N = 1000, 2000, 5000, 10000, 20000, runs interleaved: the last join to every
#   agent having the round, ctrund's CPU and peak RSS per agent, and the
#   survivors' next round after 1 % of the agents drop at once;
#   then, end to end with real processes: 4 ctrun agents vs 4 torchrun
#   agents until every worker started, and 3 agents (2:3) with one killed
#   by SIGKILL: seconds until the survivors' new workers run;
#   and a long-lived daemon: 10,000 sequential 2-node jobs
#   (build/bench/rdzv_load_jobs) against one ctrund with --closed-run-ttl 0,
#   its VmRSS after job 1,000 and after the last.
# Raises the soft fd limit to the hard one (each agent is a connection).
# Ends with `RESULT rdzv_10k_round_s`, `RESULT rdzv_10k_rss_mib`,
# `RESULT rdzv_20k_round_s` (goal <= 1), `RESULT rdzv_20k_rss_mib` (goal <= 512),
# `RESULT ctrund_rss_growth_per_1k_jobs_kib` (goal <= 50),
# `RESULT rdzv_4_agents_s` and `RESULT node_loss_restart_s`; writes a JSON
# file (with "plots") under $CTRUN_BUILD_DIR/bench/.
# Uses $CTRUN_BUILD_DIR (default ./build). Options: --sizes 1000,2000 --reps 3
# --channels C --e2e-reps 3 --daemon-jobs N (0 skips) --daemon-only --json PATH
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/rendezvous.py "$@"
