#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang++ into
# $CTRUN_FUZZ_BUILD_DIR (default build-fuzz) and runs both at once until
# together they have executed FUZZ_EXECS inputs (default 10 M: a fifth for
# machine_fuzzer, the rest for request_fuzzer) or FUZZ_SECONDS (default 1500)
# have passed per target. Prints per target the
# executions, the time and the crashes (crash/leak/timeout/oom artifacts),
# then:
#   RESULT fuzz_execs <n>
#   RESULT fuzz_crashes <n>
# Exit status 1 when any target crashed. The corpus is kept in
# $build/fuzz-corpus/<target> (a re-run starts from it), crash inputs in
# $build/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_FUZZ_BUILD_DIR:-build-fuzz}"
total="${FUZZ_EXECS:-10000000}"
seconds="${FUZZ_SECONDS:-1500}"
targets=(machine_fuzzer request_fuzzer)

if ! command -v clang++ >/dev/null; then
  echo "bench/fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCTRUN_FUZZ=ON -DCTRUN_BUILD_TRAINER=OFF >/dev/null
ninja -C "$build" -j "${CTRUN_JOBS:-2}" "${targets[@]}"

# The machine target runs a whole event script per input and is several
# times slower per execution: it gets a fifth of the executions.
declare -A runs=([machine_fuzzer]=$((total / 5)) [request_fuzzer]=$((total - total / 5)))
declare -A max_len=([machine_fuzzer]=512 [request_fuzzer]=4096)
mkdir -p "$build/fuzz-artifacts"
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$build/fuzz-corpus/$t"
  rm -f "$build/fuzz-artifacts/$t-"*
  # -timeout: one input running longer than 10 s is a hang (an artifact).
  "$build/tests/fuzz/$t" "$build/fuzz-corpus/$t" -runs="${runs[$t]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$t]}" -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" >"$build/fuzz-$t.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done

execs=0
crashes=0
for t in "${targets[@]}"; do
  n=$(grep 'stat::number_of_executed_units:' "$build/fuzz-$t.log" | tail -1 | awk '{print $2}')
  s=$(grep 'stat::average_exec_per_sec:' "$build/fuzz-$t.log" | tail -1 | awk '{print $2}')
  c=$(find "$build/fuzz-artifacts" -maxdepth 1 -type f -name "$t-*" | wc -l)
  echo "fuzz $t: ${n:-0} executions (${s:-0}/s), $c crash artifacts (log: $build/fuzz-$t.log)"
  execs=$((execs + ${n:-0}))
  crashes=$((crashes + c))
done
[ "$crashes" -eq 0 ] || status=1
echo "RESULT fuzz_execs $execs"
echo "RESULT fuzz_crashes $crashes"
exit $status
