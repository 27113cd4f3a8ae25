#!/usr/bin/env bash
# Store throughput: 8 client processes (torch 1.13's python TCPStore client,
# rounds of set + get + add) against ctrun's agent-hosted store (the clients
# are the workers of a ctrun run) and against torch's own TCPStore server (a
# python TCPStore(is_master=True) in a process of its own), interleaved, 5
# times each. Prints a table; ends with `RESULT store_ops_ratio <ctrun/torch>`
# (best of each). Uses $CTRUN_BUILD_DIR (default ./build); STORE_BENCH_OPS,
# STORE_BENCH_CLIENTS, STORE_BENCH_REPEATS override the sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/store.py "$@"
