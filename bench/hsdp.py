"""The logic of bench/hsdp.sh: HSDP against DDP on ctrun-gpt's mesh.

The GPT of trainer/models (byte vocabulary 128; LAYERS blocks of WIDTH,
HEADS heads, SEQ_LEN tokens, BATCH sequences per dp replica, Adam, one
intra-op thread per rank), under ctrun, Gloo, CPU, on RANKS (4) ranks, in
these layouts (LAYOUTS picks some by name):
  ddp            --mesh dp=4: DDP over dp (the baseline, dp_shard 1);
  hsdp_full      --mesh dp=4 --dp-shard full --dp-shard-size 2: 2 replicas
                 x 2 shards, ZeRO-3 within the shard group (the RESULT);
  hsdp_grad_op   the same with --dp-shard grad-op (ZeRO-2);
  fsdp_dp        --mesh dp=4 --dp-shard full: one shard group of 4 (plain
                 FSDP over dp, no replicas);
  ddp_tp2        --mesh dp=2,tp=2: DDP over dp with TP;
  hsdp_tp2       --mesh dp=2,tp=2 --dp-shard full: FSDP over dp of each
                 rank's TP slices.
Per layout, from every rank's STATS line (trainer/apps/gpt_main.cc):
  state_bytes  parameters + gradients + optimizer state held between steps
               (tensor storage, each counted once: the method of
               bench/fsdp.sh), the most over ranks (they differ by padding
               only; bytes do not vary from run to run);
  peak_bytes   that plus the most the wrapper holds within a step (DDP's
               buckets; FSDP's gathered units and gradient buffers);
  iter_s       whole iterations (forward, backward, gradient sync,
               optimizer step), mean over STEPS-1 steps (the first not
               timed), rank 0's; median (min-max) over REPS rounds, the
               first layout rotating from round to round.
Each layout's state is compared with its DDP's (same tp) divided by its
dp_shard: the ideal of sharding within groups of dp_shard ranks.

Ends with
  RESULT hsdp_state_ratio <hsdp_full state / (ddp state / 2)>   (goal <= 1.05)
and writes $CTRUN_BUILD_DIR/bench/hsdp-<time>.json (bench/benchjson.py).

Env: CTRUN_BUILD_DIR (./build), LAYERS (8), WIDTH (256), HEADS (8),
SEQ_LEN (16), BATCH (2), STEPS (4), REPS (3), LAYOUTS (all), RUN_TIMEOUT (600).
"""
import os
import re
import subprocess
import sys

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
GPT = os.path.join(BUILD, "trainer", "apps", "ctrun-gpt")
LAYERS = os.environ.get("LAYERS", "8")
WIDTH = os.environ.get("WIDTH", "256")
HEADS = os.environ.get("HEADS", "8")
SEQ_LEN = os.environ.get("SEQ_LEN", "16")
BATCH = int(os.environ.get("BATCH", "2"))
STEPS = int(os.environ.get("STEPS", "4"))
REPS = int(os.environ.get("REPS", "3"))
RUN_TIMEOUT = int(os.environ.get("RUN_TIMEOUT", "600"))
RANKS = 4

# name: (flags, baseline layout, dp_shard, dp)
ALL_LAYOUTS = {
    "ddp": (["--mesh", "dp=4"], "ddp", 1, 4),
    "hsdp_full": (["--mesh", "dp=4", "--dp-shard", "full", "--dp-shard-size", "2"], "ddp", 2, 4),
    "hsdp_grad_op": (["--mesh", "dp=4", "--dp-shard", "grad-op", "--dp-shard-size", "2"], "ddp", 2, 4),
    "fsdp_dp": (["--mesh", "dp=4", "--dp-shard", "full"], "ddp", 4, 4),
    "ddp_tp2": (["--mesh", "dp=2,tp=2"], "ddp_tp2", 1, 2),
    "hsdp_tp2": (["--mesh", "dp=2,tp=2", "--dp-shard", "full"], "ddp_tp2", 2, 2),
}
NAMES = os.environ.get("LAYOUTS", " ".join(ALL_LAYOUTS)).split()


def run_once(name):
    flags, _, _, dp = ALL_LAYOUTS[name]
    cmd = [CTRUN, "--standalone", "--nproc-per-node", str(RANKS), "--no-python", GPT, *flags,
           "--layers", LAYERS, "--width", WIDTH, "--heads", HEADS, "--seq-len", SEQ_LEN,
           "--global-batch", str(BATCH * dp), "--micro-batches", "1", "--steps", str(STEPS),
           "--log-every", "0", "--threads", "1", "--store-timeout", "60"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=RUN_TIMEOUT)
    lines = [dict(kv.split("=", 1) for kv in m.split()) for m in re.findall(r"^STATS (.*)$", proc.stdout, re.M)]
    if proc.returncode != 0 or len(lines) != RANKS:
        sys.exit(f"hsdp.py: {name} exited {proc.returncode} with {len(lines)} of {RANKS} STATS lines:\n"
                 f"{proc.stdout[-3000:]}")
    return sorted(({k: float(v) for k, v in line.items()} for line in lines), key=lambda s: s["rank"])


def main():
    for f in (CTRUN, GPT):
        if not os.access(f, os.X_OK):
            sys.exit(f"hsdp.py: {f} is not built (build it, or set CTRUN_BUILD_DIR)")
    for name in NAMES:
        if name not in ALL_LAYOUTS or ALL_LAYOUTS[name][1] not in NAMES:
            sys.exit(f"hsdp.py: LAYOUTS: '{name}' is unknown or lacks its baseline (of {' '.join(ALL_LAYOUTS)})")
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"GPT ({LAYERS} blocks, width {WIDTH}, {HEADS} heads, seq {SEQ_LEN}, vocab 128, batch {BATCH} per dp "
          f"replica, Adam) on {RANKS} ranks; {STEPS} steps per run, the first not timed; {REPS} rounds", flush=True)
    runs = {name: [] for name in NAMES}
    for i in range(REPS):
        order = NAMES[i % len(NAMES):] + NAMES[:i % len(NAMES)]
        for name in order:
            runs[name].append(run_once(name))
    mib = lambda b: b / 2**20
    table = {}
    for name in NAMES:
        first = runs[name][0]
        table[name] = {"iter_s": [r[0]["iter_s"] for r in runs[name]],
                       "state_bytes": max(s["state_bytes"] for s in first),
                       "peak_bytes": max(s["peak_bytes"] for s in first)}
    print(f"\n{'layout':<13} {'flags':<52} {'iter_ms median (min–max)':>26} {'state_MiB':>9} {'peak_MiB':>8} "
          f"{'state/(ddp/S)':>13} {'iter/ddp':>8}")
    for name in NAMES:
        flags, base, shard, _ = ALL_LAYOUTS[name]
        row, b = table[name], table[base]
        row["state_ratio"] = row["state_bytes"] / (b["state_bytes"] / shard)
        row["iter_ratio"] = benchjson.spread(row["iter_s"])["median"] / benchjson.spread(b["iter_s"])["median"]
        print(f"{name:<13} {' '.join(flags):<52} {benchjson.fmt(row['iter_s'], 1e3):>26} "
              f"{mib(row['state_bytes']):9.2f} {mib(row['peak_bytes']):8.2f} {row['state_ratio']:13.3f} "
              f"{row['iter_ratio']:8.3f}")
    results = {}
    if "hsdp_full" in table:
        results["hsdp_state_ratio"] = table["hsdp_full"]["state_ratio"]
    doc = {"config": {"layers": int(LAYERS), "width": int(WIDTH), "heads": int(HEADS), "seq_len": int(SEQ_LEN),
                      "batch_per_replica": BATCH, "steps": STEPS, "reps": REPS, "ranks": RANKS},
           "runs": [{"layout": n, "flags": ALL_LAYOUTS[n][0], "stats": runs[n]} for n in NAMES],
           "table": table, "results": results}
    path = benchjson.write("hsdp", doc, ROOT)
    print(f"\nmachine-readable results: {path}")
    if "hsdp_state_ratio" in results:
        print(f"RESULT hsdp_state_ratio {results['hsdp_state_ratio']:.3f}")


if __name__ == "__main__":
    main()
