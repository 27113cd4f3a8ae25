"""Activation recomputation on the GPT: ctrun-gpt under ctrun, --recompute
none, full and selective side by side in one run, with each policy's floor
measured in the same run.

Two GPT shapes (byte vocabulary 128, global batch in one micro-batch, Adam,
one intra-op thread per rank, Gloo, CPU):

  attention  LAYERS, WIDTH, HEADS, SEQ_LEN, BATCH: shaped the way Megatron's
             argument for selective recomputation needs (Korthikanti et
             al., arXiv 2205.05198, sec. 4.2): the attention core keeps one
             [batch, heads, seq, seq] softmax output per block, against
             about 16 [batch, seq, width] float tensors for the rest of the
             block (layer-norm and linear inputs, q/k/v, the 4x MLP pair), so
             its share of a block's stored activations is
             heads*seq / (16*width + heads*seq): 0.8 at the defaults (12
             blocks, width 128, 32 heads of 4, seq 256, one sequence), near
             GPT-3 175B's 0.70 in Megatron's count (5*a*s/h = 80 against 34
             per s*b*h). Its FLOPs (4*seq^2*width per sequence and block,
             against 24*seq*width^2 for the linears) are what selective
             recomputation repeats. The RESULT lines are this shape's.
  parallel   bench/parallel.sh's GPT: 8 blocks, width 256, 8 heads, seq 64
             (the core's share by the same count is 0.11), with 2 sequences
             a step instead of its 16 to keep the run short: both the core's
             and the linears' work and bytes grow with the sequence count, so
             the ratios to none do not depend on it.

REPS rounds; each round runs none, full and selective once per shape, the
first policy (and shape) rotating from round to round, so load drifts on a
shared machine touch all alike. Per run, from rank 0's STATS line
(trainer/apps/gpt_main.cc):
  step_s      mean wall seconds per Pipeline::Step (forward + backward +
              gradient sync), the first step not timed;
  fwd_s       of it, the forward (the loss included);
  core_s      of it, the time inside AttentionCore
              (trainer/parallel/attention_core.h): under none the core's
              forward in every block, what selective recomputation repeats;
  step_cpu_s, fwd_cpu_s, core_cpu_s  the same on the rank's thread CPU clock
              (trainer/parallel/thread_cpu_clock.h; with one intra-op thread
              all of a step's compute runs on it; with RANKS=2, Gloo's
              threads' share of the gradient all-reduce is not in it): the
              work, which other jobs on a shared machine do not swell as
              they do wall time;
  step_bytes  peak_step_bytes: the most CPU tensor bytes alive during a step
              beyond those alive at its start (trainer/parallel/memory_meter.h)
              -- the activations kept for backward plus backward's own
              temporaries (the recomputed block's included), the first step
              (which also allocates the gradients) left out;
  tensor_bytes, rss  everything alive at the peak; ru_maxrss;
and cpu_s, the user + system CPU seconds of the whole run (launcher and
workers, start-up and the untimed first step included).

The floor of a policy is what it cannot avoid: none's step plus the forward
it repeats, from none's run of the same round:
  selective floor = none's step_s + none's core_s
  full floor      = none's step_s + none's fwd_s
(the full floor counts the embedding, the head and the loss, which full
recomputation does not repeat: a small allowance on these shapes), on each
clock. Printed per shape: per policy the median (min-max) of each figure,
the rounds' paired ratios to none and to the floor (median (min-max)), and
a one-line note where selective's floor itself is above 1.15x none's step.

Ends with the parallel shape's activation and step ratios (selective /
none: recompute_parallel_gpt_*), then the attention shape's, the CPU-clock
ones first (recompute_step_ratio_cpu, recompute_selective_floor_ratio_cpu,
recompute_full_floor_ratio_cpu), then
  RESULT recompute_activation_ratio <selective step_bytes / none's>     (goal <= 0.4)
  RESULT recompute_step_ratio <selective step_s / none's>               (goal <= 1.15)
  RESULT recompute_selective_floor_ratio <selective step_s / its floor> (goal <= 1.10)
  RESULT recompute_full_floor_ratio <full step_s / its floor>           (goal <= 1.10)
(wall clock, medians of the rounds' paired ratios), and
writes $CTRUN_BUILD_DIR/bench/recompute-<time>.json (bench/benchjson.py) with
every run's STATS and the chart of activation bytes and step time per policy,
each ÷ none's median.

Env: CTRUN_BUILD_DIR (./build), CTRUN (launcher, default
$CTRUN_BUILD_DIR/launcher/ctrun), LAYERS (12), WIDTH (128), HEADS (32),
SEQ_LEN (256), BATCH (RANKS: one sequence per rank) for the attention shape,
SHAPES (attention,parallel), STEPS (4, the first not timed), REPS (5),
RANKS (1: one process, --mesh dp=1; 2 runs --mesh dp=2, one rank per core),
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
STEPS = int(os.environ.get("STEPS", "4"))
REPS = int(os.environ.get("REPS", "5"))
RANKS = int(os.environ.get("RANKS", "1"))
RUN_TIMEOUT = float(os.environ.get("RUN_TIMEOUT", "300"))
POLICIES = ["none", "full", "selective"]
SHAPES = {
    "attention": {"layers": int(os.environ.get("LAYERS", "12")), "width": int(os.environ.get("WIDTH", "128")),
                  "heads": int(os.environ.get("HEADS", "32")), "seq_len": int(os.environ.get("SEQ_LEN", "256")),
                  "batch": int(os.environ.get("BATCH", str(RANKS)))},
    # bench/parallel.sh's blocks and sequence; 2 sequences instead of its 16
    # (per-sequence costs and bytes, hence the ratios, do not depend on it).
    "parallel": {"layers": 8, "width": 256, "heads": 8, "seq_len": 64, "batch": 2},
}
SHAPE_NAMES = [s for s in os.environ.get("SHAPES", "attention,parallel").split(",") if s]
STEP_GOAL = 1.15

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


def launch(shape, policy, rnd):
    """One run of ctrun-gpt --recompute `policy` on `shape`; rank 0's STATS as a dict."""
    m = SHAPES[shape]
    cmd = [CTRUN, "--standalone", "--nproc-per-node", str(RANKS), "--no-python", WORKER,
           "--mesh", f"dp={RANKS}", "--micro-batches", "1", "--recompute", policy,
           "--layers", str(m["layers"]), "--width", str(m["width"]), "--heads", str(m["heads"]),
           "--seq-len", str(m["seq_len"]), "--global-batch", str(m["batch"]), "--steps", str(STEPS),
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
    for match in STATS_RE.finditer(out):
        stats.append({k: float(v) for k, v in (kv.split("=", 1) for kv in match.group(1).split())})
    if proc.returncode != 0 or len(stats) != RANKS or "core_s" not in stats[0]:
        sys.exit(f"recompute.py: --recompute {policy} exited {proc.returncode} with {len(stats)}/{RANKS} "
                 "STATS lines (with fwd_s and core_s):\n" + out[-3000:])
    stats.sort(key=lambda s: s["rank"])
    if os.environ.get("RAW"):
        for s in stats:
            print(f"    {shape} {policy} STATS " + " ".join(f"{k}={v:g}" for k, v in s.items()))
    s0 = stats[0]
    print(f"  round {rnd + 1} {shape:<9} {policy:<9} step_s {s0['step_s']:7.3f}  fwd_s {s0['fwd_s']:6.3f}  "
          f"core_s {s0['core_s']:6.3f}  step_bytes {s0['peak_step_bytes'] / 2**20:8.2f} MiB  "
          f"({seconds:5.1f} s, {cpu:5.1f} CPU s)", flush=True)
    s0["cpu_s"] = cpu
    return {"shape": shape, "policy": policy, "round": rnd, "seconds": seconds, "cpu_s": cpu, "stats": stats}


def median(values):
    return statistics.median(values)


def values(runs, policy, key):
    return [r["stats"][0][key] for r in runs if r["policy"] == policy]


def by_round(runs, policy, key):
    """{round: `policy`'s rank-0 `key`} (`runs` of one shape)."""
    return {r["round"]: r["stats"][0][key] for r in runs if r["policy"] == policy}


def paired_ratios(runs, policy, key):
    """Per round: `policy`'s rank-0 `key` ÷ none's in the same round."""
    mine, none = by_round(runs, policy, key), by_round(runs, "none", key)
    return [mine[k] / none[k] for k in sorted(mine)]


# The clocks a step is timed on: (step, forward, attention core) keys of
# STATS. wall: what the goals are stated in; cpu: the rank's own CPU
# seconds (thread clock), which other jobs on a shared machine do not swell.
CLOCKS = {"wall": ("step_s", "fwd_s", "core_s"), "cpu": ("step_cpu_s", "fwd_cpu_s", "core_cpu_s")}


def floors(runs, policy, clock="wall"):
    """Per round: the floor of `policy`'s step, from none's run of the round:
    none's step plus its core (selective) or forward (full) time; none's own."""
    step_key, fwd_key, core_key = CLOCKS[clock]
    step = by_round(runs, "none", step_key)
    extra = {"none": None, "selective": core_key, "full": fwd_key}[policy]
    if extra is None:
        return [step[k] for k in sorted(step)]
    repeat = by_round(runs, "none", extra)
    return [step[k] + repeat[k] for k in sorted(step)]


def floor_ratios(runs, policy, clock="wall"):
    """Per round: `policy`'s step ÷ its floor."""
    mine = by_round(runs, policy, CLOCKS[clock][0])
    return [mine[k] / f for k, f in zip(sorted(mine), floors(runs, policy, clock))]


def spread_text(xs, digits=3):
    return benchjson.fmt(xs, digits=digits)


def print_table(shape, runs):
    m = SHAPES[shape]
    print(f"\n{shape} GPT: layers={m['layers']} width={m['width']} heads={m['heads']} seq_len={m['seq_len']} "
          f"batch={m['batch']}; core share of stored activations by count {core_share(m):.3f}")
    for clock, (step_key, fwd_key, core_key) in CLOCKS.items():
        fwd, core, step = (values(runs, "none", k) for k in (fwd_key, core_key, step_key))
        print(f"  {clock:<4} none's step {spread_text(step)} s, forward {spread_text(fwd)} s, of it the attention "
              f"core {spread_text(core)} s ({median(core) / median(fwd):.2f} of the forward, "
              f"{median(core) / median(step):.3f} of the step)")
    print(f"{'policy':<10} {'step_s median (min-max)':>24} {'÷ none':>7} {'÷ floor (min-max)':>22} "
          f"{'step_cpu_s':>22} {'÷ none':>7} {'÷ floor (min-max)':>22} {'step MiB':>9} {'÷ none':>7} "
          f"{'tensor MiB':>10} {'rss MiB':>8} {'run cpu_s':>19}")
    none_bytes = median(values(runs, "none", "peak_step_bytes"))
    for p in POLICIES:
        sb = median(values(runs, p, "peak_step_bytes"))
        print(f"{p:<10} {spread_text(values(runs, p, 'step_s')):>24} {median(paired_ratios(runs, p, 'step_s')):7.3f} "
              f"{spread_text(floor_ratios(runs, p)):>22} {spread_text(values(runs, p, 'step_cpu_s')):>22} "
              f"{median(paired_ratios(runs, p, 'step_cpu_s')):7.3f} {spread_text(floor_ratios(runs, p, 'cpu')):>22} "
              f"{sb / 2**20:9.2f} {sb / none_bytes:7.3f} "
              f"{median(values(runs, p, 'peak_tensor_bytes')) / 2**20:10.2f} "
              f"{median(values(runs, p, 'peak_rss_kb')) / 1024:8.0f} "
              f"{spread_text(values(runs, p, 'cpu_s'), digits=2):>19}")
    for p in ("full", "selective"):
        for clock in CLOCKS:
            key = CLOCKS[clock][0]
            print(f"  {p} ({clock}): per round, step ÷ none " +
                  " ".join(f"{x:.3f}" for x in paired_ratios(runs, p, key)) +
                  "; ÷ floor " + " ".join(f"{x:.3f}" for x in floor_ratios(runs, p, clock)))
    spread = {p: max(values(runs, p, "peak_step_bytes")) - min(values(runs, p, "peak_step_bytes"))
              for p in POLICIES}
    if any(spread.values()):
        print("  note: step bytes differed between rounds: " + ", ".join(f"{p} {b:.0f} B" for p, b in spread.items()))
    floor_step = median([f / n for f, n in zip(floors(runs, "selective"), floors(runs, "none"))])
    if floor_step > STEP_GOAL:
        print(f"  note: on this shape selective's floor itself is {floor_step:.3f}x none's step (the core's forward "
              f"is {floor_step - 1:.3f} of a step): a step ratio <= {STEP_GOAL} is out of reach here")


def core_share(m):
    return m["heads"] * m["seq_len"] / (16 * m["width"] + m["heads"] * m["seq_len"])


def shape_results(runs):
    """The ratios of one shape's runs (medians over the rounds)."""
    def act(p):
        return median(values(runs, p, "peak_step_bytes")) / median(values(runs, "none", "peak_step_bytes"))
    out = {"activation_ratio": act("selective"), "full_activation_ratio": act("full")}
    for clock, suffix in (("wall", ""), ("cpu", "_cpu")):
        key = CLOCKS[clock][0]
        out["step_ratio" + suffix] = median(paired_ratios(runs, "selective", key))
        out["full_step_ratio" + suffix] = median(paired_ratios(runs, "full", key))
        for p in ("selective", "full"):
            out[f"{p}_floor_ratio{suffix}"] = median(floor_ratios(runs, p, clock))
            out[f"{p}_floor_step_ratio{suffix}"] = median(
                [f / n for f, n in zip(floors(runs, p, clock), floors(runs, "none", clock))])
    return out


def plot(shape, runs):
    m = SHAPES[shape]
    none_bytes = median(values(runs, "none", "peak_step_bytes"))
    none_step = median(values(runs, "none", "step_s"))
    suffix = "" if shape == "attention" else "-" + shape
    return {
        "file": f"recompute-memory-time{suffix}.png",
        "title": f"Activation memory and step time per recomputation policy ({shape} GPT)",
        "x": f"--recompute (GPT: {m['layers']} blocks, width {m['width']}, {m['heads']} heads, seq {m['seq_len']})",
        "y": "÷ none's median",
        "log_x": False, "log_y": False,
        "series": {"activation bytes (peak_step_bytes)":
                   [benchjson.point(p, values(runs, p, "peak_step_bytes"), 1 / none_bytes) for p in POLICIES],
                   "step time": [benchjson.point(p, values(runs, p, "step_s"), 1 / none_step) for p in POLICIES]}}


def main():
    for f in (CTRUN, WORKER):
        if not os.access(f, os.X_OK):
            sys.exit(f"recompute.py: {f} is not built (build it, or set CTRUN_BUILD_DIR / CTRUN)")
    unknown = [s for s in SHAPE_NAMES if s not in SHAPES]
    if unknown or not SHAPE_NAMES:
        sys.exit(f"recompute.py: SHAPES={','.join(SHAPE_NAMES)}: use a comma-separated list of {', '.join(SHAPES)}")
    print(f"steps={STEPS} (first not timed); {RANKS} rank(s) on {os.cpu_count()} CPUs; {REPS} rounds of "
          f"{len(SHAPE_NAMES) * 3} runs; shapes: " + "; ".join(
              f"{s} (layers={SHAPES[s]['layers']} width={SHAPES[s]['width']} heads={SHAPES[s]['heads']} "
              f"seq_len={SHAPES[s]['seq_len']} batch={SHAPES[s]['batch']})" for s in SHAPE_NAMES))
    print("load before: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    runs = []
    for rnd in range(REPS):
        shapes = SHAPE_NAMES[rnd % len(SHAPE_NAMES):] + SHAPE_NAMES[:rnd % len(SHAPE_NAMES)]
        for shape in shapes:
            for p in POLICIES[rnd % 3:] + POLICIES[:rnd % 3]:
                runs.append(launch(shape, p, rnd))
    print("load after:  " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    results = {}
    for shape in SHAPE_NAMES:
        mine = [r for r in runs if r["shape"] == shape]
        print_table(shape, mine)
        results[shape] = {k: round(v, 3) for k, v in shape_results(mine).items()}
    doc = {"config": {"shapes": {s: SHAPES[s] for s in SHAPE_NAMES}, "steps": STEPS, "reps": REPS, "ranks": RANKS},
           "runs": runs, "results": results,
           "plots": [plot(s, [r for r in runs if r["shape"] == s]) for s in SHAPE_NAMES]}
    print(f"\nmachine-readable results: {benchjson.write('recompute', doc, ROOT)}\n")
    for shape in SHAPE_NAMES:
        r = results[shape]
        for clock, x in (("wall", ""), ("cpu", "_cpu")):
            print(f"{shape} ({clock}): full: activation bytes ÷ none {r['full_activation_ratio']:.3f}, step ÷ none "
                  f"{r['full_step_ratio' + x]:.3f} (its floor {r['full_floor_step_ratio' + x]:.3f}, ÷ floor "
                  f"{r['full_floor_ratio' + x]:.3f}); selective: {r['activation_ratio']:.3f}, "
                  f"{r['step_ratio' + x]:.3f} (its floor {r['selective_floor_step_ratio' + x]:.3f}, ÷ floor "
                  f"{r['selective_floor_ratio' + x]:.3f})")
    if "parallel" in results:
        print(f"RESULT recompute_parallel_gpt_activation_ratio {results['parallel']['activation_ratio']:.3f}")
        print(f"RESULT recompute_parallel_gpt_step_ratio {results['parallel']['step_ratio']:.3f}")
    main_shape = results.get("attention", results[SHAPE_NAMES[0]])
    for key in ("step_ratio_cpu", "selective_floor_ratio_cpu", "full_floor_ratio_cpu", "activation_ratio",
                "step_ratio", "selective_floor_ratio", "full_floor_ratio"):
        print(f"RESULT recompute_{key} {main_shape[key]:.3f}")

if __name__ == "__main__":
    main()
