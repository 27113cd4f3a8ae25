#!/usr/bin/env bash
# The main job: a real 4-worker data-parallel training run on CPU (Gloo) under
# ctrun — the C++ trainer (trainer/, DDP with bucketed all-reduce) on
# Fashion-MNIST. Extra arguments go to the trainer (e.g. --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
exec "$build/launcher/ctrun" --nproc-per-node 4 --no-python \
  "$build/trainer/apps/ctrun-fashion-mnist" "$@"
