"""Rendezvous at scale: N simulated agents (bench/load/rdzv_load.cc) against a
real ctrund, N = 1k..10k; and, end to end, real ctrun agents against
torchrun (torch 1.13, patched in-process) for 4 agents and a node loss.
See bench/rendezvous.sh."""
import argparse
import json
import os
import random
import resource
import select
import signal
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
TORCHRUN = [PY, os.path.join(HERE, "torchrun_compat.py")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra):
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["LOGLEVEL"] = "ERROR"
    e.update({k: str(v) for k, v in extra.items()})
    return e


def wait_all(procs, timeout):
    deadline = time.monotonic() + timeout
    for p in procs:
        left = max(0.1, deadline - time.monotonic())
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            for q in procs:
                q.wait()
            return False
    return all(p.returncode == 0 for p in procs)


def ctrun_agents(ctrun, n, worker, port, extra_env=None, conf="", first_hosts=True):
    procs = []
    for i in range(n):
        host = "is_host=1" if i == 0 and first_hosts else "is_host=0"
        c = ",".join(x for x in (host, conf) if x)
        procs.append(subprocess.Popen(
            [ctrun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "bench",
             "--local-addr", f"127.0.{i // 250}.{i % 250 + 1}", "--rdzv-conf", c,
             "--no-python"] + worker, env=env(**(extra_env or {})),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def torchrun_agents(n, worker, port, nnodes=None, extra_env=None):
    return [subprocess.Popen(
        TORCHRUN + ["--nnodes", nnodes or str(n), "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                    "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "bench",
                    "--monitor_interval", "0.1", "--no_python"] + worker,
        env=env(**(extra_env or {})), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(n)]


class Fifo:
    def __init__(self, d):
        self.path = os.path.join(d, "fifo")
        os.mkfifo(self.path)
        self.rfd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.wfd = os.open(self.path, os.O_WRONLY)
        self.buf = b""

    def close(self):
        os.close(self.rfd)
        os.close(self.wfd)

    def line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if select.select([self.rfd], [], [], left)[0]:
                self.buf += os.read(self.rfd, 4096)
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


# A worker that says it started on $FIFO and exits.
STARTED = ["/bin/sh", "-c", 'echo up > "$FIFO"']


def time_to_started(start_fn, n, timeout):
    """Seconds from launching n agents until all n workers have started;
    then waits for the agents to finish. NaN if they do not."""
    with tempfile.TemporaryDirectory() as d:
        fifo = Fifo(d)
        t0 = time.perf_counter()
        procs = start_fn(fifo.path)
        elapsed = float("nan")
        for i in range(n):
            if fifo.line(timeout) is None:
                break
        else:
            elapsed = time.perf_counter() - t0
        ok = wait_all(procs, timeout)
        fifo.close()
        return elapsed if ok else float("nan")


# A worker that announces "<world size>" on $FIFO, then waits to be stopped.
ANNOUNCE = ["/bin/sh", "-c", 'echo "$WORLD_SIZE" > "$FIFO"; exec sleep 1000']


def node_loss(start_fn, timeout):
    """3 agents (2:3), kill -9 one; seconds until both survivors' new workers run."""
    with tempfile.TemporaryDirectory() as d:
        fifo = Fifo(d)
        procs = start_fn(fifo.path)
        try:
            for _ in range(3):
                if fifo.line(120) != "3":
                    return float("nan")
            t0 = time.perf_counter()
            procs[2].kill()
            seen = 0
            while seen < 2:
                line = fifo.line(timeout - (time.perf_counter() - t0))
                if line is None:
                    return float("inf")
                if line == "2":
                    seen += 1
            return time.perf_counter() - t0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
            for p in procs:
                p.wait()


def raise_fd_limit():
    """Soft RLIMIT_NOFILE up to the hard limit (inherited by ctrund and
    rdzv_load: each simulated agent's channel is one socket on both sides).
    Returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_ctrund(ctrund):
    """A standalone ctrund on a free loopback port, at its default log level;
    returns (process, port) once it accepts connections."""
    port = free_port()
    daemon = subprocess.Popen([ctrund, "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return daemon, port
        except OSError:
            if daemon.poll() is not None:
                break
            time.sleep(0.02)
    daemon.kill()
    daemon.wait()
    sys.exit(f"ctrund did not start listening on 127.0.0.1:{port}")


def load_once(ctrund, load, n, channels, timeout):
    """One generator run of n agents against a fresh ctrund. Returns the
    generator's JSON plus the idle daemon's RSS and CPU before it started."""
    daemon, port = start_ctrund(ctrund)
    try:
        time.sleep(0.2)  # let it settle: the idle baseline
        idle_rss, idle_cpu = proc_status(daemon.pid, "VmRSS"), proc_cpu_s(daemon.pid)
        cmd = [load, "--endpoint", f"127.0.0.1:{port}", "--agents", str(n), "--server-pid",
               str(daemon.pid), "--timeout-s", str(timeout)]
        if channels:
            cmd += ["--channels", str(channels)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout + 60)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            sys.exit(f"rdzv_load --agents {n} printed no result (exit {p.returncode}): {p.stderr.strip()}")
        if not r.get("ok"):
            # Recorded, not fatal: the phases it finished keep their figures.
            print(f"rdzv_load --agents {n} failed: {r.get('error') or p.stderr.strip()}", file=sys.stderr)
        r["idle_rss_kib"], r["idle_cpu_s"] = idle_rss, idle_cpu
        return r
    finally:
        daemon.terminate()
        daemon.wait()


def daemon_check(ctrund, jobs_bin, jobs, timeout):
    """A long-lived ctrund: `jobs` sequential 2-node jobs (bench/load/rdzv_load_jobs.cc)
    against one ctrund with --closed-run-ttl 0. Returns the generator's JSON
    plus ctrund's VmRSS (KiB) after job 1000 (or the first sample) and after
    the last, and the growth per 1000 jobs between them."""
    daemon = subprocess.Popen([ctrund, "--listen", "127.0.0.1:0", "--closed-run-ttl", "0", "--log-level", "warn"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = daemon.stdout.readline()  # "ctrund: serving rendezvous on 127.0.0.1:PORT"
        if "serving rendezvous on " not in line:
            sys.exit(f"ctrund did not start: {line.strip()!r}")
        endpoint = line.split("serving rendezvous on ")[1].split()[0]
        p = subprocess.run([jobs_bin, "--endpoint", endpoint, "--jobs", str(jobs), "--sample-every",
                            str(min(1000, jobs)), "--server-pid", str(daemon.pid)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            sys.exit(f"rdzv_load_jobs printed no result (exit {p.returncode}): {p.stderr.strip()}")
        if not r.get("ok"):
            sys.exit(f"rdzv_load_jobs failed: {r.get('error') or p.stderr.strip()}")
        (j1, rss1), (jn, rssn) = r["rss_kib"][0], r["rss_kib"][-1]
        r["rss_first_kib"], r["rss_last_kib"] = rss1, rssn
        r["growth_per_1k_jobs_kib"] = (rssn - rss1) * 1000.0 / (jn - j1) if jn > j1 else float("nan")
        return r
    finally:
        daemon.terminate()
        daemon.wait()


def daemon_line(r):
    (j1, rss1), (jn, rssn) = r["rss_kib"][0], r["rss_kib"][-1]
    return (f"long-lived ctrund (--closed-run-ttl 0): {r['jobs']} sequential 2-node jobs in {r['seconds']:.1f} s; "
            f"VmRSS {rss1} KiB after job {j1}, {rssn} KiB after job {jn}: "
            f"{r['growth_per_1k_jobs_kib']:.1f} KiB per 1000 jobs (goal <= 50)")


def derived(r):
    """The per-N figures of one run."""
    nan = float("nan")
    s = {k: r["server"].get(k, {"cpu_s": nan, "hwm_kib": nan})
         for k in ("connected", "storm", "round", "drop")}
    if not r.get("ok"):  # a phase that did not finish has no figure
        s["drop"] = {"cpu_s": nan, "hwm_kib": max(v["hwm_kib"] for v in r["server"].values())}
        r.setdefault("drop_round_s", nan)
        r["drop_round_s"] = nan
    n = r["agents"]
    join_cpu = s["round"]["cpu_s"] - s["connected"]["cpu_s"]
    return {
        "ok": r.get("ok", False),
        "error": r.get("error", ""),
        "round_s": r.get("round_s", nan),
        "storm_s": r.get("storm_s", nan),
        "drop_round_s": r["drop_round_s"],
        "connect_s": r["connect_s"],
        "server_cpu_s": s["drop"]["cpu_s"] - r["idle_cpu_s"],
        "connect_cpu_us_per_agent": (s["connected"]["cpu_s"] - r["idle_cpu_s"]) / n * 1e6,
        "join_cpu_us_per_agent": join_cpu / n * 1e6,
        "drop_cpu_us_per_agent": (s["drop"]["cpu_s"] - s["round"]["cpu_s"]) / n * 1e6,
        "rss_mib": s["drop"]["hwm_kib"] / 1024,
        "kib_per_agent": (s["drop"]["hwm_kib"] - r["idle_rss_kib"]) / n,
        "keep_alives": r["keep_alives"],
    }


def fmt(ts, scale=1.0, digits=3):
    s = spread(ts)
    return f"{s['median'] * scale:.{digits}f} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000",
                    help="simulated agents per run (bench/rdzv_load)")
    ap.add_argument("--reps", type=int, default=3, help="runs per size, interleaved across sizes")
    ap.add_argument("--channels", type=int, default=100,
                    help="gRPC channels (TCP connections) the simulated agents share, round-robin "
                    "(default 100); 0: one per agent, as N real agents open (see docs/benchmarks.md)")
    ap.add_argument("--timeout", type=float, default=300, help="bound on one generator run, seconds")
    ap.add_argument("--e2e-reps", type=int, default=3,
                    help="runs of the 4 real agents (ctrun and torchrun); 0 skips the end-to-end part")
    ap.add_argument("--loss-timeout", type=float, default=60)
    ap.add_argument("--daemon-jobs", type=int, default=10000,
                    help="sequential 2-node jobs against one ctrund with --closed-run-ttl 0, for its RSS "
                    "growth (default 10000; 0 skips)")
    ap.add_argument("--daemon-only", action="store_true",
                    help="run only the long-lived daemon check (--daemon-jobs)")
    ap.add_argument("--json", help="where to write the machine-readable results "
                    "(default $CTRUN_BUILD_DIR/bench/rendezvous-<time>.json)")
    return ap.parse_args()


def main():
    args = parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrun = os.path.join(build, "launcher", "ctrun")
    ctrund = os.path.join(build, "rendezvous", "ctrund")
    load = os.path.join(build, "bench", "rdzv_load")
    jobs_bin = os.path.join(build, "bench", "rdzv_load_jobs")
    if args.daemon_jobs and not os.access(jobs_bin, os.X_OK):
        sys.exit(f"{jobs_bin} not found: build first (scripts/build.sh) or set CTRUN_BUILD_DIR")
    if args.daemon_only:
        daemon = daemon_check(ctrund, jobs_bin, args.daemon_jobs or 10000, args.timeout * 10)
        print(daemon_line(daemon))
        print(f"RESULT ctrund_rss_growth_per_1k_jobs_kib {daemon['growth_per_1k_jobs_kib']:.3f}")
        return
    for path in (ctrun, ctrund, load) if args.e2e_reps else (ctrund, load):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} not found: build first (scripts/build.sh) or set CTRUN_BUILD_DIR")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    soft, hard = raise_fd_limit()
    need = max(sizes) if not args.channels else args.channels
    if need + 256 > soft:
        sys.exit(f"the fd limit ({soft}, hard {hard}) is too low for {need} connections: "
                 f"raise it (ulimit -Hn) or pass --channels below {soft - 256}")

    runs = measure_load(args, ctrund, load, sizes)
    e2e = measure_e2e(args, ctrun)
    daemon = daemon_check(ctrund, jobs_bin, args.daemon_jobs, args.timeout * 10) if args.daemon_jobs else None
    c_loss, t_loss = measure_node_loss(args, ctrun)

    print_load_tables(args, sizes, runs, soft, hard)
    print_e2e(args, e2e, c_loss, t_loss)
    if daemon:
        print()
        print(daemon_line(daemon))

    results = rendezvous_results(args, sizes, runs, e2e, daemon, c_loss)
    doc = {
        "fd_limit": {"soft": soft, "hard": hard},
        "channels": args.channels or "one per agent",
        "runs": {str(n): runs[n] for n in sizes},
        "summary": {str(n): {k: spread(nums(runs, n, k)) for k in runs[n][0] if k not in ("ok", "error")}
                    for n in sizes},
        "e2e_4_agents_s": {k: {"times": v, **spread(v)} for k, v in e2e.items() if v},
        "node_loss_restart_s": {"ctrun": c_loss, "torchrun": t_loss},
        "daemon_jobs": daemon,
        "plots": rendezvous_plots(runs, sizes),
        "results": results,
    }
    out = write("rendezvous", doc, ROOT, path=args.json, build=build)
    print()
    print(f"JSON: {out}")
    for k, v in results.items():
        print(f"RESULT {k} {v:.3f}")


def measure_load(args, ctrund, load, sizes):
    """Interleaved: every rep runs every size, in a shuffled order. Returns
    {N: [derived figures of each run]}."""
    rng = random.Random(20)
    runs = {n: [] for n in sizes}
    for _ in range(args.reps):
        order = list(sizes)
        rng.shuffle(order)
        for n in order:
            runs[n].append(derived(load_once(ctrund, load, n, args.channels, args.timeout)))
    return runs


def measure_e2e(args, ctrun):
    """End to end, real processes: 4 ctrun agents vs 4 torchrun agents, in
    turn, until every worker has started."""
    e2e = {"ctrun": [], "torchrun": []}
    for _ in range(args.e2e_reps):
        e2e["ctrun"].append(time_to_started(
            lambda fifo: ctrun_agents(ctrun, 4, STARTED, free_port(), {"FIFO": fifo}), 4, 120))
        e2e["torchrun"].append(time_to_started(
            lambda fifo: torchrun_agents(4, STARTED, free_port(), extra_env={"FIFO": fifo}), 4, 120))
    return e2e


def ctrun_agents_elastic(ctrun, fifo):
    """3 ctrun agents of a 2:3 run whose workers announce on `fifo`."""
    port = free_port()
    procs = []
    for i in range(3):
        procs.append(subprocess.Popen(
            [ctrun, "--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "loss",
             "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf",
             "is_host=1" if i == 0 else "is_host=0", "--no-python"] + ANNOUNCE,
            env=env(FIFO=fifo), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def measure_node_loss(args, ctrun):
    """Survivors of a kill -9, one run under ctrun then one under torchrun
    (NaN both when --e2e-reps is 0). Returns (ctrun s, torchrun s)."""
    c_loss = t_loss = float("nan")
    if args.e2e_reps:
        c_loss = node_loss(lambda fifo: ctrun_agents_elastic(ctrun, fifo), args.loss_timeout)
        t_loss = node_loss(lambda fifo: torchrun_agents(3, ANNOUNCE, free_port(), nnodes="2:3",
                                                        extra_env={"FIFO": fifo}), args.loss_timeout)
    return c_loss, t_loss


def nums(runs, n, k):
    """Figure k of every run at N=n that has one (NaN alone when none has)."""
    return [v for v in [r[k] for r in runs[n]] if v == v] or [float("nan")]


def print_load_tables(args, sizes, runs, soft, hard):
    cell = lambda n, k, digits=3: fmt(nums(runs, n, k), digits=digits)
    print(f"rdzv_load: N simulated agents against one ctrund on this host, "
          f"{'one channel (TCP connection) per agent' if not args.channels else f'{args.channels} channels'};"
          f" fd limit raised to {soft} (hard {hard}); {args.reps} runs per N, interleaved; median (min–max)")
    print("round: the last agent's Join to every agent having the round (max_nodes = N);"
          " storm: N-1 Joins at once until all are admitted;")
    print("drop: 1 % of the agents' streams cancelled and keep-alives stopped at once,"
          " until every survivor has the next round")
    print(f"{'N':>6}  {'round s':>22}  {'storm s':>22}  {'drop → next round s':>22}  "
          f"{'ctrund peak RSS MiB':>22}")
    for n in sizes:
        print(f"{n:>6}  {cell(n, 'round_s'):>22}  {cell(n, 'storm_s'):>22}  {cell(n, 'drop_round_s'):>22}  "
              f"{cell(n, 'rss_mib', 1):>22}")
    print()
    print("ctrund's cost per agent (flat from 1k to 10k = linear): CPU µs per agent to connect, "
          "to join and get the round, for the drop; KiB of peak RSS over idle per agent")
    print(f"{'N':>6}  {'connect µs':>20}  {'join+round µs':>20}  {'drop µs':>20}  {'KiB':>20}  "
          f"{'ctrund CPU s':>20}")
    for n in sizes:
        print(f"{n:>6}  {cell(n, 'connect_cpu_us_per_agent', 0):>20}  {cell(n, 'join_cpu_us_per_agent', 0):>20}  "
              f"{cell(n, 'drop_cpu_us_per_agent', 0):>20}  {cell(n, 'kib_per_agent', 1):>20}  "
              f"{cell(n, 'server_cpu_s', 2):>20}")


def print_e2e(args, e2e, c_loss, t_loss):
    if not args.e2e_reps:
        return
    print()
    print(f"end to end, real processes: 4 agents from launch until every worker has started, "
          f"{args.e2e_reps} runs each; median (min–max)")
    print(f"  ctrun    {fmt(e2e['ctrun'])} s")
    print(f"  torchrun {fmt(e2e['torchrun'])} s")
    fmt_loss = lambda v: "no restart" if v == float("inf") else f"{v:.3f} s"
    print(f"survivors restarted after kill -9 of one of 3 agents: ctrun {fmt_loss(c_loss)}, "
          f"torchrun {fmt_loss(t_loss)} (limit {args.loss_timeout:.0f} s)")


def rendezvous_plots(runs, sizes):
    """bench/plot.py's plots: time and ctrund's RSS against N."""
    def point(n, k, scale=1.0):
        return {"x": n, "median": statistics.median(nums(runs, n, k)) * scale,
                "min": min(nums(runs, n, k)) * scale, "max": max(nums(runs, n, k)) * scale}
    return [
        {"file": "rendezvous-time-vs-n.png", "title": "Rendezvous with N simulated agents (one ctrund)",
         "x": "agents", "y": "seconds", "log_x": True, "log_y": True,
         "series": {"last join → all have the round": [point(n, "round_s") for n in sizes],
                    "1 % dropped → survivors have the next round": [point(n, "drop_round_s")
                                                                    for n in sizes]},
         "anchors": [{"x": 4000, "y": 10.0, "label": "torchrun 2.x: ~10 s at 4k hosts (pytorch#124982)"}]},
        {"file": "rendezvous-rss-vs-n.png", "title": "ctrund peak RSS with N agents connected",
         "x": "agents", "y": "MiB", "log_x": True, "log_y": False,
         "series": {"ctrund VmHWM": [point(n, "rss_mib") for n in sizes]}},
    ]


def rendezvous_results(args, sizes, runs, e2e, daemon, c_loss):
    """The RESULT values, in the order they are printed."""
    results = {}
    # The largest N, and 10k and 20k (the goals' sizes) where they were run.
    for n in sorted({max(sizes)} | {n for n in sizes if n in (10000, 20000)}):
        tag = f"{n // 1000}k" if n % 1000 == 0 else str(n)
        results[f"rdzv_{tag}_round_s"] = statistics.median(nums(runs, n, "round_s"))
        results[f"rdzv_{tag}_rss_mib"] = statistics.median(nums(runs, n, "rss_mib"))
    if daemon:
        results["ctrund_rss_growth_per_1k_jobs_kib"] = daemon["growth_per_1k_jobs_kib"]
    if args.e2e_reps:
        results["rdzv_4_agents_s"] = statistics.median(e2e["ctrun"])
        results["node_loss_restart_s"] = c_loss
    return results


if __name__ == "__main__":
    main()
