"""Launch overhead: ctrun against the floor (bench/launch_floor.c: fork, exec
and reap N /bin/true) and against torchrun (torch 1.13, patched in-process by
bench/torchrun_compat.py), interleaved in one run. See bench/launch.sh."""
import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchjson import spread, write  # bench/benchjson.py: shared by every bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
ALLREDUCE = os.path.join(ROOT, "tests", "integration", "workers", "allreduce.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The caller's own TMPDIR (None: unset, i.e. /tmp), kept before main points
# TMPDIR at the bench's tmpfs directory: the default configuration runs with it.
USER_TMPDIR = os.environ.get("TMPDIR")


def env(default=False):
    """The launchers' environment; default=True gives them the caller's own
    TMPDIR instead of the bench's."""
    e = dict(os.environ)
    e["PYTHON_EXEC"] = PY
    e["OMP_NUM_THREADS"] = "1"  # same for every launcher; silences both banners
    if default:
        e.pop("TMPDIR", None)
        if USER_TMPDIR is not None:
            e["TMPDIR"] = USER_TMPDIR
    return e


def build_helpers(out_dir):
    paths = {}
    for name in ("launch_floor", "launch_timer"):
        exe = os.path.join(out_dir, name)
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, name + ".c")], check=True)
        paths[name] = exe
    return paths


# Set by main: ["chrt", "-f", "10"] when the runs use real-time priority.
PRIORITY = []


def realtime_available():
    return subprocess.run(["chrt", "-f", "10", "true"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def timed_once(timer, cmd, default=False):
    """One run of `cmd`, timed by launch_timer (spawn to reap, in C). default:
    as a user runs it, at normal priority with the caller's own TMPDIR."""
    r = subprocess.run(([] if default else PRIORITY) + [timer] + cmd, env=env(default),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fields = r.stdout.split()
    if r.returncode != 0 or len(fields) != 2 or fields[1] != b"0":
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout.decode()}{r.stderr.decode()[-2000:]}")
    return float(fields[0])


def wall_once(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode()[-2000:]}")
    return elapsed


def ctrun_cmd(ctrun, n, argv):
    return [ctrun, "--standalone", "--nproc-per-node", str(n)] + argv


def torchrun_cmd(n, argv):
    # torch 1.13: underscored flags only; --standalone would share fixed port 29400.
    return [PY, os.path.join(HERE, "torchrun_compat.py"), "--nnodes", "1",
            "--nproc_per_node", str(n), "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", "bench",
            "--monitor_interval", "0.1"] + argv


def by_hand_once(n, script):
    port = free_port()
    t0 = time.perf_counter()
    procs = []
    for rank in range(n):
        e = env()
        e.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n),
                 LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([PY, "-u", script], env=e, stdout=subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - t0
    if any(codes):
        sys.exit(f"by-hand launch failed: {codes}")
    return elapsed


def interleave(cases, reps, rng):
    """cases: {name: (fn, reps_for_it)}. Every round runs each case still
    short of its reps once, in a shuffled order, so drift hits all alike."""
    times = {name: [] for name in cases}
    for i in range(reps):
        names = [name for name, (_, want) in cases.items() if i < want]
        rng.shuffle(names)
        for name in names:
            times[name].append(cases[name][0]())
    return times


def fmt(ts, scale=1e3, unit="ms"):
    s = spread(ts)
    return f"{s['median'] * scale:.2f} {unit} ({s['min'] * scale:.2f}–{s['max'] * scale:.2f})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=30, help="runs per floor / ctrun cell")
    p.add_argument("--torchrun-reps", type=int, default=5, help="runs per torchrun cell")
    p.add_argument("--sizes", default="1,8,64", help="process counts N (comma list)")
    p.add_argument("--allreduce-reps", type=int, default=5,
                   help="runs per all-reduce cell (0 skips the all-reduce comparison)")
    p.add_argument("--priority", choices=("auto", "realtime", "normal"), default="auto",
                   help="realtime runs every timed command (floor, ctrun and torchrun alike) "
                   "under chrt -f 10, so that other load on a shared machine does not add its "
                   "scheduling delays to each wake-up; auto: realtime when allowed")
    p.add_argument("--tmpdir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                   help="TMPDIR for every launcher (a fresh directory is made under it): both "
                   "make their 2 + N log directories there, and ctrun removes its own on success, "
                   "one rmdir each. Default /dev/shm (tmpfs), so that the figure is the "
                   "launchers' and not the disk's: where /tmp is ext4 mounted with `discard` "
                   "each rmdir waits ~6 ms for the device")
    p.add_argument("--default-reps", type=int, default=None,
                   help="runs of the default configuration at N=8, interleaved with the rest: "
                   "the floor and ctrun again, at normal priority and with the caller's own "
                   "TMPDIR (unset: /tmp), as a user launches; default: --reps; 0 skips it")
    p.add_argument("--json", help="where to write the machine-readable results "
                   "(default $CTRUN_BUILD_DIR/bench/launch-<time>.json)")
    args = p.parse_args()
    if args.default_reps is None:
        args.default_reps = args.reps
    sizes = [int(s) for s in args.sizes.split(",")]
    if 8 not in sizes:
        sys.exit("--sizes must include 8: the RESULT lines are taken at N=8")
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrun = os.path.join(build, "launcher", "ctrun")
    if not os.access(ctrun, os.X_OK):
        sys.exit(f"{ctrun} not found: build first (scripts/build.sh) or set CTRUN_BUILD_DIR")
    rng = random.Random(20)
    realtime = args.priority == "realtime" or (args.priority == "auto" and realtime_available())
    if realtime:
        PRIORITY[:] = ["chrt", "-f", "10"]

    tmpdir = tempfile.mkdtemp(prefix="ctrun-launch-tmpdir-", dir=args.tmpdir)
    os.environ["TMPDIR"] = tmpdir  # env() copies it to every launcher
    try:
        measure(args, ctrun, sizes, rng, realtime)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)  # torchrun leaves its log directories


def measure(args, ctrun, sizes, rng, realtime):
    build = os.path.dirname(os.path.dirname(ctrun))
    per_n = time_true(args, ctrun, sizes, rng)
    allreduce = time_allreduce(args, ctrun, rng)
    default = per_n[8].get("ctrun_default")
    print_true_table(args, per_n, default, realtime)
    print_allreduce_table(args, allreduce)
    results = launch_results(per_n, allreduce, default)
    doc = launch_doc(args, ctrun, sizes, realtime, per_n, allreduce, default, results)
    out = write("launch", doc, ROOT, path=args.json, build=build)
    print()
    print(f"machine-readable results: {out}")
    for name, value in results.items():
        print(f"RESULT {name} {value:.{1 if name == 'launch_ratio' else 2}f}")


def time_true(args, ctrun, sizes, rng):
    """Per N: the floor, ctrun and torchrun launching N /bin/true (and at N=8
    the default configuration), interleaved. Returns {N: {case: [seconds]}}."""
    with tempfile.TemporaryDirectory(prefix="ctrun-launch-bench-") as tmp:
        helpers = build_helpers(tmp)
        timer, floor = helpers["launch_timer"], helpers["launch_floor"]
        true = ["--no-python", "/bin/true"]
        per_n = {}
        for n in sizes:
            cases = {
                "floor": (lambda n=n: timed_once(timer, [floor, str(n)]), args.reps),
                "ctrun": (lambda n=n: timed_once(timer, ctrun_cmd(ctrun, n, true)), args.reps),
                "torchrun": (lambda n=n: timed_once(timer, torchrun_cmd(n, ["--no_python", "/bin/true"])),
                             args.torchrun_reps),
            }
            if n == 8 and args.default_reps > 0:
                # The same floor and ctrun, as a user runs them, in the same rounds.
                cases["floor_default"] = (lambda n=n: timed_once(timer, [floor, str(n)], default=True),
                                          args.default_reps)
                cases["ctrun_default"] = (lambda n=n: timed_once(timer, ctrun_cmd(ctrun, n, true), default=True),
                                          args.default_reps)
            for fn, want in cases.values():  # warm-up, not counted
                if want > 0:
                    fn()
            per_n[n] = interleave(cases, max(want for _, want in cases.values()), rng)
    return per_n


def time_allreduce(args, ctrun, rng):
    """The all-reduce script at 2 and 4 processes under ctrun, torchrun and by
    hand, interleaved; {} when --allreduce-reps is 0."""
    allreduce = {}
    for n in (2, 4) if args.allreduce_reps > 0 else ():
        cases = {
            "ctrun": (lambda n=n: wall_once(ctrun_cmd(ctrun, n, [ALLREDUCE])), args.allreduce_reps),
            "torchrun": (lambda n=n: wall_once(torchrun_cmd(n, [ALLREDUCE])), args.allreduce_reps),
            "by_hand": (lambda n=n: by_hand_once(n, ALLREDUCE), args.allreduce_reps),
        }
        allreduce[n] = interleave(cases, args.allreduce_reps, rng)
    return allreduce


def print_true_table(args, per_n, default, realtime):
    med = statistics.median
    print(f"/bin/true, {args.reps} runs (floor, ctrun) and {args.torchrun_reps} (torchrun) per N,"
          f" interleaved, {'real-time' if realtime else 'normal'} priority, TMPDIR under"
          f" {args.tmpdir or tempfile.gettempdir()}; median (min–max)")
    print(f"{'N':>3}  {'floor':>24}  {'ctrun':>24}  {'torchrun':>30}  {'ctrun/floor':>11}  "
          f"{'torchrun/ctrun':>14}")
    for n, t in per_n.items():
        torchrun = t["torchrun"]
        ratio = f"{med(torchrun) / med(t['ctrun']):14.1f}" if torchrun else f"{'-':>14}"
        print(f"{n:>3}  {fmt(t['floor']):>24}  {fmt(t['ctrun']):>24}  "
              f"{fmt(torchrun) if torchrun else '-':>30}  {med(t['ctrun']) / med(t['floor']):11.2f}  {ratio}")
    if default:
        t = per_n[8]
        print(f"{'8':>3}  {fmt(t['floor_default']):>24}  {fmt(default):>24}  {'-':>30}  "
              f"{med(default) / med(t['floor_default']):11.2f}  {'-':>14}   <- default: normal "
              f"priority, TMPDIR {USER_TMPDIR or 'unset (/tmp)'}, {args.default_reps} runs each")


def print_allreduce_table(args, allreduce):
    if not allreduce:
        return
    med = statistics.median
    print()
    print(f"all-reduce script, {args.allreduce_reps} runs each, interleaved; median (min–max)")
    print(f"{'N':>3}  {'ctrun':>26}  {'torchrun':>26}  {'by hand':>26}  {'ctrun/hand':>10}")
    for n, t in allreduce.items():
        print(f"{n:>3}  {fmt(t['ctrun'], 1, 's'):>26}  {fmt(t['torchrun'], 1, 's'):>26}  "
              f"{fmt(t['by_hand'], 1, 's'):>26}  {med(t['ctrun']) / med(t['by_hand']):10.3f}")


def launch_results(per_n, allreduce, default):
    """The RESULT values, in the order they are printed."""
    med = statistics.median
    results = {"launch_floor_ratio": med(per_n[8]["ctrun"]) / med(per_n[8]["floor"])}
    if per_n[8]["torchrun"]:
        results["launch_ratio"] = med(per_n[8]["torchrun"]) / med(per_n[8]["ctrun"])
    if default:
        results["launch_floor_ratio_default"] = med(default) / med(per_n[8]["floor_default"])
    for n, t in allreduce.items():
        results[f"allreduce_{n}_ctrun_vs_hand"] = med(t["ctrun"]) / med(t["by_hand"])
    return results


def launch_doc(args, ctrun, sizes, realtime, per_n, allreduce, default, results):
    """The run's JSON document (bench/benchjson.py writes it)."""
    return {
        "ctrun": os.path.abspath(ctrun),
        "unit": "seconds",
        "priority": "realtime (chrt -f 10)" if realtime else "normal",
        "tmpdir": args.tmpdir or tempfile.gettempdir(),
        # The default configuration's runs are under "true" too, as
        # floor_default and ctrun_default at N=8.
        "default_configuration": {"priority": "normal", "tmpdir": USER_TMPDIR or "/tmp",
                                  "reps": args.default_reps} if default else None,
        "true": {str(n): {k: {"times": v, **spread(v)} for k, v in t.items() if v}
                 for n, t in per_n.items()},
        "allreduce": {str(n): {k: {"times": v, **spread(v)} for k, v in t.items()}
                      for n, t in allreduce.items()},
        "results": results,
        # Drawn by bench/plot.py: launch time against N, one line per launcher.
        "plots": [{
            "file": "launch-vs-n.png",
            "title": "Launch of N /bin/true: spawn to reap (median, min-max)",
            "x": "N (processes)", "y": "seconds", "log_x": True, "log_y": True,
            "series": {name: [{"x": n, **{k: v for k, v in spread(t[name]).items() if k != "n"}}
                              for n, t in per_n.items()]
                       for name in ("ctrun", "torchrun", "floor") if per_n[sizes[0]][name]},
        }],
    }


if __name__ == "__main__":
    main()
