#!/usr/bin/env bash
# Configures and builds ctrun into ./build (or $CTRUN_BUILD_DIR) with Ninja.
# Extra arguments go to CMake, e.g. scripts/build.sh -DCTRUN_SANITIZE=ON
# Compiles are cached by ccache when it is installed (CMakeLists.txt,
# CTRUN_CCACHE); the last line says how many this build took from the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja "$@" >/dev/null
stats="$build/.ccache-before"
scripts/ccache-stats.sh snapshot "$stats"
start=$SECONDS
ninja -C "$build" -j "$(nproc)"
echo "build: $build built in $((SECONDS - start)) s"
scripts/ccache-stats.sh report "$stats" "build"
