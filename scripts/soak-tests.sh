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

python3 - "$rounds" "$out" <<'PY'
import os, statistics, sys, xml.etree.ElementTree as ET
rounds, out = int(sys.argv[1]), sys.argv[2]
runs = {}
for r in range(1, rounds + 1):
    path = os.path.join(out, f"round{r}.xml")
    if not os.path.exists(path):
        continue
    for case in ET.parse(path).getroot().iter("testcase"):
        ok = case.get("status") == "run" and case.find("failure") is None and case.find("error") is None
        runs.setdefault(case.get("name"), []).append((ok, float(case.get("time") or 0)))
bad = 0
print(f"\n| test | passed | median s | slowest s |\n|---|---|---|---|")
for name in sorted(runs, key=lambda n: (sum(ok for ok, _ in runs[n]), n)):
    passed = sum(ok for ok, _ in runs[name])
    times = [t for _, t in runs[name]]
    bad += passed < rounds
    print(f"| {name} | {passed}/{rounds} | {statistics.median(times):.1f} | {max(times):.1f} |")
print(f"\nsoak: {len(runs) - bad} of {len(runs)} integration tests passed {rounds}/{rounds}")
sys.exit(1 if bad or not runs else 0)
PY
