"""bench/store.sh: ctrun's workers' store against torch 1.13's own TCPStore
server, side by side in one run, interleaved.

1. Load: $CTRUN_BUILD_DIR/bench/store_load (C++, torch 1.13's wire protocol)
   drives each server with the same mix (SET+GET, ADD, WAIT, COMPARE_SET;
   64 B and 64 KB values) from 1, 64 and 512 connections. Requests/s, p50
   and p99 latency, and the server's CPU seconds per 100k requests
   (utime + stime of the server process alone, /proc/PID/stat). Then ctrun's
   kernel time per request (stime) and torch's CPU over it: the ratio a
   server with no user-space cost at all would reach.
2. Connect storm: 1,024, 4,096 and 16,384 clients connect at once, each
   ADDs to a barrier key and WAITs for the last one's release, then
   disconnects; first connect to last client released. Clients retry a
   refused or reset connect as a torch 2.x TCPStore client does
   (bench/load/store_load_retry.h), against both servers alike; the retries
   are counted per server.
3. End to end: 8 torch TCPStore python clients (bench/store_client.py) as the
   workers of a ctrun run, and against torch's server.

ctrun's side is bench/store_server: the agent's StoreServer in a process of
its own. torch's is `TCPStore(is_master=True)` in a python process of its own.
Medians of interleaved runs with the min-max spread; a table; a JSON file per
run (path printed; "plots" for bench/plot.py); then
  RESULT store_cpu_per_req_ratio  torch's CPU per request / ours (geometric
                                  mean over the 6 load cases)
  RESULT store_storm_ratio        torch's storm time / ours, 4,096 clients
  RESULT store_storm_16k_ratio    the same, 16,384 clients
  RESULT store_storm_16k_dropped  clients of ours not released at 16,384 (0)
  RESULT store_ops_ratio          end-to-end python clients, ours / torch's
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import time

from benchjson import write  # bench/benchjson.py: shared by every bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
CLIENT = os.path.join(HERE, "store_client.py")
TORCH_SERVER = (
    "import signal, torch.distributed as d\n"
    "s = d.TCPStore('127.0.0.1', 0, None, True, wait_for_workers=False)\n"
    "print(s.port, flush=True)\n"
    "signal.pause()\n")
SERVERS = ("ctrun", "torch")


def med(v):
    return statistics.median(v)


def spread(v):
    return {"median": med(v), "min": min(v), "max": max(v)}


def fmt(v, scale=1.0, digits=0):
    return f"{med(v) * scale:.{digits}f} ({min(v) * scale:.{digits}f}–{max(v) * scale:.{digits}f})"


def proc_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except OSError:
        return None


def listen_backlog(port):
    """The accept-queue limit the kernel gives the socket listening on `port` (ss's Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    m = re.search(r"LISTEN\s+\d+\s+(\d+)", out)
    return int(m.group(1)) if m else None


def listen_drops():
    """TcpExt ListenOverflows + ListenDrops of this network namespace."""
    with open("/proc/net/netstat") as f:
        lines = [l.split() for l in f if l.startswith("TcpExt:")]
    fields = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return fields.get("ListenOverflows", 0) + fields.get("ListenDrops", 0)


class Server:
    def __init__(self, kind, build):
        self.kind = kind
        if kind == "ctrun":
            cmd = [os.path.join(build, "bench", "store_server"), "127.0.0.1", "0"]
        else:
            cmd = [PY, "-c", TORCH_SERVER]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.proc.kill()
            sys.exit(f"the {kind} store server did not start (it printed {line!r})")
        self.port = int(line)
        self.backlog = listen_backlog(self.port)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


# Clients per loopback source address (store_load --clients-per-address): the
# ranks of one node, so the store's cap on one address is met as in a job.
CLIENTS_PER_ADDRESS = 8


def load(build, server, args, tag, may_fail=False):
    """store_load's JSON. A failed run ends the bench, unless `may_fail`
    (torch's side of a storm): then its JSON comes back with "failed" set and
    "wall_s", the seconds until store_load gave up."""
    cmd = [os.path.join(build, "bench", "store_load"), "--port", str(server.port),
           "--server-pid", str(server.proc.pid), "--prefix", tag,
           "--clients-per-address", str(CLIENTS_PER_ADDRESS)] + args
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if r.returncode != 0 and may_fail and r.stdout.strip().startswith("{"):
        out = json.loads(r.stdout)
        out.update(failed=True, wall_s=wall, why=r.stderr.strip().splitlines()[0] if r.stderr.strip() else "")
        return out
    if r.returncode != 0:
        sys.exit(f"store_load against the {server.kind} store failed ({r.returncode}): "
                 f"{' '.join(cmd)}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def e2e_rate(outputs, clients):
    """Total store calls / (last end - first start) over every client's line."""
    ops, starts, ends = 0, [], []
    for m in re.finditer(r"ops (\d+) start ([\d.]+) end ([\d.]+)", outputs):
        ops += int(m.group(1))
        starts.append(float(m.group(2)))
        ends.append(float(m.group(3)))
    if len(starts) != clients:
        sys.exit(f"expected {clients} client lines, got {len(starts)}:\n{outputs}")
    return ops / (max(ends) - min(starts))


def e2e_env(clients, ops, **extra):
    e = dict(os.environ, STORE_BENCH_CLIENTS=str(clients), STORE_BENCH_OPS=str(ops), PYTHON_EXEC=PY)
    e.update(extra)
    return e


def e2e_ctrun(ctrun, clients, ops):
    r = subprocess.run([ctrun, "--nproc-per-node", str(clients), "--tee", "1", CLIENT],
                       env=e2e_env(clients, ops), capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"ctrun failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return e2e_rate(r.stdout, clients)


def e2e_torch(clients, ops):
    server = subprocess.Popen([PY, "-c", TORCH_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        procs = [subprocess.Popen([PY, CLIENT], stdout=subprocess.PIPE, text=True,
                                  env=e2e_env(clients, ops, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                              STORE_BENCH_INDEX=str(i)))
                 for i in range(clients)]
        out = ""
        for c in procs:
            o, _ = c.communicate(timeout=600)
            if c.returncode != 0:
                sys.exit(f"a torch-store client failed ({c.returncode})")
            out += o
        return e2e_rate(out, clients)
    finally:
        server.kill()
        server.wait()


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        new = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        print(f"open-files limit raised from {soft} to {new} (hard limit {hard}) for the servers "
              f"and the load generator")
        soft = new
    else:
        print(f"open-files limit {soft} (hard {hard}): enough for {need}")
    if soft < need:
        sys.exit(f"the storm needs {need} open files per process; the hard limit is {hard}: "
                 f"raise it (ulimit -Hn) or pass a smaller --storm-clients")
    return soft


def print_load(args, cases, runs, cpu100k, ratios):
    print()
    print(f"load: store_load, one closed-loop client per connection, cycle SET+GET / ADD / WAIT / "
          f"COMPARE_SET; {args.reps} interleaved runs of {args.seconds} s each; median (min–max)")
    print(f"{'conns':>5} {'value':>6} {'server':>6} {'requests/s':>24} {'p50 µs':>10} {'p99 µs':>10} "
          f"{'CPU s / 100k req':>22} {'torch/ctrun CPU':>15}")
    for c, v in cases:
        r = runs[(c, v)]
        ratio = med([cpu100k(x) for x in r["torch"]]) / med([cpu100k(x) for x in r["ctrun"]])
        ratios[(c, v)] = ratio
        for k in SERVERS:
            xs = r[k]
            print(f"{c:>5} {v:>6} {k:>6} {fmt([x['requests_per_s'] for x in xs]):>24} "
                  f"{med([x['p50_us'] for x in xs]):>10.0f} {med([x['p99_us'] for x in xs]):>10.0f} "
                  f"{fmt([cpu100k(x) for x in xs], 1, 2):>22} "
                  f"{(f'{ratio:.2f}' if k == 'torch' else ''):>15}")
    cpu_ratio = math.exp(statistics.fmean(math.log(x) for x in ratios.values()))
    print(f"server CPU per request, torch / ctrun: geometric mean {cpu_ratio:.2f}, "
          f"lowest {min(ratios.values()):.2f} ({' '.join(f'{c}x{v}B={x:.2f}' for (c, v), x in ratios.items())})")
    # How far any server could go: ctrun's kernel time per request (recv,
    # send, epoll: the loopback TCP path) is a floor for a server that spends
    # nothing in user space; torch's whole CPU over it bounds the ratio.
    print()
    print("where ctrun's server CPU goes, and the most any server could save: kernel (stime) µs per "
          "request, its share, and torch's CPU / ctrun's kernel time alone")
    bounds = []
    for c, v in cases:
        r = runs[(c, v)]
        sys_us = med([x["server_sys_s"] / x["requests"] * 1e6 for x in r["ctrun"]])
        all_us = med([cpu100k(x) * 10 for x in r["ctrun"]])
        torch_us = med([cpu100k(x) * 10 for x in r["torch"]])
        bounds.append(torch_us / sys_us)
        print(f"{c:>5} {v:>6}  ctrun {all_us:6.2f} µs, kernel {sys_us:6.2f} µs ({sys_us / all_us:4.0%});"
              f"  torch {torch_us:6.2f} µs;  bound {torch_us / sys_us:.2f}")
    bound = math.exp(statistics.fmean(math.log(x) for x in bounds))
    print(f"a server with no user-space cost at all would reach torch / it = {bound:.2f} "
          f"(geometric mean; highest {max(bounds):.2f})")
    return cpu_ratio


def print_storm(args, storms, drops, fd_limit):
    """The storm's table, one block per client count. Returns {clients:
    torch's median time / ctrun's}."""
    print()
    print(f"connect storm: N clients connect at once, ADD + WAIT on a barrier, close; "
          f"{args.storm_reps} runs each, sizes interleaved; fd limit {fd_limit}")
    print(f"  each from a node's loopback address (127.1.x.y), {CLIENTS_PER_ADDRESS} clients an address "
          f"(ctrun's store takes at most 1,024 from one)")
    print("  clients retry a refused, reset or timed-out connect as a torch 2.x TCPStore client does "
          "(500 ms, x1.5 a try, +-50 % jitter, at most 60 s, until store_load's --timeout); retries: median (min–max) "
          "a run; not released: clients never released within the timeout")
    print(f"{'N':>6} {'server':>6} {'first connect → last released, s':>34} {'slowest connect, s':>20} "
          f"{'server CPU s':>14} {'listen drops':>13} {'retries':>14} {'gave up':>8} {'not released':>13}")
    ratios = {}
    for n in storm_sizes(args):
        for k in SERVERS:
            xs = storms[n][k]
            failed = sum(1 for x in xs if x.get("failed"))
            mark = f" (≥, {failed} of {len(xs)} failed)" if failed else ""
            print(f"{n:>6} {k:>6} {fmt([storm_s(x) for x in xs], 1, 3) + mark:>34} "
                  f"{med([x['slowest_connect_s'] for x in xs]):>20.3f} "
                  f"{med([x['server_cpu_s'] for x in xs]):>14.2f} {max(drops[n][k]):>13} "
                  f"{fmt([x.get('retries', 0) for x in xs]):>14} "
                  f"{max(x['connect_failures'] for x in xs):>8} "
                  f"{max(x['clients'] - x['released'] for x in xs):>13}")
            for why in sorted({x["why"] for x in xs if x.get("failed")}):
                print(f"    {k} failed: {why} (store_load stops at its first error)")
        if max(drops[n]["ctrun"]) > 0:
            print(f"  warning: the kernel dropped connects to ctrun's store at N={n} (ListenOverflows/"
                  f"ListenDrops rose by {max(drops[n]['ctrun'])}; the counters are per network "
                  f"namespace, so other load on this host may count too)")
        ratios[n] = (med([storm_s(x) for x in storms[n]["torch"]]) /
                     med([storm_s(x) for x in storms[n]["ctrun"]]))
        if any(x.get("failed") for x in storms[n]["torch"]):
            print(f"  N={n}: torch failed the storm; its time is the time until it failed, and "
                  f"the ratio ({ratios[n]:.2f}) a lower bound")
    return ratios


def storm_s(x):
    """A storm's seconds: first connect to last released, or for a storm the
    server failed, the seconds until store_load gave up (a lower bound)."""
    return x["wall_s"] if x.get("failed") else x["seconds"]


def storm_sizes(args):
    return [int(n) for n in args.storm_clients.split(",") if n]


def storm_plot(storms, sizes):
    """bench/plot.py's plot of the storm's time against N, log-log, with
    NVIDIA's published TCPStore barrier figure as an anchor."""
    return {"file": "store-storm-vs-n.png",
            "title": "Store connect storm: N clients ADD + WAIT on one barrier",
            "x": "clients", "y": "first connect → last released (s)", "log_x": True, "log_y": True,
            "series": {f"{k}{' (torch 1.13 TCPStore server; clients retry as torch 2.x does)' if k == 'torch' else ''}":
                       [{"x": n, **spread([storm_s(x) for x in storms[n][k]])} for n in sizes]
                       for k in SERVERS},
            "anchors": [{"x": 16384, "y": 0.5, "label": "NVIDIA's TCPStore barrier: 0.5 s at 16k ranks"}]}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3,
                   help="interleaved repetitions of each load case (0: skip the load)")
    p.add_argument("--seconds", type=float, default=1.5, help="measured seconds of each load run")
    p.add_argument("--conns", default="1,64,512", help="connection counts")
    p.add_argument("--values", default="64,65536", help="value sizes in bytes")
    p.add_argument("--storm-clients", default="1024,4096,16384",
                   help="clients of each storm size, comma-separated")
    p.add_argument("--storm-reps", type=int, default=3, help="0: skip the storm")
    p.add_argument("--e2e-reps", type=int, default=3,
                   help="runs of the 8-python-client end-to-end check per server (0: skip it)")
    p.add_argument("--e2e-clients", type=int, default=8)
    p.add_argument("--e2e-ops", type=int, default=2000, help="rounds of set+get+add per python client")
    p.add_argument("--json", help="where to write the machine-readable results "
                   "(default $CTRUN_BUILD_DIR/bench/store-<time>.json)")
    return p.parse_args()


def main():
    args = parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    for tool in ("store_load", "store_server"):
        if not os.access(os.path.join(build, "bench", tool), os.X_OK):
            sys.exit(f"{build}/bench/{tool} not found: build with tests (CTRUN_BUILD_TESTS=ON) "
                     f"or set CTRUN_BUILD_DIR")
    ctrun = os.path.join(build, "launcher", "ctrun")
    if args.e2e_reps > 0 and not os.access(ctrun, os.X_OK):
        sys.exit(f"{ctrun} not found: build first or set CTRUN_BUILD_DIR (or --e2e-reps 0)")
    conns = [int(c) for c in args.conns.split(",")]
    values = [int(v) for v in args.values.split(",")]

    fd_limit = raise_fd_limit(max(storm_sizes(args), default=0) + 64)
    somaxconn = proc_int("/proc/sys/net/core/somaxconn")
    syn_backlog = proc_int("/proc/sys/net/ipv4/tcp_max_syn_backlog")
    servers = start_servers(args, build, somaxconn, syn_backlog)
    cases = [(c, v) for v in values for c in conns]
    runs = measure_load(args, build, servers, cases)
    storms, drops = measure_storms(args, build)
    e2e = measure_e2e(args, ctrun)

    # The table.
    results = {}
    ratios = {}
    if args.reps > 0:
        cpu_ratio = print_load(args, cases, runs, cpu100k, ratios)
        results["store_cpu_per_req_ratio"] = cpu_ratio
    if args.storm_reps > 0:
        storm_ratios = print_storm(args, storms, drops, fd_limit)
        if 4096 in storm_ratios:
            results["store_storm_ratio"] = storm_ratios[4096]
        if 16384 in storm_ratios:
            results["store_storm_16k_ratio"] = storm_ratios[16384]
            results["store_storm_16k_dropped"] = max(
                x["clients"] - x["released"] for x in storms[16384]["ctrun"])
    if e2e["ctrun"]:
        results["store_ops_ratio"] = print_e2e(args, e2e)

    doc = {
        "fd_limit": fd_limit, "somaxconn": somaxconn, "tcp_max_syn_backlog": syn_backlog,
        "listen_backlog": {k: s.backlog for k, s in servers.items()},
        "load": [{"conns": c, "value_bytes": v, **{k: runs[(c, v)][k] for k in SERVERS},
                  "cpu_ratio": ratios.get((c, v))} for c, v in cases] if args.reps > 0 else [],
        "storm": {str(n): {k: {"runs": storms[n][k], "listen_drops": drops[n][k]} for k in SERVERS}
                  for n in storms},
        "e2e_ops_per_s": e2e,
        "results": results,
        "plots": (([latency_plot(runs, conns, v) for v in values] if args.reps > 0 else []) +
                  ([storm_plot(storms, storm_sizes(args))] if args.storm_reps > 0 else [])),
    }
    out = write("store", doc, ROOT, path=args.json, build=build)
    print()
    print(f"machine-readable results: {out}")
    for name, value in results.items():
        print(f"RESULT {name} {value:.2f}")


def start_servers(args, build, somaxconn, syn_backlog):
    """Both servers for the load, with the kernel's listen limits printed."""
    servers = {k: Server(k, build) for k in SERVERS}
    print(f"net.core.somaxconn {somaxconn}, tcp_max_syn_backlog {syn_backlog}; listen backlog "
          f"(accept queue) ctrun {servers['ctrun'].backlog}, torch {servers['torch'].backlog}")
    for s in servers.values():
        big = max(storm_sizes(args), default=0)
        if s.backlog is not None and s.backlog < big:
            print(f"  note: the {s.kind} server's accept queue ({s.backlog}) is shorter than the "
                  f"largest storm ({big}): connects over it are dropped and retried by TCP")
    return servers


def measure_load(args, build, servers, cases):
    """1. load, interleaved: each repetition runs every case on both servers,
    alternating which goes first; stops the servers after. Returns
    {(conns, value bytes): {server: [store_load JSON]}}."""
    runs = {(c, v): {k: [] for k in SERVERS} for c, v in cases}
    try:
        for rep in range(args.reps):
            for i, (c, v) in enumerate(cases):
                order = SERVERS if (rep + i) % 2 == 0 else SERVERS[::-1]
                for k in order:
                    runs[(c, v)][k].append(load(build, servers[k], [
                        "mix", "--conns", str(c), "--value-bytes", str(v),
                        "--seconds", str(args.seconds)], f"r{rep}c{c}v{v}"))
    finally:
        for s in servers.values():
            s.stop()
    return runs


def measure_storms(args, build):
    """2. storms: a fresh server per run; each repetition runs every size on
    both servers, interleaved. Returns ({N: {server: [store_load JSON]}},
    {N: {server: [listen drops]}})."""
    sizes = storm_sizes(args)
    storms = {n: {k: [] for k in SERVERS} for n in sizes}
    drops = {n: {k: [] for k in SERVERS} for n in sizes}
    for rep in range(args.storm_reps):
        for i, n in enumerate(sizes):
            for k in (SERVERS if (rep + i) % 2 == 0 else SERVERS[::-1]):
                s = Server(k, build)
                try:
                    before = listen_drops()
                    storms[n][k].append(load(build, s, ["storm", "--clients", str(n)], f"storm{rep}n{n}",
                                             may_fail=k == "torch"))
                    drops[n][k].append(listen_drops() - before)
                finally:
                    s.stop()
    return storms, drops


def measure_e2e(args, ctrun):
    """3. end to end with torch's python client: store calls/s per server."""
    e2e = {k: [] for k in SERVERS}
    for rep in range(args.e2e_reps):
        e2e["ctrun"].append(e2e_ctrun(ctrun, args.e2e_clients, args.e2e_ops))
        e2e["torch"].append(e2e_torch(args.e2e_clients, args.e2e_ops))
    return e2e


def cpu100k(r):
    """A load run's server CPU seconds per 100k requests."""
    return r["server_cpu_s"] / r["requests"] * 1e5


def print_e2e(args, e2e):
    """Prints the end-to-end rates; returns ctrun's / torch's."""
    print()
    print(f"end to end: {args.e2e_clients} torch 1.13 python TCPStore clients x {args.e2e_ops} "
          f"rounds of set+get+add; store calls/s, {args.e2e_reps} runs each; median (min–max)")
    print(f"  ctrun (agent-hosted, clients are its workers) {fmt(e2e['ctrun'])}")
    print(f"  torch TCPStore server                         {fmt(e2e['torch'])}")
    return med(e2e["ctrun"]) / med(e2e["torch"])


def latency_plot(runs, conns, v):
    """bench/plot.py's plot of p50 and p99 against connections, value size v."""
    series = {}
    for k in SERVERS:
        for q in ("p50", "p99"):
            series[f"{k} {q}"] = [
                {"x": c, **spread([x[f"{q}_us"] / 1000 for x in runs[(c, v)][k]])} for c in conns]
    label = f"{v // 1024} KB" if v >= 1024 else f"{v} B"
    return {"file": f"store-latency-{label.replace(' ', '').lower()}.png",
            "title": f"Store request latency, {label} values (ctrun vs torch 1.13 TCPStore)",
            "x": "client connections", "y": "latency (ms)", "log_x": True, "log_y": True,
            "series": series}


if __name__ == "__main__":
    main()
