"""The logic of bench/topk.sh: top-k compression (DGC) against dense DDP.

ctrun-fashion-mnist (SmallCnn, SGD lr 0.05, momentum 0.9) under ctrun,
RANKS ranks, Gloo, CPU, one intra-op thread per rank, in two modes:
  dense   plain DDP (float32 bucket all-reduce, the optimizer's momentum);
  topk    --grad-compression topk:DENSITY (error feedback, DGC momentum
          correction; its 10 dense warm-up steps end before the timed window).
Each mode runs REPS times, interleaved (which goes first alternates); the
BENCH line of each run gives the step time over the steps after WARMUP and
the gradient bytes rank 0 put into collectives per step (its values +
indices under top-k) against what float32 all-reduces of the same buckets
carry (dense_bytes_per_step).

Ends with `RESULT topk_wire_ratio <top-k wire bytes / dense bytes>` (goal
<= 0.03) and `RESULT topk_step_ratio <top-k step median / dense step
median>`, and writes the JSON file (bench/benchjson.py).

Env: CTRUN_BUILD_DIR (./build), RANKS (2), DENSITY (0.01), BATCH (64, per
rank), STEPS (300), WARMUP (30), REPS (5).
"""
import os
import re
import subprocess
import sys

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
WORKER = os.path.join(BUILD, "trainer", "apps", "ctrun-fashion-mnist")
RANKS = int(os.environ.get("RANKS", "2"))
DENSITY = os.environ.get("DENSITY", "0.01")
BATCH = int(os.environ.get("BATCH", "64"))
STEPS = int(os.environ.get("STEPS", "300"))
WARMUP = int(os.environ.get("WARMUP", "30"))
REPS = int(os.environ.get("REPS", "5"))
TOPK_WARMUP = 10
MODES = {"dense": [], "topk": ["--grad-compression", f"topk:{DENSITY}", "--topk-warmup-steps", str(TOPK_WARMUP)]}


def run(mode):
    cmd = [CTRUN, "--standalone", "--nproc-per-node", str(RANKS), "--no-python", WORKER,
           "--max-steps", str(STEPS), "--bench-warmup", str(WARMUP), "--threads", "1", "--epochs", "1000",
           "--test-limit", "100", "--log-every", "0", "--checkpoint-every", "0", "--batch-size", str(BATCH),
           *MODES[mode]]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=900)
    m = re.search(r"^BENCH (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        sys.exit(f"topk.py: the {mode} run exited {proc.returncode} without a BENCH line:\n{proc.stdout[-3000:]}")
    return {k: float(v) for k, v in (kv.split("=", 1) for kv in m.group(1).split())}


def main():
    for f in (CTRUN, WORKER):
        if not os.access(f, os.X_OK):
            sys.exit(f"topk.py: {f} is not built (build it, or set CTRUN_BUILD_DIR)")
    if WARMUP <= TOPK_WARMUP:
        sys.exit(f"topk.py: WARMUP must exceed top-k's {TOPK_WARMUP} dense warm-up steps")
    print(f"{RANKS} ranks x batch {BATCH}, {STEPS} steps ({WARMUP} untimed), density {DENSITY}, {REPS} "
          f"interleaved runs per mode; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    runs = {mode: [] for mode in MODES}
    for i in range(REPS):
        order = list(MODES) if i % 2 == 0 else list(MODES)[::-1]
        for mode in order:
            runs[mode].append(run(mode))
        print(f"  run {i + 1}: " + ", ".join(
            f"{m} {runs[m][-1]['step_ms']:.2f} ms/step, {runs[m][-1]['wire_bytes_per_step']:.0f} B/step"
            for m in MODES), flush=True)

    med = lambda v: benchjson.spread(v)["median"]
    col = lambda mode, key: [r[key] for r in runs[mode]]
    dense_step, topk_step = med(col("dense", "step_ms")), med(col("topk", "step_ms"))
    wire_ratio = med([r["wire_bytes_per_step"] / r["dense_bytes_per_step"] for r in runs["topk"]])
    print(f"\nmedian (min–max) of {REPS}; load after {os.getloadavg()[0]:.2f}")
    print(f"{'mode':>6}  {'step ms':>22}  {'comm ms':>20}  {'wire B/step':>11}  {'dense B/step':>12}  {'wire ratio':>10}")
    for mode in MODES:
        wire, dense = med(col(mode, "wire_bytes_per_step")), med(col(mode, "dense_bytes_per_step"))
        print(f"{mode:>6}  {benchjson.fmt(col(mode, 'step_ms'), digits=2):>22}  "
              f"{benchjson.fmt(col(mode, 'comm_ms'), digits=2):>20}  {wire:11.0f}  {dense:12.0f}  {wire / dense:10.4f}")
    results = {"topk_wire_ratio": wire_ratio, "topk_step_ratio": topk_step / dense_step}
    print(f"\nstep time: top-k {topk_step:.2f} ms against dense {dense_step:.2f} ms "
          f"({results['topk_step_ratio']:.3f}x)")
    doc = {
        "config": {"ranks": RANKS, "density": DENSITY, "batch": BATCH, "steps": STEPS, "warmup": WARMUP,
                   "reps": REPS, "topk_warmup_steps": TOPK_WARMUP},
        "runs": runs,
        "results": results,
        "plots": [{
            "file": "topk-step.png",
            "title": f"SmallCnn step time, {RANKS} ranks (Gloo, CPU): dense DDP vs top-k {DENSITY}",
            "x": "mode", "y": "ms per step (median, min-max)", "log_x": False, "log_y": False,
            "series": {"step time": [benchjson.point(m, col(m, "step_ms")) for m in MODES]},
        }],
    }
    path = benchjson.write("topk", doc, ROOT)
    print(f"\nmachine-readable results: {path}")
    for name, value in results.items():
        print(f"RESULT {name} {value:.4f}")


if __name__ == "__main__":
    main()
