#!/usr/bin/env bash
# Builds everything (ctrun, ctrund, the trainer, the tests) with
# AddressSanitizer + UndefinedBehaviorSanitizer into build-asan (or
# $CTRUN_ASAN_BUILD_DIR) and runs the sanitized suite there. Any sanitizer
# report fails the test that triggered it (halt_on_error). Part of the README's
# test command (and so of CI): on 2 cores ~14 min to build with an empty
# compiler cache (~2 min with a warm one: CMakeLists.txt, CTRUN_CCACHE) and
# ~11 min to run; it ends with the build's cache hits and the 25 slowest tests.
#
# What runs here: each C++ path once.
#   - Every unit test (label unit): each C++ file's own cases.
#   - The integration tests whose subject is ctrun's own C++ behaviour (the
#     agent, the rendezvous, the store, ctrund, the trainer's paths). Where
#     several cases of one test take the same C++ path (another mesh layout,
#     another fault that ends in the same restart), the test runs one of them
#     here: CTest sets CTRUN_SANITIZED=1, and each skipped case says which
#     case covers it.
#   - Not the tests whose subject is the environment (what ships: the .deb,
#     the wheel, the container image; the docs; a real Slurm, podman, a
#     browser; the network's own behaviour): they are labelled plain-only
#     (ctrun_integration_test(... PLAIN_ONLY)) and run in the plain stage only.
# docs/contributing.md, "The loop", lists the stages and their times.
#
# -O0 -g1: line tables for the reports, and the cheapest compile: the gRPC-
# heavy files take a quarter less than at -Og (rendezvous/grpc's largest
# batch: 32 s against 43), -Og less than half of -O1 with UBSan, and the
# suite's time is in processes and Python, not our code (the trainer's math
# is libtorch's, built -O3 without the sanitizers). The trainer's
# own code is instrumented; libtorch is not (its memory still goes through
# ASan's allocator). Extra arguments go to ctest, e.g.
# scripts/test-sanitized.sh -R rendezvous
#
# The trainer's tests fork the ranks they start themselves from a started
# process of the binary (docs/contributing.md, "Rank starts"): LeakSanitizer
# checks a launch's first and last ranks there, every exec'd process (ctrun,
# ctrund, the unit tests, ranks under ctrun) at its exit.
#
# The unit tests (pure logic, loopback gRPC) run $CTRUN_JOBS at a time, as in
# the plain suite. The integration tests then run in two parts: those that
# run the instrumented trainer (trainer_*, ft: several ranks each, CPU-bound)
# one at a time (CTRUN_TEST_JOBS, default 1), then the others (agents,
# rendezvous, faults: mostly waiting on processes and timeouts) $CTRUN_JOBS
# at a time. Beside the trainer tests on 2 cores, the multi-node and fault
# cases outlived their bounds (a cut-off node's exit, a survivors' job) in 1
# of 3 CI runs; beside only each other they pass. Every part always runs;
# the script fails if any did.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_ASAN_BUILD_DIR:-build-asan}"
jobs="${CTRUN_JOBS:-$(nproc)}"

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
  -DCTRUN_SANITIZE=ON -DCTRUN_BUILD_TRAINER=ON -DCTRUN_FUZZ=OFF >/dev/null
scripts/ccache-stats.sh snapshot "$build/.ccache-before"
build_start=$SECONDS
ninja -C "$build" -j "$jobs"
echo "test-sanitized: $build built in $((SECONDS - build_start)) s"
scripts/ccache-stats.sh report "$build/.ccache-before" "test-sanitized"

# Inherited by every test and every process a test starts (ctrun, ctrund).
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
junits="$PWD/$build/Testing"
rm -f "$junits"/sanitized-*.junit.xml
mkdir -p "$junits"
start=$SECONDS
status=0
ctest --test-dir "$build" -L unit -LE plain-only -j "$jobs" --output-on-failure \
  --output-junit "$junits/sanitized-unit.junit.xml" "$@" || status=1
trainer='^(trainer_.*|ft)$'
ctest --test-dir "$build" -LE 'unit|plain-only' -R "$trainer" -j "${CTRUN_TEST_JOBS:-1}" --output-on-failure \
  --output-junit "$junits/sanitized-trainer.junit.xml" "$@" || status=1
ctest --test-dir "$build" -LE 'unit|plain-only' -E "$trainer" -j "$jobs" --output-on-failure \
  --output-junit "$junits/sanitized-integration.junit.xml" "$@" || status=1
scripts/test-times.py slowest --title "sanitized suite ($((SECONDS - start)) s)" "$junits"/sanitized-*.junit.xml || true
exit "$status"
