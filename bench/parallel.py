"""Data, tensor and pipeline parallelism on one model: ctrun-gpt under ctrun.

Runs the same GPT (byte vocabulary 128; LAYERS, WIDTH, HEADS, SEQ_LEN, global
batch BATCH, Adam, one intra-op thread per rank, Gloo, CPU) as:
  dp       8 ranks, --mesh dp=8 (each rank holds the whole model)
  tp       8 ranks, --mesh tp=8 (Megatron column/row splits of every block)
  pp8      8 ranks, --mesh pp=8, 1f1b and gpipe, M micro-batches
  pp2      2 ranks, --mesh pp=2, 1f1b and gpipe, M micro-batches: one rank per
           core on this 2-core machine, where wall-clock compute is honest.
  pp4      4 ranks, --mesh pp=4, interleaved (--pp-schedule interleaved
           --pp-virtual-stages V: each stage holds V chunks of LAYERS/(4V)
           blocks), 1f1b and gpipe, M micro-batches (a multiple of 4), PP_REPS
           rounds of the three, the first schedule rotating.
Each worker prints a STATS line at exit (trainer/apps/gpt_main.cc); this
script reads every rank's line and prints, per run and per pipeline stage:
  step_s       mean wall seconds per Pipeline::Step (first step excluded);
  compute_s    of it, seconds in forward+backward compute (not in receives);
  bubble       1 - compute_s / step_s of that stage (its idle share);
  in_flight    the most micro-batches whose activations the stage held;
  param_bytes  this rank's parameter bytes;
  step_bytes   peak_step_bytes: the most CPU tensor bytes alive during a
               step beyond those alive at its start (activations, gradient
               buffers in flight, send buffers), from trainer/parallel/memory_meter.h;
               the first step (which also allocates the gradients) excluded;
  tensor_bytes peak_tensor_bytes (everything alive, parameters, grads and
               Adam state included); rss_MiB  ru_maxrss.
The measured bubble of a pipeline run is the mean over stages of each stage's
bubble, beside the formula (p-1)/(m+p-1). `excess_ms` is the wait a stage had
beyond the formula's idle time, per receive (2m receives per step):
(step_s - compute_s / (1 - formula)) / (2m) -- p2p latency, stage imbalance,
or (8 ranks on 2 cores) CPU contention.

Ends with
  RESULT pp_1f1b_bubble_ratio <measured / formula>       (the pp2 run, see below)
  RESULT pp_1f1b_vs_gpipe_activation_ratio <sum over stages of 1F1B step_bytes /
                                             the same for GPipe, at pp8, m=M>
  RESULT tp_param_mem_ratio <max param_bytes of a TP rank / (DP rank's / 8)>
  RESULT interleaved_bubble_ratio <step_s / ((1 + (1/V)(p-1)/m) x slowest
                                   stage's compute_s), pp4 interleaved, median
                                   over its runs; the same for 1F1B with V=1
                                   printed beside it>
The bubble RESULT is the median over PP_REPS runs, from the 2-rank pipeline when the 8-rank one runs 8
processes on fewer cores: there, a stage that waits frees its core for
another, so wall-clock compute includes time spent descheduled and the idle
share says more about the scheduler than about the schedule (both are
printed; BUBBLE_FROM=pp8 picks the 8-rank one).

Env: CTRUN_BUILD_DIR (./build), CTRUN (launcher, default
$CTRUN_BUILD_DIR/launcher/ctrun), LAYERS (8), WIDTH (256), HEADS (8),
SEQ_LEN (64), BATCH (16), M (8), STEPS (4, the first not timed),
RUN_TIMEOUT (240 s per run), PP_REPS (3: runs of the bubble's 1F1B
source, median taken; rounds of pp4), PP2_SPLIT ("", layers per stage for pp=2),
PP8_SPLIT (""), V (2: virtual stages of pp4's interleaved runs), BUBBLE_FROM
(auto | pp2 | pp8), CONFIGS (all: comma list of dp,tp,pp8,pp2,pp4), RAW
(set: print every rank's STATS line).

Writes $CTRUN_BUILD_DIR/bench/parallel-<time>.json (bench/benchjson.py): every
run's STATS lines, the RESULTs, and the plot of the bubble per pipeline run,
1F1B and GPipe measured beside the formula (1F1B: median and min-max over its
runs); with pp4, a second plot: interleaved, 1F1B and GPipe at p=4, each one's
bubble measured beside its formula.
"""
import os
import re
import signal
import subprocess
import sys
import time

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.environ.get("CTRUN", os.path.join(BUILD, "launcher", "ctrun"))
WORKER = os.path.join(BUILD, "trainer", "apps", "ctrun-gpt")
LAYERS = int(os.environ.get("LAYERS", "8"))
WIDTH = int(os.environ.get("WIDTH", "256"))
HEADS = int(os.environ.get("HEADS", "8"))
SEQ_LEN = int(os.environ.get("SEQ_LEN", "64"))
BATCH = int(os.environ.get("BATCH", "16"))
M = int(os.environ.get("M", "8"))
STEPS = int(os.environ.get("STEPS", "4"))
RUN_TIMEOUT = float(os.environ.get("RUN_TIMEOUT", "240"))
PP2_SPLIT = os.environ.get("PP2_SPLIT", "")
PP8_SPLIT = os.environ.get("PP8_SPLIT", "")
BUBBLE_FROM = os.environ.get("BUBBLE_FROM", "auto")
PP_REPS = int(os.environ.get("PP_REPS", "3"))
V = int(os.environ.get("V", "2"))
CONFIGS = os.environ.get("CONFIGS", "dp,tp,pp8,pp2,pp4").split(",")

STATS_RE = re.compile(r"^STATS (.*)$", re.M)


class Run:
    def __init__(self, name, world, mesh, schedule="1f1b", micro=1, split=""):
        self.name, self.world, self.mesh = name, world, mesh
        self.schedule, self.micro, self.split = schedule, micro, split
        self.virtual = V if schedule == "interleaved" else 1  # model chunks per stage
        self.stats = []  # one dict per rank, sorted by rank
        self.seconds = 0.0

    def pp(self):
        return int(re.search(r"pp=(\d+)", self.mesh).group(1)) if "pp=" in self.mesh else 1


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


def launch(run):
    cmd = [CTRUN, "--standalone", "--nproc-per-node", str(run.world), "--no-python", WORKER,
           "--mesh", run.mesh, "--pp-schedule", run.schedule, "--micro-batches", str(run.micro),
           "--layers", str(LAYERS), "--width", str(WIDTH), "--heads", str(HEADS),
           "--seq-len", str(SEQ_LEN), "--global-batch", str(BATCH), "--steps", str(STEPS),
           "--log-every", "0", "--threads", "1", "--store-timeout", "60"]
    if run.split:
        cmd += ["--pp-split", run.split]
    if run.schedule == "interleaved":
        cmd += ["--pp-virtual-stages", str(run.virtual)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.monotonic()
    # Own session: on timeout the launcher and its workers go together.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        sys.exit(f"parallel.py: {run.name} ran past RUN_TIMEOUT={RUN_TIMEOUT:.0f} s; killed. Output tail:\n"
                 + out[-2000:])
    finally:
        if proc.poll() is None:
            kill_group(proc)
    run.seconds = time.monotonic() - start
    stats = []
    for m in STATS_RE.finditer(out):
        fields = dict(kv.split("=", 1) for kv in m.group(1).split())
        stats.append({k: float(v) for k, v in fields.items()})
    if proc.returncode != 0 or len(stats) != run.world:
        sys.exit(f"parallel.py: {run.name} exited {proc.returncode} with {len(stats)}/{run.world} STATS lines:\n"
                 + out[-3000:])
    run.stats = sorted(stats, key=lambda s: s["rank"])
    if os.environ.get("RAW"):
        for line in sorted(STATS_RE.findall(out), key=lambda l: int(l.split()[0].split("=")[1])):
            print(f"    {run.name} STATS {line}")
    print(f"  ran {run.name:<10} {run.mesh:<6} {run.schedule:<5} v={run.virtual} m={run.micro:<2} "
          f"in {run.seconds:5.1f} s", flush=True)


def formula(p, m, v=1):
    """The schedule's idle share of a step: (p-1)/(v*m+p-1); v=1 for 1F1B
    and GPipe, v chunks per stage for interleaved 1F1B."""
    return (p - 1) / (v * m + p - 1)


def run_formula(run):
    return formula(run.pp(), run.micro, run.virtual)


def stage_rows(run):
    """Per pipeline stage: the tp=0, dp=0 rank's stats."""
    return [s for s in run.stats if s["dp"] == 0 and s["tp"] == 0]


def measured_bubble(run):
    rows = stage_rows(run)
    return sum(1 - s["compute_s"] / s["step_s"] for s in rows) / len(rows)


def mib(b):
    return f"{b / 2**20:.2f}"


def print_table(runs):
    print()
    print(f"{'run':<18} {'mesh':<6} {'sched':<11} {'m':>2} {'stage':>5} {'step_s':>7} {'compute_s':>9} "
          f"{'bubble':>6} {'excess_ms':>9} {'in_flight':>9} {'param_MiB':>9} {'step_MiB':>8} "
          f"{'tensor_MiB':>10} {'rss_MiB':>7}")
    for run in runs:
        p = run.pp()
        f = run_formula(run) if p > 1 else 0.0
        for s in stage_rows(run) if p > 1 else run.stats[:1]:
            # dp/tp runs: rank 0 (all ranks hold the same amounts; max shown for tp below).
            excess = ((s["step_s"] - s["compute_s"] / (1 - f)) / (2 * run.micro * run.virtual) * 1e3
                      if p > 1 else float("nan"))
            print(f"{run.name:<18} {run.mesh:<6} {run.schedule if p > 1 else '-':<11} {run.micro:>2} "
                  f"{int(s['stage']) if p > 1 else '-':>5} {s['step_s']:7.3f} {s['compute_s']:9.3f} "
                  f"{1 - s['compute_s'] / s['step_s']:6.3f} "
                  f"{(f'{excess:9.2f}' if p > 1 else '-'):>9} {int(s['peak_in_flight']):>9} "
                  f"{mib(s['param_bytes']):>9} {mib(s['peak_step_bytes']):>8} "
                  f"{mib(s['peak_tensor_bytes']):>10} {s['peak_rss_kb'] / 1024:7.0f}")


def main():
    for f in (CTRUN, WORKER):
        if not os.access(f, os.X_OK):
            sys.exit(f"parallel.py: {f} is not built (build it, or set CTRUN_BUILD_DIR / CTRUN)")
    ncpu = os.cpu_count() or 1
    print(f"model: layers={LAYERS} width={WIDTH} heads={HEADS} seq_len={SEQ_LEN} vocab=128 "
          f"global_batch={BATCH} steps={STEPS} (first not timed); {ncpu} CPUs")
    print("load before: " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)

    runs = {}
    plan = make_plan()
    for run in plan:
        launch(run)
        runs[run.name] = run
    print("load after:  " + subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print_table(plan)

    results = {}
    print_bubbles(plan, runs, ncpu)
    bubble_result(plan, runs, ncpu, results)
    for tag in ("pp8", "pp2"):
        activation_memory(tag, runs, results)
    tp_params(runs, results)
    interleaved_result(plan, results)
    path = write_json(plan, results)
    print(f"\nmachine-readable results: {path}")
    print()
    for key in ("act", "bubble", "tp", "interleaved"):
        if key in results:
            print(results[key])


def make_plan():
    """The runs CONFIGS asks for, in the order they run."""
    plan = []
    # pp2 first: the bubble RESULT's source on a small machine.
    if "pp2" in CONFIGS:
        plan += [Run("pp2-1f1b", 2, "pp=2", "1f1b", M, PP2_SPLIT), Run("pp2-gpipe", 2, "pp=2", "gpipe", M, PP2_SPLIT)]
    if "dp" in CONFIGS:
        plan.append(Run("dp", 8, "dp=8"))
    if "tp" in CONFIGS:
        plan.append(Run("tp", 8, "tp=8"))
    if "pp8" in CONFIGS:
        plan += [Run("pp8-1f1b", 8, "pp=8", "1f1b", M, PP8_SPLIT), Run("pp8-gpipe", 8, "pp=8", "gpipe", M, PP8_SPLIT)]
    if "pp4" in CONFIGS:
        # Interleaved against plain 1F1B and GPipe at the same p and m, in
        # rounds with the first schedule rotating (load drifts touch all three).
        schedules = ["interleaved", "1f1b", "gpipe"]
        for i in range(max(PP_REPS, 1)):
            for sched in schedules[i % 3:] + schedules[:i % 3]:
                plan.append(Run(f"pp4-{sched}" + (f"-r{i + 1}" if i else ""), 4, "pp=4", sched, M))
    # Wall-clock bubbles on a shared machine swing from run to run: repeat the
    # bubble's 1F1B source run, spread over the bench, and take the median.
    for i in range(2, PP_REPS + 1):
        if BUBBLE_FROM in ("auto", "pp2") and "pp2" in CONFIGS:
            plan.append(Run(f"pp2-1f1b-r{i}", 2, "pp=2", "1f1b", M, PP2_SPLIT))
        if BUBBLE_FROM == "pp8" and "pp8" in CONFIGS:
            plan.append(Run(f"pp8-1f1b-r{i}", 8, "pp=8", "1f1b", M, PP8_SPLIT))
    return plan


def print_bubbles(plan, runs, ncpu):
    """Every pipeline run's measured bubble beside the formula."""
    print("\nbubble: measured = mean over stages of (1 - compute_s / step_s); formula = (p-1)/(v*m+p-1), "
          "v = 1 but for interleaved")
    for name in [r.name for r in plan if r.pp() > 1]:
        if name in runs:
            r = runs[name]
            p = r.pp()
            meas, form = measured_bubble(r), run_formula(r)
            comp = [s["compute_s"] for s in stage_rows(r)]
            step = max(s["step_s"] for s in stage_rows(r))
            # With unequal stages the slowest one sets the pace: the schedule
            # alone predicts step = max compute * (m+p-1)/m; the rest is p2p
            # latency and time descheduled outside compute.
            predicted = max(comp) * (1 + (p - 1) / (r.virtual * r.micro))
            print(f"  {name:<10} p={p} v={r.virtual} m={r.micro} ranks={r.world} on {ncpu} CPUs: measured "
                  f"{meas:.3f}  formula {form:.3f}  ratio {meas / form:.3f}  stage compute_s max/min "
                  f"{max(comp) / min(comp):.3f}  step_s / (max compute_s * (1+(p-1)/(v*m))) {step / predicted:.3f}")


def bubble_result(plan, runs, ncpu, results):
    """The bubble RESULT (results["bubble"]): the median ratio over the
    source's 1F1B runs, pp2 or pp8 (BUBBLE_FROM)."""
    src = BUBBLE_FROM
    if src == "auto":
        src = "pp2" if (ncpu < 8 and "pp2-1f1b" in runs) or "pp8-1f1b" not in runs else "pp8"
    reps = [r for r in plan if r.name.startswith(f"{src}-1f1b")]
    if reps:
        r = reps[0]
        ratios = sorted(measured_bubble(x) / run_formula(x) for x in reps)
        ratio = ratios[len(ratios) // 2] if len(ratios) % 2 else sum(ratios[len(ratios) // 2 - 1:][:2]) / 2
        why = (f"median of {len(reps)} {src}-1f1b runs ({' '.join(f'{x:.3f}' for x in ratios)}), "
               f"{r.world} ranks on {ncpu} CPUs"
               + (" (8 ranks on fewer cores than ranks would time the scheduler, not the schedule)"
                  if src == "pp2" and ncpu < 8 else ""))
        print(f"  RESULT bubble source: {why}")
        results["bubble"] = f"RESULT pp_1f1b_bubble_ratio {ratio:.3f}"


def activation_memory(tag, runs, results):
    """Step bytes per stage, 1F1B against GPipe, for pp8 or pp2; sets
    results["act"] from pp8, or from pp2 when there is no pp8."""
    a, g = runs.get(f"{tag}-1f1b"), runs.get(f"{tag}-gpipe")
    if not (a and g):
        return
    p = a.pp()
    print(f"\nactivation memory, {tag} (p={p}, m={a.micro}): step_bytes per stage, 1F1B vs GPipe")
    print(f"  {'stage':>5} {'1f1b_MiB':>8} {'gpipe_MiB':>9} {'ratio':>6} {'expect':>6} "
          f"{'in_flight 1f1b/gpipe':>20}")
    sa = sg = 0.0
    for s1, s2 in zip(stage_rows(a), stage_rows(g)):
        st = int(s1["stage"])
        expect = min(p - st, a.micro) / a.micro
        sa += s1["peak_step_bytes"]
        sg += s2["peak_step_bytes"]
        print(f"  {st:>5} {mib(s1['peak_step_bytes']):>8} {mib(s2['peak_step_bytes']):>9} "
              f"{s1['peak_step_bytes'] / s2['peak_step_bytes']:6.3f} {expect:6.3f} "
              f"{int(s1['peak_in_flight']):>10}/{int(s2['peak_in_flight'])}")
    expect_all = sum(min(p - s, a.micro) for s in range(p)) / (p * a.micro)
    print(f"  all stages: {sa / sg:.3f} (in-flight count alone predicts {expect_all:.3f})")
    if tag == "pp8" or "pp8-1f1b" not in runs:
        results["act"] = f"RESULT pp_1f1b_vs_gpipe_activation_ratio {sa / sg:.3f}"


def tp_params(runs, results):
    """The most parameter bytes of a TP rank against a DP rank's over the TP
    world size (results["tp"])."""
    if "dp" in runs and "tp" in runs:
        full = runs["dp"].stats[0]["param_bytes"]
        tp_max = max(s["param_bytes"] for s in runs["tp"].stats)
        tp_n = runs["tp"].world
        print(f"\nparameters: DP rank {full:.0f} B (the whole model); TP rank max {tp_max:.0f} B; "
              f"full/{tp_n} = {full / tp_n:.0f} B (the excess is what TP replicates: layer norms, "
              f"row-parallel biases, position embedding)")
        results["tp"] = f"RESULT tp_param_mem_ratio {tp_max / (full / tp_n):.3f}"


def slowest_stage_ratio(run):
    """step_s ÷ ((1 + (p-1)/(v*m)) × the slowest stage's compute_s): the
    step against what the schedule alone predicts from its slowest stage."""
    rows = stage_rows(run)
    step = max(s["step_s"] for s in rows)
    return step / ((1 + (run.pp() - 1) / (run.virtual * run.micro)) * max(s["compute_s"] for s in rows))


def interleaved_result(plan, results):
    """pp4: interleaved 1F1B's step against (1 + (1/v)(p-1)/m) × slowest-stage
    compute (results["interleaved"], the median over its runs), with plain
    1F1B's and GPipe's (v = 1) and the step times beside it."""
    by = {s: [r for r in plan if r.name.startswith(f"pp4-{s}")] for s in ("interleaved", "1f1b", "gpipe")}
    if not by["interleaved"]:
        return
    r0 = by["interleaved"][0]
    p, m, v = r0.pp(), r0.micro, r0.virtual
    print(f"\ninterleaved 1F1B at p={p}, v={v}, m={m} ({r0.world} ranks on {os.cpu_count()} CPUs), "
          f"median (min-max) over {len(by['interleaved'])} runs each:")
    print(f"  {'schedule':<11} {'formula':>7} {'measured bubble':>22} {'step ÷ slowest-stage prediction':>34} "
          f"{'step_s':>22}")
    med = {}
    for sched, rs in by.items():
        if not rs:
            continue
        ratios = [slowest_stage_ratio(r) for r in rs]
        med[sched] = benchjson.spread(ratios)["median"]
        steps = [max(s["step_s"] for s in stage_rows(r)) for r in rs]
        med[sched + "_step"] = benchjson.spread(steps)["median"]
        print(f"  {sched:<11} {run_formula(rs[0]):7.3f} {benchjson.fmt([measured_bubble(r) for r in rs], digits=3):>22} "
              f"{benchjson.fmt(ratios, digits=3):>34} {benchjson.fmt(steps, digits=3):>22}")
    if "1f1b" in med:
        print(f"  interleaved ÷ 1F1B: step time {med['interleaved_step'] / med['1f1b_step']:.3f} "
              f"(the formulas predict {(1 + (p - 1) / (v * m)) / (1 + (p - 1) / m):.3f} at equal compute); "
              f"plain 1F1B's step ÷ its own prediction {med['1f1b']:.3f}")
    results["interleaved"] = f"RESULT interleaved_bubble_ratio {med['interleaved']:.3f}"


def write_json(plan, results):
    """The run's JSON: every run's STATS, the RESULT values, the bubble plot."""
    series = {"1F1B (measured)": [], "GPipe (measured)": [], "formula (p-1)/(m+p-1)": []}
    for tag in ("pp2", "pp8"):  # pp4 has a chart of its own (interleaved_plot)
        a = [r for r in plan if r.name.startswith(f"{tag}-1f1b")]
        g = [r for r in plan if r.name.startswith(f"{tag}-gpipe")]
        if not a:
            continue
        p, m = a[0].pp(), a[0].micro
        x = f"{tag} (p={p}, m={m}, {a[0].world} ranks)"
        series["1F1B (measured)"].append(benchjson.point(x, [measured_bubble(r) for r in a]))
        if g:
            series["GPipe (measured)"].append(benchjson.point(x, [measured_bubble(r) for r in g]))
        series["formula (p-1)/(m+p-1)"].append(benchjson.point(x, [formula(p, m)]))
    doc = {
        "config": {"layers": LAYERS, "width": WIDTH, "heads": HEADS, "seq_len": SEQ_LEN, "batch": BATCH,
                   "micro_batches": M, "steps": STEPS, "pp_reps": PP_REPS, "virtual_stages": V},
        "runs": [{"name": r.name, "world": r.world, "mesh": r.mesh, "schedule": r.schedule, "micro": r.micro,
                  "virtual": r.virtual, "seconds": r.seconds, "stats": r.stats} for r in plan],
        "results": {line.split()[1]: float(line.split()[2]) for line in results.values()},
        "plots": ([] if not series["1F1B (measured)"] else [{
            "file": "pipeline-bubble.png",
            "title": "Pipeline bubble (idle share of a step): 1F1B vs GPipe",
            "x": "pipeline run", "y": "bubble (mean over stages of 1 - compute/step)",
            "log_x": False, "log_y": False, "series": {k: v for k, v in series.items() if v}}])
        + interleaved_plot(plan),
    }
    return benchjson.write("parallel", doc, ROOT)


def interleaved_plot(plan):
    """The pp4 chart: per schedule, the measured bubble (median, min-max over
    its runs) beside its formula."""
    measured, predicted = [], []
    for sched, label in (("interleaved", f"interleaved (v={V})"), ("1f1b", "1F1B"), ("gpipe", "GPipe")):
        rs = [r for r in plan if r.name.startswith(f"pp4-{sched}")]
        if rs:
            measured.append(benchjson.point(label, [measured_bubble(r) for r in rs]))
            predicted.append(benchjson.point(label, [run_formula(rs[0])]))
    if not measured:
        return []
    return [{"file": "pipeline-bubble-interleaved.png",
             "title": f"Pipeline bubble at p=4, m={M}: interleaved 1F1B vs 1F1B vs GPipe",
             "x": "schedule (4 ranks on the machine's cores)", "y": "bubble (mean over stages of 1 - compute/step)",
             "log_x": False, "log_y": False,
             "series": {"measured": measured, "formula (p-1)/(v·m+p-1)": predicted}}]


if __name__ == "__main__":
    main()
