"""The per-step quorum at scale: N simulated replica groups
(bench/load/ft_quorum_load.cc) stepping through one ctrund's quorum (FtWatch,
FtSync with the compact answer, FtLeave), with 1 %/min of the groups lost and
back (at least 3 losses a run). Per N: the time from the last group's call to
every group's answer per step (p50, p99), ctrund's CPU per step, its RSS.

    bench/ft_quorum.sh [--sizes 256,1024,4096,16384] [--reps 2] [--steps 30]
                       [--step-s 1] [--big 131072] [--json PATH]

Each run starts a fresh ctrund (--log-level warn). Runs are interleaved over
N (rep 1 of every N, then rep 2, ...). p50/p99 are of every measured step of
an N's runs together; the spread is over its runs (median, min–max of the
runs' own p99). --big N runs that N once after the others (0 skips it): the
131k point, or the largest N this machine simulates, with the model of the
rest printed. Ends with RESULT lines; writes a JSON file (with "plots") under
$CTRUN_BUILD_DIR/bench/.
"""
import argparse
import math
import os
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


def run_once(ctrund, load, n, args):
    """One generator run of n groups against a fresh ctrund: its JSON."""
    daemon, endpoint = start_ctrund(ctrund)
    try:
        cmd = [load, "--endpoint", endpoint, "--groups", str(n), "--steps", str(args.steps), "--step-s",
               str(args.step_s), "--channels", str(args.channels), "--server-pid", str(daemon.pid),
               "--timeout-s", str(args.timeout)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=args.timeout * 3 + args.steps * args.step_s + 120)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            sys.exit(f"ft_quorum_load --groups {n} printed no result (exit {p.returncode}): {p.stderr.strip()}")
        if not r.get("ok"):
            sys.exit(f"ft_quorum_load --groups {n} failed: {r.get('error') or p.stderr.strip()}")
        return r
    finally:
        daemon.terminate()
        daemon.wait()


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


def plots(figures):
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
    return [{"file": "ft-quorum-vs-n.png",
             "title": "Per-step quorum on one ctrund (torchft Lighthouse: one request per group per step, "
                      "no published figure at scale)",
             "x": "replica groups N", "y": "seconds, last call to every answer", "log_x": True, "log_y": True,
             "series": series}]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,1024,4096,16384")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--step-s", type=float, default=1.0)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--big", type=int, default=131072, help="one run at this N after the others (0: none)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--json")
    args = ap.parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrund, load = os.path.join(build, "rendezvous", "ctrund"), os.path.join(build, "bench", "ft_quorum_load")
    for path in (ctrund, load):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is missing: build it (ninja -C {build} ctrund ft_quorum_load)")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    runs = {n: [] for n in sizes}
    for _ in range(args.reps):  # interleaved over N
        for n in sizes:
            runs[n].append(run_once(ctrund, load, n, args))
    if args.big:
        runs[args.big] = [run_once(ctrund, load, args.big, args)]
    figures = {n: summary(rs) for n, rs in runs.items()}
    report(figures, args)
    doc = {"sizes": sorted(figures), "steps": args.steps, "step_s": args.step_s, "channels": args.channels,
           "figures": {str(n): f for n, f in figures.items()},
           "runs": {str(n): rs for n, rs in runs.items()}, "plots": plots(figures)}
    print(write("ft_quorum", doc, ROOT, path=args.json, build=build))
    results(figures, args, sizes)


def report(figures, args):
    print(f"ft_quorum_load: N groups against one ctrund, {args.channels} connections, {args.steps} steps a run "
          f"every {args.step_s:g} s, 1 %/min lost and back (>= 3 a run); p50/p99 over every step of N's runs, "
          "p99 and CPU spread: median (min–max) over runs")
    print(f"{'N':>7} {'runs':>4} {'steps':>5} {'losses':>6} {'p50 s':>8} {'p99 s':>8} {'p99 by run s':>24} "
          f"{'CPU s/step':>22} {'RSS MiB':>8}")
    for n in sorted(figures):
        f = figures[n]
        print(f"{n:>7} {f['runs']:>4} {f['steps']:>5} {f['losses']:>6} {f['p50_s']:>8.4f} {f['p99_s']:>8.4f} "
              f"{spread(f['run_p99_s'], 4):>24} {spread(f['run_cpu_s_per_step'], 4):>22} {f['rss_mib']:>8.1f}")


def results(figures, args, sizes):
    k16 = 16384 if 16384 in figures else max(sizes)
    print(f"RESULT ft_quorum_16k_p99_s {figures[k16]['p99_s']:.4f}")
    print(f"RESULT ft_quorum_16k_cpu_s_per_step {figures[k16]['cpu_s_per_step']:.4f}")
    big = max(figures)
    if big < 131072:  # the model of the rest: time linear in N from the largest N run
        print(f"ft_quorum_131k_p99_s modelled: {figures[big]['p99_s']:.4f} s at N={big} x 131072/{big} "
              "(the per-step work is O(N))")
        print(f"RESULT ft_quorum_131k_p99_s {figures[big]['p99_s'] * 131072 / big:.4f}")
    else:
        print(f"RESULT ft_quorum_131k_p99_s {figures[big]['p99_s']:.4f}")


if __name__ == "__main__":
    main()
