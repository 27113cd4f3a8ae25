"""The per-step quorum at scale: N simulated replica groups
(bench/load/ft_quorum_load.cc) stepping through one ctrund's quorum (FtWatch,
FtSync with the compact answer, FtLeave), with 1 %/min of the groups lost and
back (at least 3 losses a run). Per N: the time from the last group's call to
every group's answer per step (p50, p99), ctrund's CPU per step, its RSS.
Side by side, interleaved with ctrund's runs at each N: the physical floor
(bench/load/ft_floor_load.cc: one TCP exchange per group per step, of the
compact messages' sizes, against a one-thread epoll server that answers once
every group is in), the same figures, and the ratio ctrund/floor.

    bench/ft_quorum.sh [--sizes 256,1024,4096,16384] [--reps 2] [--steps 20]
                       [--step-s 1] [--big 24576] [--big-steps 8]
                       [--reference CTRUND] [--compare CTRUND] [--json PATH]

--compare CTRUND: another ctrund (an earlier build's), run interleaved with
this build's at every N but --big with the same compact answers; its rows
and the ratio this/compared follow the floor's.

Each run starts a fresh ctrund (--log-level warn). Runs are interleaved over
N (rep 1 of every N, then rep 2, ...). p50/p99 are of every measured step of
an N's runs together; the spread is over its runs (median, min–max of the
runs' own p99). --big N runs that N once after the others, --big-steps
steps (0 skips it): 131072 groups need more memory than a run here may take,
so the default is 24576 and the 131k figure is modelled (p99 ~ N^k, k fitted
on the two largest N), the model printed. Ends with RESULT lines; writes a JSON file (with "plots") under
$CTRUN_BUILD_DIR/bench/.
"""
import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchjson import write  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TCPSTORE_16K_BARRIER_S = 0.5  # NVIDIA's TCPStore barrier at 16k ranks (the anchor)


def percentile(values, q):
    """The q-th percentile (0..100) of a non-empty list, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def start_ctrund(ctrund):
    """A ctrund on 127.0.0.1, port 0; returns (process, endpoint)."""
    daemon = subprocess.Popen([ctrund, "--listen", "127.0.0.1:0", "--log-level", "warn"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = daemon.stdout.readline()  # "ctrund: serving rendezvous on 127.0.0.1:PORT"
    if "serving rendezvous on " not in line:
        daemon.kill()
        daemon.wait()
        sys.exit(f"ctrund did not start: {line.strip()!r}")
    return daemon, line.split("serving rendezvous on ")[1].split()[0]


def run_generator(cmd, n, args):
    """Runs one generator command (its last stdout line is its JSON) and
    returns that JSON; exits with one line naming it when it failed."""
    name = os.path.basename(cmd[0])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=args.timeout * 3 + args.steps * args.step_s + 120)
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        sys.exit(f"{name} --groups {n} printed no result (exit {p.returncode}): {p.stderr.strip()}")
    if not r.get("ok"):
        sys.exit(f"{name} --groups {n} failed: {r.get('error') or p.stderr.strip()}")
    return r


def run_once(ctrund, load, n, args, sources=4):
    """One generator run of n groups against a fresh ctrund: its JSON
    (sources 0: every answer the whole quorum)."""
    daemon, endpoint = start_ctrund(ctrund)
    try:
        return run_generator([load, "--endpoint", endpoint, "--groups", str(n), "--steps", str(args.steps),
                              "--step-s", str(args.step_s), "--channels", str(args.channels), "--server-pid",
                              str(daemon.pid), "--timeout-s", str(args.timeout), "--sources", str(sources)], n, args)
    finally:
        daemon.terminate()
        daemon.wait()


def run_floor(floor, n, args):
    """One floor run of n groups (its own server, a child process): its JSON,
    in ft_quorum_load's shape."""
    return run_generator([floor, "--groups", str(n), "--steps", str(args.steps), "--step-s", str(args.step_s),
                          "--timeout-s", str(args.timeout)], n, args)


def floor_fits(n):
    """Whether a floor run of n groups fits the descriptor limit (n
    connections in each of its two processes)."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= n + 64


def summary(runs):
    """The figures of one N's runs."""
    lat = [x for r in runs for x in r["latency_s"]]
    cpu = [x for r in runs for x in r["server_cpu_s"]]
    return {"p50_s": percentile(lat, 50), "p99_s": percentile(lat, 99),
            "run_p99_s": [percentile(r["latency_s"], 99) for r in runs],
            "cpu_s_per_step": statistics.mean(cpu),
            "run_cpu_s_per_step": [statistics.mean(r["server_cpu_s"]) for r in runs],
            "rss_mib": max(max(r["server_rss_kib"]) for r in runs) / 1024,
            "steps": len(lat), "losses": sum(r["losses"] for r in runs), "runs": len(runs)}


def spread(values, digits=3):
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"
            if len(values) > 1 else f"{values[0]:.{digits}f}")


def plots(figures, reference=None, floor=None, compare=None):
    """bench/plot.py's chart: p99 and p50 against N, log-log, with the anchors
    (and the reference's p50 where it ran, the compared build's p99)."""
    ns = sorted(figures)
    series = {
        "ctrund quorum p99 (last call to every answer)":
            [{"x": n, "median": figures[n]["p99_s"], "min": min(figures[n]["run_p99_s"]),
              "max": max(figures[n]["run_p99_s"])} for n in ns],
        "ctrund quorum p50": [{"x": n, "median": figures[n]["p50_s"], "min": figures[n]["p50_s"],
                               "max": figures[n]["p50_s"]} for n in ns],
        "NVIDIA TCPStore barrier, 16k ranks (published)":
            [{"x": 16384, "median": TCPSTORE_16K_BARRIER_S, "min": TCPSTORE_16K_BARRIER_S,
              "max": TCPSTORE_16K_BARRIER_S}],
    }
    if floor:
        series["floor p99: one TCP exchange per group, epoll, 1 thread"] = [
            {"x": n, "median": f["p99_s"], "min": min(f["run_p99_s"]), "max": max(f["run_p99_s"])}
            for n, f in sorted(floor.items())]
    if compare:
        series["compared ctrund p99 (--compare)"] = [
            {"x": n, "median": f["p99_s"], "min": min(f["run_p99_s"]), "max": max(f["run_p99_s"])}
            for n, f in sorted(compare.items())]
    if reference:
        series["base commit's ctrund p50, whole-quorum answers"] = [
            {"x": n, "median": f["p50_s"], "min": f["p50_s"], "max": f["p50_s"]} for n, f in sorted(reference.items())]
    return [{"file": "ft-quorum-vs-n.png",
             "title": "Per-step quorum, one ctrund (torchft Lighthouse: no figure at scale)",
             "x": "replica groups N", "y": "seconds, last call to every answer", "log_x": True, "log_y": True,
             "series": series}]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,1024,4096,16384")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-s", type=float, default=1.0)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--big", type=int, default=24576, help="one run at this N after the others (0: none); "
                    "131072 needs ~8 GiB here, more than a run may take")
    ap.add_argument("--big-steps", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--reference", help="a ctrund without the compact answer and the incremental quorum "
                    "(the base commit's): run side by side at the sizes <= 1024 (its group limit), with "
                    "whole-quorum answers, as this build is with them too")
    ap.add_argument("--compare", help="another ctrund (an earlier build's) run interleaved with this one at every "
                    "N but --big, with the same compact answers: its rows, then this/that")
    ap.add_argument("--json")
    args = ap.parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrund, load = os.path.join(build, "rendezvous", "ctrund"), os.path.join(build, "bench", "ft_quorum_load")
    floor = os.path.join(build, "bench", "ft_floor_load")
    for path in (ctrund, load, floor):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is missing: build it (ninja -C {build} ctrund ft_quorum_load ft_floor_load)")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    runs = {n: [] for n in sizes}
    floors = {n: [] for n in sizes if floor_fits(n)}
    small = [n for n in sizes if n <= 1024] if args.reference else []
    whole = {n: [] for n in small}       # this build, whole-quorum answers
    reference = {n: [] for n in small}   # the reference ctrund, whole-quorum answers
    compare = {n: [] for n in sizes} if args.compare else {}  # the compared ctrund, compact answers
    for _ in range(args.reps):  # interleaved over N and servers
        for n in sizes:
            runs[n].append(run_once(ctrund, load, n, args))
            if n in floors:
                floors[n].append(run_floor(floor, n, args))
            if n in compare:
                compare[n].append(run_once(args.compare, load, n, args))
            if n in reference:
                whole[n].append(run_once(ctrund, load, n, args, sources=0))
                reference[n].append(run_once(args.reference, load, n, args, sources=0))
    if args.big:
        big_args = argparse.Namespace(**{**vars(args), "steps": args.big_steps})
        runs[args.big] = [run_once(ctrund, load, args.big, big_args)]
    figures = {n: summary(rs) for n, rs in runs.items()}
    floor_figures = {n: summary(rs) for n, rs in floors.items()}
    report(figures, args)
    report_floor(figures, floor_figures, args)
    compare_figures = {n: summary(rs) for n, rs in compare.items()}
    report_compare(figures, compare_figures, args)
    if small:
        print("side by side, every answer the whole quorum (the reference takes at most 1024 groups a run):")
        report({n: summary(whole[n]) for n in small}, args, "this build")
        report({n: summary(reference[n]) for n in small}, args, "reference")
    doc = {"sizes": sorted(figures), "steps": args.steps, "step_s": args.step_s, "channels": args.channels,
           "figures": {str(n): f for n, f in figures.items()},
           "runs": {str(n): rs for n, rs in runs.items()},
           "floor": {str(n): f for n, f in floor_figures.items()},
           "floor_runs": {str(n): rs for n, rs in floors.items()},
           "compare": {str(n): f for n, f in compare_figures.items()},
           "compare_runs": {str(n): rs for n, rs in compare.items()}, "compare_path": args.compare,
           "plots": plots(figures, {n: summary(reference[n]) for n in small}, floor_figures, compare_figures),
           "whole_quorum": {"this_build": {str(n): summary(whole[n]) for n in small},
                            "reference": {str(n): summary(reference[n]) for n in small},
                            "reference_path": args.reference}}
    print(write("ft_quorum", doc, ROOT, path=args.json, build=build))
    results(figures, args, sizes, floor_figures)


def report(figures, args, label=None):
    if label is None:
        print(f"ft_quorum_load: N groups against one ctrund, {args.channels} connections, {args.steps} steps a "
              f"run every {args.step_s:g} s, 1 %/min lost and back (>= 3 a run), compact answers; p50/p99 over "
              "every step of N's runs, p99 and CPU spread: median (min–max) over runs")
    print(f"{label or '':>10} {'N':>7} {'runs':>4} {'steps':>5} {'losses':>6} {'p50 s':>8} {'p99 s':>8} {'p99 by run s':>24} "
          f"{'CPU s/step':>22} {'RSS MiB':>8}")
    for n in sorted(figures):
        f = figures[n]
        print(f"{label or '':>10} {n:>7} {f['runs']:>4} {f['steps']:>5} {f['losses']:>6} {f['p50_s']:>8.4f} {f['p99_s']:>8.4f} "
              f"{spread(f['run_p99_s'], 4):>24} {spread(f['run_cpu_s_per_step'], 4):>22} {f['rss_mib']:>8.1f}")


def report_floor(figures, floor, args):
    """The floor's rows, then ctrund/floor at each N both ran."""
    if not floor:
        return
    print("floor (one TCP exchange per group, epoll, 1 thread): the same steps, interleaved with ctrund's runs")
    report(floor, args, "floor")
    print(f"{'ctrund/floor':>12} {'N':>7} {'p50':>8} {'p99':>8} {'CPU/step':>9}")
    for n in sorted(floor):
        c, f = figures[n], floor[n]
        print(f"{'':>12} {n:>7} {ratio(c['p50_s'], f['p50_s']):>8} {ratio(c['p99_s'], f['p99_s']):>8} "
              f"{ratio(c['cpu_s_per_step'], f['cpu_s_per_step']):>9}")


def report_compare(figures, compare, args):
    """The compared build's rows, then this build over it at each N."""
    if not compare:
        return
    print(f"compared: {args.compare}, the same steps, interleaved with this build's runs")
    report(compare, args, "compared")
    print(f"{'this/compared':>13} {'N':>7} {'p50':>8} {'p99':>8} {'CPU/step':>9}")
    for n in sorted(compare):
        c, o = figures[n], compare[n]
        print(f"{'':>13} {n:>7} {ratio(c['p50_s'], o['p50_s'], 2):>8} {ratio(c['p99_s'], o['p99_s'], 2):>8} "
              f"{ratio(c['cpu_s_per_step'], o['cpu_s_per_step'], 2):>9}")


def ratio(a, b, digits=1):
    return f"{a / b:.{digits}f}x" if b > 0 else "-"


def results(figures, args, sizes, floor=None):
    k16 = 16384 if 16384 in figures else max(sizes)
    print(f"RESULT ft_quorum_16k_p99_s {figures[k16]['p99_s']:.4f}")
    print(f"RESULT ft_quorum_16k_cpu_s_per_step {figures[k16]['cpu_s_per_step']:.4f}")
    if floor and k16 in floor:
        print(f"RESULT ft_quorum_16k_floor_p99_s {floor[k16]['p99_s']:.4f}")
        print(f"RESULT ft_quorum_16k_floor_cpu_s_per_step {floor[k16]['cpu_s_per_step']:.4f}")
    ns = sorted(figures)
    big = ns[-1]
    if big >= 131072:
        print(f"RESULT ft_quorum_131k_p99_s {figures[big]['p99_s']:.4f}")
        return
    # The model of the rest: p99 ~ N^k, k fitted on the two largest N run.
    lo = ns[-2] if len(ns) > 1 else big
    k = math.log(figures[big]["p99_s"] / figures[lo]["p99_s"]) / math.log(big / lo) if lo < big else 1.0
    print(f"ft_quorum_131k_p99_s modelled: p99 ~ N^{k:.2f} (fitted on N={lo} and N={big}), "
          f"{figures[big]['p99_s']:.4f} s x (131072/{big})^{k:.2f}")
    print(f"RESULT ft_quorum_131k_p99_s {figures[big]['p99_s'] * (131072 / big) ** k:.4f}")


if __name__ == "__main__":
    main()
