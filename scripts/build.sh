#!/usr/bin/env bash
# Configures and builds ctrun into ./build (or $CTRUN_BUILD_DIR) with Ninja.
# Extra arguments go to CMake, e.g. scripts/build.sh -DCTRUN_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja "$@" >/dev/null
ninja -C "$build" -j "$(nproc)"
