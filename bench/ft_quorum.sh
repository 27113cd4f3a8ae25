#!/usr/bin/env bash
# The per-step quorum at scale: N simulated replica groups
# (build/bench/ft_quorum_load: one process, a few gRPC connections) stepping
# through one ctrund's quorum, N = 256, 1024, 4096, 16384 interleaved, then
# one run at N = 24576 (131072 is modelled); 1 %/min of the groups lost and back. Per N: the
# last call to every answer per step (p50, p99), ctrund's CPU per step and
# RSS. Side by side at each N (not the big one): the physical floor
# (build/bench/ft_floor_load: one TCP exchange per group per step against a
# one-thread epoll server) and the ratio ctrund/floor. Ends with
# `RESULT ft_quorum_16k_p99_s` (goal <= 0.1),
# `RESULT ft_quorum_16k_cpu_s_per_step` (goal <= 0.05),
# `RESULT ft_quorum_16k_floor_p99_s`, `RESULT ft_quorum_16k_floor_cpu_s_per_step`
# and `RESULT ft_quorum_131k_p99_s` (goal <= 1); writes a JSON file (with
# "plots") under $CTRUN_BUILD_DIR/bench/.
# Uses $CTRUN_BUILD_DIR (default ./build). Options: --sizes 256,1024 --reps 2
# --steps 20 --step-s 1 --big 24576 (0 skips) --big-steps 8 --reference CTRUND (the base
# commit's, side by side at N <= 1024) --compare CTRUND (an earlier build's, interleaved at
# every N but the big one) --json PATH
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/ft_quorum.py "$@"
