#!/usr/bin/env bash
# Flaky-test hunt: runs the plain build's integration tests $SOAK_ROUNDS
# (default 3) times in a row, $CTRUN_JOBS (default: the CPU count) at a
# time, beside $SOAK_BUSY (default 2) busy CPU loops, then prints each
# test's pass count. Every test must pass every round: the script exits 1
# when one did not. Not part of CI (about three plain integration suites'
# time, more under the load). The busy loops are this script's children,
# bounded by $SOAK_LIMIT_S (default 4 h) and stopped when it ends, however
# it ends. Extra arguments go to ctest, e.g. scripts/soak-tests.sh -R ft.
# docs/contributing.md, "The loop".
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
rounds="${SOAK_ROUNDS:-3}"
busy="${SOAK_BUSY:-2}"
jobs="${CTRUN_JOBS:-$(nproc)}"
out="$PWD/$build/Testing/soak"
rm -rf "$out"
mkdir -p "$out"

pids=()
stop() { if [ ${#pids[@]} -gt 0 ]; then kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; fi; }
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$busy"); do
  timeout "${SOAK_LIMIT_S:-14400}" bash -c 'while :; do :; done' &
  pids+=($!)
done

for r in $(seq "$rounds"); do
  start=$SECONDS
  ctest --test-dir "$build" -L integration -LE unit -j "$jobs" --output-on-failure \
    --output-junit "$out/round$r.xml" "$@" > "$out/round$r.log" 2>&1 || true
  echo "soak: round $r of $rounds done in $((SECONDS - start)) s ($(grep -c 'Passed' "$out/round$r.log" || true) passed; log: $out/round$r.log)"
done
stop

junits=()
for r in $(seq "$rounds"); do junits+=("$out/round$r.xml"); done
scripts/test-times.py passes "${junits[@]}"
