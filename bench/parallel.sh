#!/usr/bin/env bash
# Data, tensor and pipeline parallelism on one model: ctrun-gpt under ctrun at
# 8 ranks as dp=8, tp=8, pp=8 (1F1B and GPipe, m=8 micro-batches), plus pp=2
# (one rank per core on a 2-core machine) for an honest bubble. Prints per-rank
# / per-stage step time, compute time, bubble, parameter and peak step bytes;
# the measured bubble (mean over stages of 1 - compute_s/step_s) beside
# (p-1)/(m+p-1); 1F1B vs GPipe activation bytes per stage. Ends with
# `RESULT pp_1f1b_vs_gpipe_activation_ratio`, `RESULT pp_1f1b_bubble_ratio`
# (median of PP_REPS=3 pp=2 1F1B runs) and `RESULT tp_param_mem_ratio`.
# Also p=4 interleaved 1F1B (V=2 chunks a stage) against 1F1B and GPipe,
# PP_REPS rounds, ending with `RESULT interleaved_bubble_ratio`.
# ~11 min on a 2-core machine (CONFIGS=pp4 alone: ~5 min). Uses
# $CTRUN_BUILD_DIR (default ./build); env knobs (model size, STEPS, PP_REPS,
# V, RUN_TIMEOUT, splits) in bench/parallel.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
exec /usr/bin/python3 bench/parallel.py "$@"
