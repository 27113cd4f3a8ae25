#!/usr/bin/env bash
# The workers' store: ctrun's (the agent's StoreServer, run alone as
# $CTRUN_BUILD_DIR/bench/store_server) against torch 1.13's own TCPStore
# server (a python TCPStore(is_master=True) in a process of its own), side by
# side, interleaved:
#   load   bench/store_load (C++, TCPStore's wire protocol) from 1, 64 and 512
#          connections, SET+GET / ADD / WAIT / COMPARE_SET with 64 B and 64 KB
#          values: requests/s, p50/p99 latency, server CPU s per 100k requests
#          (/proc/PID/stat of the server process alone);
#   storm  1,024, 4,096 and 16,384 clients connect at once, ADD + WAIT on a
#          barrier, close (8 clients per loopback source address); a refused
#          or reset connect is retried as a torch 2.x client does (500 ms,
#          x1.5, +-50 % jitter), for both servers; retries counted per server;
#   e2e    8 torch python TCPStore clients (bench/store_client.py), as a ctrun
#          run's workers and against torch's server.
# Raises the open-files limit within the hard limit and reports somaxconn and
# each server's listen backlog. Prints medians with the min–max spread and a
# JSON file (path printed), and ends with
#   RESULT store_cpu_per_req_ratio <torch / ctrun CPU per request>
#   RESULT store_storm_ratio <torch / ctrun storm time, 4,096 clients>
#   RESULT store_storm_16k_ratio <the same, 16,384 clients; a lower bound
#          only where torch's server still failed the storm>
#   RESULT store_storm_16k_dropped <ctrun's clients not released at 16,384>
#   RESULT store_ops_ratio <ctrun / torch, 8 python clients>
# Uses $CTRUN_BUILD_DIR (default ./build). --help lists the options.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/store.py "$@"
