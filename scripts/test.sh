#!/usr/bin/env bash
# The plain suite: every test of ./build (or $CTRUN_BUILD_DIR) through CTest,
# $CTRUN_JOBS (default: the CPU count) at a time, then the 25 slowest tests
# with their times. Part of the README's test command (and so of CI); the
# sanitized suite is scripts/test-sanitized.sh. Extra arguments go to ctest,
# e.g. scripts/test.sh -R rendezvous. docs/contributing.md, "The loop".
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
jobs="${CTRUN_JOBS:-$(nproc)}"
junit="$PWD/$build/Testing/plain.junit.xml"
rm -f "$junit"
start=$SECONDS
status=0
ctest --test-dir "$build" -j "$jobs" --output-on-failure --output-junit "$junit" "$@" || status=$?
scripts/test-times.py slowest --title "plain suite ($((SECONDS - start)) s)" "$junit" || true
exit "$status"
