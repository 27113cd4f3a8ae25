#!/usr/bin/env bash
# The main job: a real 4-worker DDP training run (Gloo, CPU) under ctrun on
# Fashion-MNIST. Extra arguments go to the training script (e.g. --epochs 2).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${CTRUN_BUILD_DIR:-build}"
# ctrun runs workers with $PYTHON_EXEC, else the first python3 on PATH; make
# sure that is one with torch (Debian's /usr/bin/python3 has it).
if [ -z "${PYTHON_EXEC:-}" ] && ! python3 -c 'import torch' >/dev/null 2>&1; then
  export PYTHON_EXEC=/usr/bin/python3
fi
exec "$build/launcher/ctrun" --nproc-per-node 4 examples/ddp_fashion_mnist.py "$@"
