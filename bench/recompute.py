"""Activation recomputation on the GPT: ctrun-gpt under ctrun, --recompute
none, full and selective side by side in one run.

The model (byte vocabulary 128; LAYERS, WIDTH, HEADS, SEQ_LEN, global batch
BATCH in one micro-batch, Adam, one intra-op thread per rank, Gloo, CPU) is
shaped the way Megatron's argument for selective recomputation needs
(Korthikanti et al., arXiv 2205.05198, sec. 4.2): the attention core keeps
one [batch, heads, seq, seq] softmax output per block, against about 16
[batch, seq, width] float tensors for the rest of the block (layer-norm and
linear inputs, q/k/v, the 4x MLP pair), so its share of a block's stored
activations is heads*seq / (16*width + heads*seq): 0.8 at the defaults (12
blocks, width 128, 32 heads of 4, seq 256), near GPT-3 175B's 0.70 in
Megatron's count (5*a*s/h = 80 against 34 per s*b*h) at a width this CPU
trains in seconds. Its FLOPs (4*seq^2*width per sequence and block, against
24*seq*width^2 for the linears) are what selective recomputation repeats.

REPS rounds; each round runs none, full and selective once, the first
policy rotating from round to round, so load drifts on a shared machine
touch all three alike. Per run, from every rank's STATS line
(trainer/apps/gpt_main.cc), rank 0's:
  step_s      mean wall seconds per Pipeline::Step (forward + backward +
              gradient sync), the first step not timed;
  step_bytes  peak_step_bytes: the most CPU tensor bytes alive during a step
              beyond those alive at its start (trainer/parallel/memory_meter.h)
              -- the activations kept for backward plus backward's own
              temporaries (the recomputed block's included), the first step
              (which also allocates the gradients) left out;
  tensor_bytes, rss  everything alive at the peak; ru_maxrss;
and cpu_s, the user + system CPU seconds of the whole run (launcher and
workers, start-up and the untimed first step included; from this process's
RUSAGE_CHILDREN, one run at a time): less swayed than wall time by other
jobs on a shared machine, which slow a run down without adding to its CPU.
Printed: per policy the median (min-max) of each, and each against none
(step time: the median of the rounds' paired ratios; bytes do not depend on
load, so their spread is 0).

Ends with
  RESULT recompute_activation_ratio <selective step_bytes / none's>  (goal <= 0.4)
  RESULT recompute_step_ratio <selective step_s / none's>            (goal <= 1.15)
after a line with full recomputation's two ratios, and writes
$CTRUN_BUILD_DIR/bench/recompute-<time>.json (bench/benchjson.py) with every
run's STATS and the chart of activation bytes and step time per policy,
each ÷ none's median.

Env: CTRUN_BUILD_DIR (./build), CTRUN (launcher, default
$CTRUN_BUILD_DIR/launcher/ctrun), LAYERS (12), WIDTH (128), HEADS (32),
SEQ_LEN (256), BATCH (RANKS: one sequence per rank), STEPS (4, the first not
timed), REPS (3), RANKS (1: one process, --mesh dp=1; 2 runs --mesh dp=2,
one rank per core),
RUN_TIMEOUT (300 s per run), RAW (set: print every rank's STATS line).
"""
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.environ.get("CTRUN", os.path.join(BUILD, "launcher", "ctrun"))
WORKER = os.path.join(BUILD, "trainer", "apps", "ctrun-gpt")
LAYERS = int(os.environ.get("LAYERS", "12"))
WIDTH = int(os.environ.get("WIDTH", "128"))
HEADS = int(os.environ.get("HEADS", "32"))
SEQ_LEN = int(os.environ.get("SEQ_LEN", "256"))
STEPS = int(os.environ.get("STEPS", "4"))
REPS = int(os.environ.get("REPS", "3"))
RANKS = int(os.environ.get("RANKS", "1"))
BATCH = int(os.environ.get("BATCH", str(RANKS)))
RUN_TIMEOUT = float(os.environ.get("RUN_TIMEOUT", "300"))
POLICIES = ["none", "full", "selective"]

STATS_RE = re.compile(r"^STATS (.*)$", re.M)


def kill_group(proc):
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            pass


def launch(policy, rnd):
    """One run of ctrun-gpt --recompute `policy`; rank 0's STATS as a dict."""
    cmd = [CTRUN, "--standalone", "--nproc-per-node", str(RANKS), "--no-python", WORKER,
           "--mesh", f"dp={RANKS}", "--micro-batches", "1", "--recompute", policy,
           "--layers", str(LAYERS), "--width", str(WIDTH), "--heads", str(HEADS),
           "--seq-len", str(SEQ_LEN), "--global-batch", str(BATCH), "--steps", str(STEPS),
           "--log-every", "0", "--threads", "1", "--store-timeout", "60"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    # Own session: on timeout the launcher and its workers go together.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        sys.exit(f"recompute.py: --recompute {policy} ran past RUN_TIMEOUT={RUN_TIMEOUT:.0f} s; killed. "
                 "Output tail:\n" + out[-2000:])
    finally:
        if proc.poll() is None:
            kill_group(proc)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stats = []
    for m in STATS_RE.finditer(out):
        stats.append({k: float(v) for k, v in (kv.split("=", 1) for kv in m.group(1).split())})
    if proc.returncode != 0 or len(stats) != RANKS:
        sys.exit(f"recompute.py: --recompute {policy} exited {proc.returncode} with {len(stats)}/{RANKS} "
                 "STATS lines:\n" + out[-3000:])
    stats.sort(key=lambda s: s["rank"])
    if os.environ.get("RAW"):
        for s in stats:
            print(f"    {policy} STATS " + " ".join(f"{k}={v:g}" for k, v in s.items()))
    print(f"  round {rnd + 1} {policy:<9} step_s {stats[0]['step_s']:7.3f}  step_bytes "
          f"{stats[0]['peak_step_bytes'] / 2**20:8.2f} MiB  ({seconds:5.1f} s, {cpu:5.1f} CPU s)", flush=True)
    stats[0]["cpu_s"] = cpu
    return {"policy": policy, "round": rnd, "seconds": seconds, "cpu_s": cpu, "stats": stats}


def median(values):
    return statistics.median(values)


def paired_ratios(runs, policy, key):
    """Per round: `policy`'s rank-0 `key` ÷ none's in the same round."""
    by = {(r["policy"], r["round"]): r["stats"][0][key] for r in runs}
    return [by[(policy, k)] / by[("none", k)] for k in range(REPS)]


def values(runs, policy, key):
    return [r["stats"][0][key] for r in runs if r["policy"] == policy]


def print_table(runs):
    print(f"\n{'policy':<10} {'step_s median (min-max)':>24} {'÷ none':>7} {'step MiB':>9} {'÷ none':>7} "
          f"{'tensor MiB':>10} {'rss MiB':>8} {'run cpu_s median (min-max)':>27} {'÷ none':>7}")
    none_bytes = median(values(runs, "none", "peak_step_bytes"))
    for p in POLICIES:
        step = benchjson.fmt(values(runs, p, "step_s"), digits=3)
        step_ratio = median(paired_ratios(runs, p, "step_s"))
        sb = median(values(runs, p, "peak_step_bytes"))
        print(f"{p:<10} {step:>24} {step_ratio:7.3f} {sb / 2**20:9.2f} {sb / none_bytes:7.3f} "
              f"{median(values(runs, p, 'peak_tensor_bytes')) / 2**20:10.2f} "
              f"{median(values(runs, p, 'peak_rss_kb')) / 1024:8.0f} "
              f"{benchjson.fmt(values(runs, p, 'cpu_s'), digits=2):>27} {median(paired_ratios(runs, p, 'cpu_s')):7.3f}")
    for p in ("full", "selective"):
        rs = paired_ratios(runs, p, "step_s")
        print(f"  {p}: step time ÷ none per round " + " ".join(f"{x:.3f}" for x in rs))
    spread = {p: max(values(runs, p, "peak_step_bytes")) - min(values(runs, p, "peak_step_bytes"))
              for p in POLICIES}
    if any(spread.values()):
        print("  note: step bytes differed between rounds: " + ", ".join(f"{p} {b:.0f} B" for p, b in spread.items()))


def ratios(runs, policy):
    """(activation bytes ÷ none's, step time ÷ none's) of `policy`, medians."""
    act = median(values(runs, policy, "peak_step_bytes")) / median(values(runs, "none", "peak_step_bytes"))
    return act, median(paired_ratios(runs, policy, "step_s"))


def write_json(runs, results):
    none_bytes = median(values(runs, "none", "peak_step_bytes"))
    none_step = median(values(runs, "none", "step_s"))
    mem = [benchjson.point(p, values(runs, p, "peak_step_bytes"), 1 / none_bytes) for p in POLICIES]
    step = [benchjson.point(p, values(runs, p, "step_s"), 1 / none_step) for p in POLICIES]
    doc = {
        "config": {"layers": LAYERS, "width": WIDTH, "heads": HEADS, "seq_len": SEQ_LEN, "batch": BATCH,
                   "steps": STEPS, "reps": REPS, "ranks": RANKS},
        "runs": runs,
        "results": results,
        "plots": [{
            "file": "recompute-memory-time.png",
            "title": "Activation memory and step time per recomputation policy",
            "x": f"--recompute (GPT: {LAYERS} blocks, width {WIDTH}, {HEADS} heads, seq {SEQ_LEN})",
            "y": "÷ none's median",
            "log_x": False, "log_y": False,
            "series": {"activation bytes (peak_step_bytes)": mem, "step time": step}}],
    }
    return benchjson.write("recompute", doc, ROOT)


def main():
    for f in (CTRUN, WORKER):
        if not os.access(f, os.X_OK):
            sys.exit(f"recompute.py: {f} is not built (build it, or set CTRUN_BUILD_DIR / CTRUN)")
    core_share = HEADS * SEQ_LEN / (16 * WIDTH + HEADS * SEQ_LEN)
    print(f"model: layers={LAYERS} width={WIDTH} heads={HEADS} seq_len={SEQ_LEN} vocab=128 "
          f"global_batch={BATCH} (one micro-batch) steps={STEPS} (first not timed); {RANKS} rank(s) on "
          f"{os.cpu_count()} CPUs; {REPS} rounds")
    print(f"attention core's share of a block's stored activations, by count: {core_share:.3f} "
          f"(heads*seq / (16*width + heads*seq))")
    print("load before: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    runs = []
    for rnd in range(REPS):
        order = POLICIES[rnd % 3:] + POLICIES[:rnd % 3]
        for p in order:
            runs.append(launch(p, rnd))
    print("load after:  " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print_table(runs)
    full_act, full_step = ratios(runs, "full")
    act, step = ratios(runs, "selective")
    results = {"recompute_activation_ratio": round(act, 3), "recompute_step_ratio": round(step, 3),
               "recompute_full_activation_ratio": round(full_act, 3), "recompute_full_step_ratio": round(full_step, 3)}
    path = write_json(runs, results)
    print(f"\nmachine-readable results: {path}")
    print(f"\nfull recomputation: activation bytes ÷ none {full_act:.3f}, step time ÷ none {full_step:.3f}")
    print(f"RESULT recompute_activation_ratio {act:.3f}")
    print(f"RESULT recompute_step_ratio {step:.3f}")


if __name__ == "__main__":
    main()
