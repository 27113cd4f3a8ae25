"""Rendezvous at scale and node-loss recovery: ctrun vs torchrun (torch 1.13,
patched in-process), side by side in one run. See bench/rendezvous.sh."""
import argparse
import os
import select
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

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


def process_floor(argv, n):
    """Seconds to start n processes of `argv` that do nothing and exit: the
    floor (`ctrund --help`, linked against Debian's shared gRPC) and our own
    (`ctrun --version`)."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL) for _ in range(n)]
    for p in procs:
        p.wait()
    return time.perf_counter() - t0


def last_join_to_started(ctrun, ctrund, n, timeout, pin=False):
    """n agents against a standalone ctrund at debug level. Returns seconds
    from the server logging the last Join (its own millisecond timestamp) to
    (a) the server having sent round 0 to every member (the last "round 0
    sent to" line: the write of that node's RoundComplete completed on its
    stream), (b) the last agent having the round: its "round 0 complete" log
    line (agents at LOGLEVEL=INFO, each stderr a pipe this process reads and
    timestamps: an upper bound, the reading competes for the same cores), and
    (c) the last worker having started (its line on the FIFO). NaNs if the
    run fails. With `pin`, ctrund runs on CPU 0 and the agents on the other
    CPUs: the daemon on its own host, as a job that keeps the rendezvous off
    the training nodes runs it (on one shared host the server's pushes
    otherwise wait behind the hundreds of agents each push wakes)."""
    cpus = sorted(os.sched_getaffinity(0))
    pin = pin and len(cpus) > 1
    daemon_cpus, agent_cpus = ({cpus[0]}, set(cpus[1:])) if pin else (set(cpus), set(cpus))
    port = free_port()
    daemon = subprocess.Popen([ctrund, "--listen", f"127.0.0.1:{port}", "--log-level", "debug"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, daemon_cpus))
    joins, sent = [], []

    def drain():
        for line in daemon.stderr:
            if not line.startswith("["):
                continue
            if "join from" in line:
                joins.append(datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S.%f").timestamp())
            elif "round 0 sent to" in line:
                sent.append(datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S.%f").timestamp())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    nan = (float("nan"),) * 3
    try:
        with tempfile.TemporaryDirectory() as d:
            fifo = Fifo(d)
            sel = selectors.DefaultSelector()
            sel.register(fifo.rfd, selectors.EVENT_READ, None)
            procs = []
            for i in range(n):
                p = subprocess.Popen(
                    [ctrun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "bench",
                     "--local-addr", f"127.0.{i // 250}.{i % 250 + 1}", "--rdzv-conf", "is_host=0",
                     "--no-python"] + STARTED, env=env(FIFO=fifo.path, LOGLEVEL="INFO"),
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    preexec_fn=lambda: os.sched_setaffinity(0, agent_cpus))
                os.set_blocking(p.stderr.fileno(), False)
                sel.register(p.stderr, selectors.EVENT_READ, p)
                procs.append(p)
            received, started, open_pipes = [], [], n
            deadline = time.monotonic() + timeout
            while (len(received) < n or len(started) < n) and open_pipes and time.monotonic() < deadline:
                for key, _ in sel.select(max(0.1, deadline - time.monotonic())):
                    if key.data is None:
                        data, now = os.read(fifo.rfd, 65536), time.time()
                        started += [now] * data.count(b"\n")
                        continue
                    data, now = key.fileobj.read(), time.time()
                    if data is None:
                        continue
                    if not data:
                        sel.unregister(key.fileobj)
                        open_pipes -= 1
                    elif b"round 0 complete" in data:
                        received.append(now)
            ok = wait_all(procs, timeout)
            for p in procs:
                p.stderr.close()
            sel.close()
            fifo.close()
    finally:
        daemon.terminate()
        daemon.wait()
        reader.join(5)
    if not ok or len(received) < n or len(started) < n or len(joins) < n or len(sent) < n:
        return nan
    return max(sent) - max(joins), max(received) - max(joins), max(started) - max(joins)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,64,256,1024")
    ap.add_argument("--torchrun-sizes", default="4,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--loss-timeout", type=float, default=60)
    args = ap.parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrun = os.path.join(build, "launcher", "ctrun")
    if not os.access(ctrun, os.X_OK):
        sys.exit(f"{ctrun} not found: build first (scripts/build.sh) or set CTRUN_BUILD_DIR")

    ctrund = os.path.join(build, "rendezvous", "ctrund")
    rows = []
    results = {}
    round_after = {}
    round_pinned = {}
    for n in [int(x) for x in args.sizes.split(",") if x]:
        reps = args.reps if n <= 64 else 1
        times = [time_to_started(lambda fifo: ctrun_agents(ctrun, n, STARTED, free_port(),
                                                           {"FIFO": fifo}), n, 600)
                 for _ in range(reps)]
        floor = process_floor([ctrund, "--help"], n)
        own = process_floor([ctrun, "--version"], n)
        med = statistics.median(times)
        rows.append((f"ctrun    {n:5} agents", min(times), med, floor, own))
        results[n] = (med, floor, own)
        if n >= 64:
            round_after[n] = last_join_to_started(ctrun, ctrund, n, 600)
            round_pinned[n] = last_join_to_started(ctrun, ctrund, n, 600, pin=True)
    for n in [int(x) for x in args.torchrun_sizes.split(",") if x]:
        times = [time_to_started(lambda fifo: torchrun_agents(n, STARTED, free_port(),
                                                              extra_env={"FIFO": fifo}), n, 600)
                 for _ in range(args.reps)]
        rows.append((f"torchrun {n:5} agents", min(times), statistics.median(times), float("nan"),
                     float("nan")))

    def ctrun_agents_elastic(ctrun, fifo):
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

    c_loss = node_loss(lambda fifo: ctrun_agents_elastic(ctrun, fifo), args.loss_timeout)
    t_loss = node_loss(lambda fifo: torchrun_agents(3, ANNOUNCE, free_port(), nnodes="2:3",
                                                    extra_env={"FIFO": fifo}), args.loss_timeout)

    print("agents from launch until every worker has started; floor = launching as many")
    print("gRPC-linked processes that do nothing (ctrund --help, Debian's shared gRPC);")
    print("own = launching as many ctrun --version (ctrun links gRPC statically)")
    print(f"{'case':24} {'min s':>9} {'median s':>9} {'floor s':>9} {'own s':>9}")
    for name, lo, med, floor, own in rows:
        print(f"{name:24} {lo:9.3f} {med:9.3f} {floor:9.3f} {own:9.3f}")
    print()
    for n, (med, floor, own) in results.items():
        print(f"ctrun {n:5} agents: {med / floor:.2f} x the floor, {med / own:.2f} x starting as many ctrun")
    print("N agents on a standalone ctrund, from the server's last Join: round sent to every member /")
    print("every agent has the round / last worker started; shared = all on every CPU, own core =")
    print("ctrund on CPU 0 and the agents on the others (the daemon on its own host)")
    print(f"{'case':24} {'sent s':>9} {'has it s':>9} {'started s':>9}")
    for n in round_after:
        for name, runs in (("shared", round_after), ("own core", round_pinned)):
            sent, got, s = runs[n]
            print(f"{n:5} agents, {name:12} {sent:9.3f} {got:9.3f} {s:9.3f}")
    fmt = lambda v: "no restart" if v == float("inf") else f"{v:.2f} s"
    print(f"survivors restarted after kill -9 of one agent: ctrun {fmt(c_loss)}, "
          f"torchrun {fmt(t_loss)} (limit {args.loss_timeout:.0f} s)")
    if 4 in results:
        print(f"RESULT rdzv_4_agents_s {results[4][0]:.3f}")
    if results:
        big = max(results)
        print(f"RESULT rdzv_{big}_agents_floor_ratio {results[big][0] / results[big][1]:.2f}")
    if round_after:
        big = max(round_after)
        print(f"RESULT rdzv_{big}_round_complete_s {round_pinned[big][0]:.3f}")
        print(f"RESULT rdzv_{big}_last_join_to_round_sent_shared_s {round_after[big][0]:.3f}")
        print(f"RESULT rdzv_{big}_last_join_to_round_s {round_after[big][1]:.3f}")
        print(f"RESULT rdzv_{big}_last_join_to_started_s {round_after[big][2]:.3f}")
    print(f"RESULT node_loss_restart_s {c_loss:.3f}")


if __name__ == "__main__":
    main()
