"""The verdict's accuracy on a fault corpus (docs/why-did-my-job-fail.md):
FAULTS faults (default 15 of each class below, seeded), each in its own 2-
or 3-node job of 2 ranks a node under one ctrund on the loopback (nodes
127.0.0.1-3, --node-rank i: node i has ranks 2i and 2i+1), at a random
moment on a random rank; after each, `ctrun status --why --json` is
compared with what was injected.

The classes and how each is made (tests/integration/workers/fault.py
unless said):
  segfault, abort, bus_error, illegal_instruction, arithmetic_error,
  killed_by_signal   the worker raises the signal itself (SIGKILL: no OOM)
  oom_killed         the worker allocates until the OOM killer ends it: the
                     job runs in a memory cgroup with a 384 MiB limit (cgroup
                     v1 here; left out, and said, where none can be made)
  python_exception, cuda_oom, nccl_error, file_not_found, import_error,
  nan_or_inf         the exception, in its error file as @record writes it,
                     or (every other fault, seeded) on stderr alone under
                     --tee 2 (a stock script)
  disk_full          a real ENOSPC: a write to /dev/full
  hang               the worker stops touching its heartbeat (--heartbeat-
                     timeout 1, --hang-stacks-timeout 0: no gdb)
  unknown            sys.exit(3) with no text: the verdict must not guess
  bad_launch         every rank fails at import (workers/fail_at_import.py,
                     --max-restarts 1)
  node_lost          a node's agent SIGKILLed (its workers die with it)
  unhealthy_node     a node's periodic --health-check starts failing
A fault is right when the class is and the rank is (for a node's class: the
node's address, and no rank; for bad_launch: any rank).

Latency: for a job that ends by itself, from its last agent's exit to the
verdict readable with the right class (the goal: within 1 s); for node_lost
and unhealthy_node, whose job runs on, from the fault. Orphans: processes
of a fault's job (CTRUN_VERDICT_RUN in their environment) left after its
agents exited.

Env knobs: PER_CLASS (15; QUICK=1: 2), CLASSES (all, comma-separated),
SEED (1). Needs scripts/build.sh ($CTRUN_BUILD_DIR or build/). Prints the
confusion matrix and ends with RESULT lines; exits 1 when an orphan is left."""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchjson  # noqa: E402
from procs import marked, signal_all  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
CTRUND = os.path.join(BUILD, "rendezvous", "ctrund")
WORKERS = os.path.join(ROOT, "tests", "integration", "workers")
QUICK = os.environ.get("QUICK") == "1"
PER_CLASS = int(os.environ.get("PER_CLASS", "2" if QUICK else "15"))
SEED = int(os.environ.get("SEED", "1"))
NPROC = 2
CONF = "is_host=0,last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60"
SIGNAL_FAULTS = {"segfault": "segfault", "abort": "abort", "bus_error": "bus_error",
                 "illegal_instruction": "illegal_instruction", "arithmetic_error": "arithmetic_error",
                 "killed_by_signal": "killed"}
TEXT_FAULTS = {"python_exception": "exception", "cuda_oom": "cuda_oom", "nccl_error": "nccl_error",
               "disk_full": "disk_full", "file_not_found": "file_not_found", "import_error": "import_error",
               "nan_or_inf": "nan"}
OTHER = ["oom_killed", "hang", "unknown", "bad_launch", "node_lost", "unhealthy_node"]
ALL = list(SIGNAL_FAULTS) + list(TEXT_FAULTS) + OTHER
CLASSES = [c for c in os.environ.get("CLASSES", ",".join(ALL)).split(",") if c]
for c in CLASSES:
    if c not in ALL:
        raise SystemExit(f"CLASSES: unknown class '{c}'; use a comma-separated subset of {','.join(ALL)}")


def pct(values, q):
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def memory_cgroup(limit):
    """A child of this process's v1 memory cgroup with `limit` bytes, or None."""
    try:
        with open("/proc/self/cgroup") as f:
            line = [x for x in f.read().splitlines() if x.split(":")[1] == "memory"][0]
        path = f"/sys/fs/cgroup/memory{line.split(':', 2)[2]}/ctrun-verdict-bench-{os.getpid()}"
        os.makedirs(path, exist_ok=True)
        with open(f"{path}/memory.limit_in_bytes", "w") as f:
            f.write(str(limit))
        return path
    except (OSError, IndexError):
        return None


class Daemon:
    def __init__(self):
        self.proc = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        self.endpoint = line.split("serving rendezvous on ")[1].split()[0]

    def why(self, run_id):
        r = subprocess.run([CTRUN, "status", "--why", "--json", "--rdzv-endpoint", self.endpoint,
                            "--rdzv-id", run_id], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return None
        doc = json.loads(r.stdout)
        return doc.get("verdict") if doc else None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Bench:
    def __init__(self):
        self.rng = random.Random(SEED)
        self.daemon = Daemon()
        self.work = tempfile.mkdtemp(prefix="ctrun-verdict-")
        self.cgroup = memory_cgroup(384 << 20) if "oom_killed" in CLASSES else None
        self.results = []  # (truth, predicted, right, latency_s, orphans)
        self.count = 0

    def start_nodes(self, run_id, nodes, worker_argv, extra=(), per_node=None, wrap=()):
        procs = []
        for i in range(nodes):
            env = dict(os.environ, CTRUN_VERDICT_RUN=run_id, PYTHONDONTWRITEBYTECODE="1", PYTHON_EXEC="/usr/bin/python3",
                       PYTHONUNBUFFERED="1")
            env.pop("TORCHELASTIC_ERROR_FILE", None)
            argv = [CTRUN, "--nnodes", str(nodes), "--nproc-per-node", str(NPROC), "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", self.daemon.endpoint, "--rdzv-id", run_id, "--rdzv-conf", CONF,
                    "--local-addr", f"127.0.0.{i + 1}", "--node-rank", str(i), "--max-restarts", "0",
                    "--log-dir", os.path.join(self.work, run_id, str(i)), *extra,
                    *(per_node(i) if per_node else ()), *worker_argv]
            procs.append(subprocess.Popen([*wrap, *argv], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        return procs

    def wait_verdict(self, run_id, want, deadline_s):
        """Asks until the verdict names `want` (bounded); returns the last."""
        deadline = time.monotonic() + deadline_s
        verdict = None
        while time.monotonic() < deadline:
            verdict = self.daemon.why(run_id)
            if verdict and verdict["cause_class"] == want:
                return verdict, time.monotonic()
            time.sleep(0.05)
        return verdict, time.monotonic()

    def finish(self, run_id, procs):
        for p in procs:
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        left = marked("CTRUN_VERDICT_RUN", run_id)
        signal_all(left, signal.SIGKILL)
        return len(left)

    def one(self, truth):
        self.count += 1
        run_id = f"v{self.count}"
        nodes = self.rng.choice([2, 3])
        rank = self.rng.randrange(nodes * NPROC)
        delay = round(self.rng.uniform(0.3, 1.2), 2)
        fault_py = os.path.join(WORKERS, "fault.py")
        extra, wrap, want_rank, want_node = [], (), rank, None
        if truth in SIGNAL_FAULTS or truth in TEXT_FAULTS or truth in ("oom_killed", "hang", "unknown"):
            fault = SIGNAL_FAULTS.get(truth) or TEXT_FAULTS.get(truth) or {"oom_killed": "oom", "hang": "hang",
                                                                            "unknown": "exit"}[truth]
            record = "1"
            if truth in TEXT_FAULTS and self.rng.random() < 0.5:
                record, extra = "0", ["--tee", "2", "--redirects", "0"]
            if truth == "hang":
                extra = ["--heartbeat-timeout", "1", "--hang-stacks-timeout", "0"]
            if truth == "oom_killed":
                wrap = ["sh", "-c", f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"', "sh"]
            procs = self.start_nodes(run_id, nodes, [fault_py, fault, str(delay), str(rank), record], extra,
                                     wrap=wrap)
            self.wait_exits(procs)
            ended = time.monotonic()
            verdict, seen = self.wait_verdict(run_id, truth, 10)
            latency = seen - ended
        elif truth == "bad_launch":
            extra = ["--max-restarts", "1"]
            procs = self.start_nodes(run_id, nodes, [os.path.join(WORKERS, "fail_at_import.py")], extra)
            self.wait_exits(procs)
            ended = time.monotonic()
            verdict, seen = self.wait_verdict(run_id, truth, 10)
            latency, want_rank = seen - ended, None
        else:  # node_lost, unhealthy_node: the job runs on without the node
            victim = self.rng.randrange(nodes)
            flag = os.path.join(self.work, f"{run_id}-unhealthy-{victim}")
            per_node = None
            if truth == "unhealthy_node":
                check = os.path.join(self.work, f"{run_id}-check.sh")
                with open(check, "w") as f:
                    f.write(f"#!/bin/sh\ntest ! -e {self.work}/{run_id}-unhealthy-$1\n")
                os.chmod(check, 0o755)
                per_node = lambda i: ["--health-check", f"{check} {i}", "--health-check-interval", "0.2"]  # noqa: E731
            procs = self.start_nodes(run_id, nodes, [fault_py, "hang", "3600", "99"], per_node=per_node)
            self.wait_running(run_id)
            time.sleep(delay)  # the fault's random moment, not a wait for an outcome
            fault_at = time.monotonic()
            if truth == "node_lost":
                procs[victim].send_signal(signal.SIGKILL)
            else:
                open(flag, "w").close()
            verdict, seen = self.wait_verdict(run_id, truth, 15)
            latency, want_rank, want_node = seen - fault_at, None, f"127.0.0.{victim + 1}"
            signal_all([p.pid for p in procs if p.poll() is None], signal.SIGTERM)
        orphans = self.finish(run_id, procs)
        predicted = verdict["cause_class"] if verdict else "none"
        right = predicted == truth
        if right and want_node is not None:
            right = verdict["cause_rank"] is None and verdict["cause_node"].startswith(want_node)
        elif right and want_rank is not None:
            right = verdict["cause_rank"] == want_rank
        self.results.append((truth, predicted, right, latency, orphans))
        if not right:
            print(f"  {run_id}: injected {truth} (rank {want_rank}, node {want_node}); got "
                  f"{verdict['line'] if verdict else 'no verdict'}", flush=True)

    def wait_exits(self, procs):
        for p in procs:
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                pass

    def wait_running(self, run_id):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = subprocess.run([CTRUN, "status", "--json", "--rdzv-endpoint", self.daemon.endpoint, "--rdzv-id",
                                run_id], capture_output=True, text=True, timeout=20)
            if r.returncode == 0 and json.loads(r.stdout)["runs"][0]["state"] == "running":
                return
            time.sleep(0.05)
        raise SystemExit(f"run {run_id} never ran")

    def run(self):
        schedule = [c for c in CLASSES if c != "oom_killed" or self.cgroup] * PER_CLASS
        self.rng.shuffle(schedule)
        if "oom_killed" in CLASSES and not self.cgroup:
            print("oom_killed left out: no memory cgroup of ours to limit here", flush=True)
        print(f"verdict: {len(schedule)} faults, {PER_CLASS} of each of {len(set(schedule))} classes "
              f"(seed {SEED}); work folder {self.work}", flush=True)
        try:
            for truth in schedule:
                self.one(truth)
        finally:
            self.daemon.stop()
            if self.cgroup:
                try:
                    os.rmdir(self.cgroup)
                except OSError:
                    pass
        return self.report()

    def report(self):
        classes = sorted({t for t, *_ in self.results})
        predicted = sorted({p for _, p, *_ in self.results} - set(classes))
        cols = classes + predicted
        width = max(len(c) for c in cols + ["injected"])
        print("\nconfusion matrix (rows: injected; columns: the verdict's class; * marks a wrong rank or node)")
        short = {c: c[:6] for c in cols}
        print(" " * (width + 2) + " ".join(f"{short[c]:>6}" for c in cols))
        for t in classes:
            cells = []
            for c in cols:
                n = sum(1 for tt, pp, *_ in self.results if tt == t and pp == c)
                wrong = sum(1 for tt, pp, ok, *_ in self.results if tt == t and pp == c and not ok)
                cells.append(f"{(str(n) + ('*' if wrong and c == t else '')) if n else '.':>6}")
            print(f"{t:<{width}}  " + " ".join(cells))
        right = sum(1 for r in self.results if r[2])
        total = len(self.results)
        accuracy = right / total if total else 0.0
        ended = [lat for t, _, _, lat, _ in self.results if t not in ("node_lost", "unhealthy_node")]
        running = [lat for t, _, _, lat, _ in self.results if t in ("node_lost", "unhealthy_node")]
        orphans = sum(o for *_, o in self.results)
        print(f"\n{right} of {total} right; latency after the job ended p50 {pct(ended, 0.5):.3f} s, p99 "
              f"{pct(ended, 0.99):.3f} s; from the fault (node_lost, unhealthy_node, whose jobs run on) p50 "
              f"{pct(running, 0.5):.3f} s, p99 {pct(running, 0.99):.3f} s; {orphans} orphans")
        results = {"verdict_top1_accuracy": accuracy, "verdict_latency_p99_s": pct(ended, 0.99),
                   "verdict_running_latency_p99_s": pct(running, 0.99), "verdict_orphans": orphans,
                   "verdict_faults": total}
        benchjson.write("verdict", {"seed": SEED, "per_class": PER_CLASS,
                                    "faults": [{"injected": t, "verdict": p, "right": ok, "latency_s": lat,
                                                "orphans": o} for t, p, ok, lat, o in self.results],
                                    "results": results}, ROOT)
        print(f"RESULT verdict_top1_accuracy {accuracy:.3f}")
        print(f"RESULT verdict_latency_p99_s {pct(ended, 0.99):.3f}")
        print(f"RESULT verdict_running_latency_p99_s {pct(running, 0.99):.3f}")
        print(f"RESULT verdict_orphans {orphans}")
        print(f"RESULT verdict_faults {total}")
        return 1 if orphans else 0


if __name__ == "__main__":
    sys.exit(Bench().run())
