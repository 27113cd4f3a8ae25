#!/usr/bin/env bash
# FSDP / ZeRO memory and step time against DDP, at 2 and 4 ranks (Gloo, CPU):
# SmallCnn under --strategy ddp, zero1, zero2, fsdp (the 1/N of the state),
# and the GPT of trainer/models, parameter-dominated, DDP vs FSDP full-shard
# (the in-step peak per rank). Ends with `RESULT fsdp_mem_ratio` (SmallCnn)
# and `RESULT fsdp_peak_ratio` (GPT: FSDP peak / (DDP peak / N + largest
# unit)); writes $CTRUN_BUILD_DIR/bench/fsdp-<time>.json. What the byte
# figures measure, and the env knobs, are in bench/fsdp.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/fsdp.py "$@"
