"""The logic of bench/ddp.sh: DDP step throughput, C++ against Python.

(a) ctrun-fashion-mnist (C++ DDP, trainer/parallel/ddp.cc) under ctrun;
(b) PyTorch 1.13's DistributedDataParallel (bench/ddp_reference.py) under
    torchrun (patched in-process by bench/torchrun_compat.py).
Same SmallCnn, the same batch per rank on both sides, SGD(0.05, momentum
0.9), DistributedSampler order, bucket cap, one intra-op thread per rank; 2
ranks, Gloo, CPU, Fashion-MNIST preloaded. For each batch size the two sides
run REPS times, interleaved (which one goes first alternates), and their
medians are compared; min-max is printed beside each median. Step time =
global batch / samples per second. "hidden" is the share of the C++ side's
all-reduce span that elapsed before backward ended.

Ends with `RESULT ddp_speedup_b<B> <C++ median / Python median>` for each
batch size B (the goals: >= 1.1 at 16, >= 1.2 at 64) and writes the JSON file
(bench/benchjson.py) with the plot of step time against batch size.

Env: CTRUN_BUILD_DIR (./build), BATCHES ("16 64", per rank), STEPS (300),
WARMUP (30), REPS (5), BUCKET_MB (25: SmallCnn fits one bucket; 0.1 splits it).
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
BATCHES = [int(b) for b in os.environ.get("BATCHES", "16 64").split()]
STEPS = int(os.environ.get("STEPS", "300"))
WARMUP = int(os.environ.get("WARMUP", "30"))
REPS = int(os.environ.get("REPS", "5"))
BUCKET_MB = os.environ.get("BUCKET_MB", "25")
PY = "/usr/bin/python3"
RANKS = 2


def bench_line(cmd, what):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=900)
    m = re.search(r"^BENCH (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        sys.exit(f"ddp.py: {what} exited {proc.returncode} without a BENCH line:\n{proc.stdout[-3000:]}")
    return {k: float(v) for k, v in (kv.split("=", 1) for kv in m.group(1).split())}


def run_cxx(batch):
    return bench_line([CTRUN, "--standalone", "--nproc-per-node", str(RANKS),
                       "--no-python", WORKER, "--max-steps", str(STEPS), "--bench-warmup", str(WARMUP),
                       "--threads", "1", "--epochs", "1000", "--test-limit", "100", "--log-every", "0",
                       "--checkpoint-every", "0", "--bucket-cap-mb", BUCKET_MB, "--batch-size", str(batch)],
                      "the C++ side")


def run_py(batch):
    return bench_line([PY, os.path.join(ROOT, "bench", "torchrun_compat.py"), "--nnodes", "1",
                       "--nproc_per_node", str(RANKS), "--rdzv_backend", "c10d",
                       "--rdzv_endpoint", "127.0.0.1:0", "--rdzv_id", f"ddp-bench-{os.getpid()}",
                       "--monitor_interval", "0.1", os.path.join(ROOT, "bench", "ddp_reference.py"),
                       "--steps", str(STEPS), "--warmup", str(WARMUP), "--bucket-cap-mb", BUCKET_MB,
                       "--batch-size", str(batch)],
                      "the Python side")


def main():
    for f in (CTRUN, WORKER):
        if not os.access(f, os.X_OK):
            sys.exit(f"ddp.py: {f} is not built (build it, or set CTRUN_BUILD_DIR)")
    print(f"{RANKS} ranks x batch {BATCHES} per rank, {STEPS} steps after {WARMUP} warm-up, bucket cap "
          f"{BUCKET_MB} MB, {REPS} interleaved runs per side; {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    per_batch = {}
    for batch in BATCHES:
        cxx, py, hidden = [], [], []
        for i in range(REPS):
            order = (("c++", run_cxx), ("python", run_py))
            for name, fn in order if i % 2 == 0 else order[::-1]:
                line = fn(batch)
                if name == "c++":
                    cxx.append(line["samples_per_s"])
                    hidden.append(line["hidden_share"])
                else:
                    py.append(line["samples_per_s"])
            print(f"  batch {batch} run {i + 1}: c++ {cxx[-1]:.0f} samples/s (hidden {hidden[-1]:.2f}), "
                  f"python {py[-1]:.0f} samples/s", flush=True)
        per_batch[batch] = {"cxx": cxx, "python": py, "hidden": hidden}

    med = lambda v: benchjson.spread(v)["median"]
    print(f"\nglobal samples/s, median (min–max) of {REPS}; load after {os.getloadavg()[0]:.2f}")
    print(f"{'batch':>5}  {'C++ DDP under ctrun':>24}  {'Python DDP under torchrun':>26}  {'ratio':>5}  "
          f"{'C++ step ms':>11}  {'Py step ms':>10}  {'hidden':>6}")
    results = {}
    for batch, r in per_batch.items():
        ratio = med(r["cxx"]) / med(r["python"])
        results[f"ddp_speedup_b{batch}"] = ratio
        step = lambda v: 1e3 * RANKS * batch / med(v)
        print(f"{batch:>5}  {benchjson.fmt(r['cxx'], digits=0):>24}  {benchjson.fmt(r['python'], digits=0):>26}  "
              f"{ratio:5.3f}  {step(r['cxx']):11.2f}  {step(r['python']):10.2f}  {med(r['hidden']):6.2f}")

    # Step time from samples/s: global batch / rate (min and max swap).
    def step_point(batch, rates):
        ms = [1e3 * RANKS * batch / r for r in rates]
        return benchjson.point(batch, ms)
    doc = {
        "config": {"ranks": RANKS, "steps": STEPS, "warmup": WARMUP, "reps": REPS, "bucket_cap_mb": BUCKET_MB},
        "samples_per_s": {str(b): {"cxx": r["cxx"], "python": r["python"], "hidden": r["hidden"]}
                          for b, r in per_batch.items()},
        "results": results,
        "plots": [{
            "file": "ddp-step-vs-batch.png",
            "title": f"DDP step time, SmallCnn, {RANKS} ranks (Gloo, CPU): C++ vs Python",
            "x": "batch per rank", "y": "ms per step (median, min-max)", "log_x": True, "log_y": False,
            "series": {"C++ DDP (ctrun)": [step_point(b, r["cxx"]) for b, r in per_batch.items()],
                       "Python DDP (torchrun)": [step_point(b, r["python"]) for b, r in per_batch.items()]},
        }],
    }
    path = benchjson.write("ddp", doc, ROOT)
    print(f"\nmachine-readable results: {path}")
    for name, value in results.items():
        print(f"RESULT {name} {value:.3f}")


if __name__ == "__main__":
    main()
