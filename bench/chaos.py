"""Chaos: a fault every PERIOD seconds into a fault-tolerant job, and the same
schedule into ctrun's whole-job restart from checkpoints, side by side in one
run (docs/fault-tolerance.md, "Chaos").

The job: NGROUPS replica groups (default 4), each one ctrun agent with NPROC
ranks of ctrun-fashion-mnist --ft (--ft-replicas 1:GROUPS), under one ctrund
started with --state-dir. As root with `ip` and `iptables`, every group and
ctrund is a host of its own (a network namespace, tests/integration/netns.py)
so a group's network can be cut; otherwise all run on the loopback and the
`cut` kind is left out (the table says so).

Phases: the job starts and trains WARMUP steps; then BASELINE_S seconds with
no fault (the fault-free pace, in the same run); then FAULTS faults (default
MINUTES x 60 / PERIOD), one every PERIOD seconds, their kinds drawn
round-robin from a seeded shuffle (SEED) of KINDS:
  kill     a worker of a group SIGKILLed (its agent restarts the group's workers; they heal)
  agent    a group's agent SIGKILLed (its workers die with it), relaunched 1 s later
  hang     a worker SIGSTOPped for HANG_S seconds (30), then SIGCONTed
  cut      a group's host cut off the network for CUT_S seconds (5)
  slow     every worker of a group run at ~30 % duty (SIGSTOP/SIGCONT, 70 ms of
           every 100) for SLOW_S seconds (20)
  ctrund   ctrund SIGKILLed and restarted at once on the same port and --state-dir
The group of each fault is drawn (seeded) among the groups that are back from
their last fault (committed a step since its effect ended), and never the
last one, nor the one group that alone committed the latest step (a group
can fall behind without a fault, held back for being late on a loaded
machine): with the state held only in the replicas, faulting every group
that holds it loses it, which no schedule here claims to survive (a fault waits up to
PERIOD for a group to come back, else it is skipped and reported). PERIOD seconds after the last fault every stopped process is
continued and the driver writes the stop step (CTRUN_FT_STOP: the step
committed so far + STOP_AHEAD), so every group ends at the same step; then
every agent must exit 0 (a killed agent's relaunch included), and no process
of the run may be left (each carries CTRUN_CHAOS_RUN in its environment).

Counting (from every agent's stdout, each line stamped on arrival):
  committed step s: some group logged `ft step s quorum q replicas w`. The
    samples of a step are a function of the step (StepShare): step s trains
    stream positions [s*B, (s+1)*B). A committed step's ring completed, so
    every member's share is in it.
  samples lost: B x (the steps below the last committed one that no group
    committed, plus the steps committed under two different quorums).
  recovery of a fault at t: from t to the commit (by a group the fault did not
    touch) of the first step that started after t: the step after the one in
    flight at t. An upper bound: a step in flight the fault did not disturb
    still counts one more step.
  discarded: `ft discard` lines of the untouched groups until the next fault.
  goodput: committed steps per second during the faults (from the first
    fault to PERIOD after the last) over the baseline's.

--ft-exact (EXACT=1): the job runs with ctrun --ft-exact, and afterwards
the driver checks that its result does not depend on the faults: the same
job with no fault, and one process alone running every shard (one group of
--ft-replicas 1:GROUPS), each trained to the chaos run's stop step, must end
with the same bytes of parameters and optimizer state (--dump-state) as
the chaos run's groups.

The restart comparison (RESTART=1, the default; 0 skips it): the same NGROUPS
agents as one job (--nnodes GROUPS, --max-restarts, checkpoint every CKPT_EVERY
steps) and the same schedule; a step counts once (progress: the highest step
reached), so the steps recomputed after each restart are lost time.

Env knobs: NGROUPS (4), NPROC (1), PERIOD (10), MINUTES (10), FAULTS, KINDS
(kill,agent,hang,cut,slow,ctrund), SEED (1), HANG_S (30), CUT_S (5), SLOW_S
(20), BASELINE_S (60), WARMUP (20), STOP_AHEAD (10), BATCH (16), CKPT_EVERY
(20), TRAIN_LIMIT (8192 images: a restarted worker loads no more), RESTART (1), FT (1; 0: the restart
comparison alone), EXACT (0), QUICK=1 (2 minutes, BASELINE_S 20: a smoke run, not a
measurement). JSON via bench/benchjson.py; CHART (default
$CTRUN_BUILD_DIR/bench/chaos-steps.png) draws committed steps against time
with the faults marked. Exits 1 when a check fails (an agent's exit, an
orphan, a lost sample, a fault kind missing, EXACT's states differing)."""
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import benchjson  # noqa: E402
import ft_jobs  # noqa: E402
from procs import children, marked, signal_all  # noqa: E402

QUICK = os.environ.get("QUICK") == "1"
GROUPS = int(os.environ.get("NGROUPS", "4"))
NPROC = int(os.environ.get("NPROC", "1"))
PERIOD = float(os.environ.get("PERIOD", "10"))
MINUTES = float(os.environ.get("MINUTES", "2" if QUICK else "10"))
FAULTS = int(os.environ.get("FAULTS", str(int(MINUTES * 60 / PERIOD))))
ALL_KINDS = ["kill", "agent", "hang", "cut", "slow", "ctrund"]
KINDS = [k for k in os.environ.get("KINDS", ",".join(ALL_KINDS)).split(",") if k]
SEED = int(os.environ.get("SEED", "1"))
HANG_S = float(os.environ.get("HANG_S", "30"))
CUT_S = float(os.environ.get("CUT_S", "5"))
SLOW_S = float(os.environ.get("SLOW_S", "20"))
BASELINE_S = float(os.environ.get("BASELINE_S", "20" if QUICK else "60"))
WARMUP = int(os.environ.get("WARMUP", "20"))
STOP_AHEAD = int(os.environ.get("STOP_AHEAD", "10"))
BATCH = int(os.environ.get("BATCH", "16"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "20"))
TRAIN_LIMIT = int(os.environ.get("TRAIN_LIMIT", "8192"))
RESTART = os.environ.get("RESTART", "1") == "1"
FT = os.environ.get("FT", "1") == "1"
EXACT = os.environ.get("EXACT", "0") == "1"
STEP_LINE = re.compile(r"^ft step (\d+) quorum (\d+) replicas (\d+) loss")
DISCARD_LINE = re.compile(r"^ft discard step (\d+) quorum (\d+)")
PLAIN_LINE = re.compile(r"^epoch \d+ step (\d+): loss")
HOLDING = ("hang", "cut", "slow")  # kinds that hold their group for a while

for kind in KINDS:
    if kind not in ALL_KINDS:
        raise SystemExit(f"KINDS: unknown fault kind '{kind}'; use a comma-separated subset of {','.join(ALL_KINDS)}")
if GROUPS < 2 or NPROC < 1 or PERIOD <= 0 or FAULTS < 0:
    raise SystemExit("NGROUPS must be at least 2, NPROC at least 1, PERIOD positive and FAULTS not negative")


class Hosts:
    """Where each process runs: network namespaces (host 0: ctrund, host g+1:
    group g) when the driver may make them, else the loopback."""

    def __init__(self):
        self.netns = None
        if "cut" in KINDS and os.geteuid() == 0:
            import netns
            if netns.available():
                self.netns = netns.Hosts(GROUPS + 1, "10.213.81", f"cx{os.getpid() % 100000}")
                self.netns.up()

    def ip(self, host):
        return self.netns.ip(host) if self.netns else f"127.0.0.{host + 1}"

    def argv(self, host, argv):
        return self.netns.command(host, argv) if self.netns else argv

    def cut(self, host, on):
        if on:
            self.netns.partition(host)
        else:
            self.netns.heal(host)

    def down(self):
        if self.netns:
            self.netns.down()


class Run:
    """One job (ft or restart) under one ctrund; every agent's stdout lines
    stamped on arrival, by group."""

    def __init__(self, hosts, workdir, ft, groups=GROUPS, stop=None):
        """`groups` agents (of --ft-replicas 1:GROUPS); `stop`: the step the
        run ends at, known in advance (else finish() decides it)."""
        self.hosts, self.workdir, self.ft = hosts, workdir, ft
        os.makedirs(workdir, exist_ok=True)
        self.marker = f"{os.getpid()}-{os.path.basename(workdir)}"
        self.run_id = "chaos-" + os.path.basename(workdir)
        self.stop_path = os.path.join(workdir, "stop")
        self.stop_step = stop
        if stop is not None:
            self.write_stop(stop)
        self.lines = {g: [] for g in range(groups)}  # g -> [(t, line)]
        self.agents = {g: [] for g in range(groups)}  # g -> [Popen], the last one current
        self.stopped = set()  # pids SIGSTOPped by a fault not yet over
        self.lock = threading.Lock()
        self.port = 0
        self.ctrund = None
        self.start_ctrund()
        for g in range(groups):
            self.start_agent(g)

    def start_ctrund(self):
        argv = [ft_jobs.CTRUND, "--listen", f"{self.hosts.ip(0)}:{self.port}", "--state-dir",
                os.path.join(self.workdir, "ctrund-state")]
        log = open(os.path.join(self.workdir, "ctrund.log"), "a")
        self.ctrund = subprocess.Popen(self.hosts.argv(0, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, env=self.env())
        deadline = time.monotonic() + 20
        while True:
            line = self.ctrund.stdout.readline()
            log.write(line)
            m = re.search(r"serving rendezvous on \S+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
            if not line or time.monotonic() > deadline:
                raise SystemExit(f"ctrund did not start: {line.strip()}")

        def drain(out=self.ctrund.stdout):
            for line in out:
                log.write(f"{time.time():.3f} {line}")
            log.close()

        threading.Thread(target=drain, daemon=True).start()

    def env(self):
        env = ft_jobs.base_env()
        env.pop("CTRUN_FT_FIXED_STALL", None)  # the stall times under test
        env["CTRUN_CHAOS_RUN"] = self.marker
        env["CTRUN_FT_STOP"] = self.stop_path
        env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = "5"
        if self.hosts.netns:
            env["GLOO_SOCKET_IFNAME"] = "eth0"  # a host's name resolves to the loopback there
        return env

    def start_agent(self, g):
        endpoint = f"{self.hosts.ip(0)}:{self.port}"
        args = [ft_jobs.CTRUN, "--events-file", os.path.join(self.workdir, f"events{g}.jsonl"),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", self.run_id,
                "--local-addr", self.hosts.ip(g + 1), "--nproc-per-node", str(NPROC), "--max-restarts", "1000"]
        args += ["--ft-replicas", f"1:{GROUPS}"] if self.ft else ["--nnodes", str(GROUPS)]
        args += ["--no-python", ft_jobs.TRAINER, "--train-limit", str(TRAIN_LIMIT), "--test-limit", "64",
                 "--batch-size", str(BATCH), "--deterministic", "--max-steps", "1000000"]
        if self.ft and EXACT:
            args.insert(args.index("--no-python"), "--ft-exact")
        if self.ft:
            args += ["--ft", "--log-every", "0", "--dump-state", os.path.join(self.workdir, "state")]
        else:
            args += ["--epochs", "100000", "--log-every", "1", "--checkpoint-dir", os.path.join(self.workdir, "ckpt"),
                     "--checkpoint-every", str(CKPT_EVERY)]
        err = open(os.path.join(self.workdir, f"err{g}.{len(self.agents[g])}.log"), "w")
        proc = subprocess.Popen(self.hosts.argv(g + 1, args), env=self.env(), stdout=subprocess.PIPE, stderr=err,
                                text=True, cwd=self.workdir)
        err.close()
        self.agents[g].append(proc)
        threading.Thread(target=self._read, args=(g, proc), daemon=True).start()

    def _read(self, g, proc):
        for line in proc.stdout:
            stamped = (time.time(), line.rstrip("\n"))
            with self.lock:
                self.lines[g].append(stamped)

    def agent(self, g):
        return self.agents[g][-1]

    def workers(self, g):
        """The agent's training processes (not its orphan guard)."""
        trainer = os.path.realpath(ft_jobs.TRAINER)
        out = []
        for pid in children(self.agent(g).pid):
            try:
                if os.readlink(f"/proc/{pid}/exe") == trainer:
                    out.append(pid)
            except OSError:
                pass
        return out

    def progress(self):
        """The highest step committed (ft) or reached (restart) so far, -1 before any."""
        pattern = STEP_LINE if self.ft else PLAIN_LINE
        best = -1
        with self.lock:
            for lines in self.lines.values():
                for _, line in lines[-50:]:
                    m = pattern.match(line)
                    if m:
                        best = max(best, int(m.group(1)))
        return best

    def wait_progress(self, step, timeout):
        deadline = time.monotonic() + timeout
        while self.progress() < step:
            if time.monotonic() > deadline:
                self.dump_tails()
                raise SystemExit(f"{self.workdir}: step {step} not reached in {timeout:.0f} s")
            time.sleep(0.1)

    def dump_tails(self):
        for g in self.agents:
            for i in range(len(self.agents[g])):
                path = os.path.join(self.workdir, f"err{g}.{i}.log")
                with open(path) as f:
                    tail = f.read().splitlines()[-12:]
                print(f"--- {path}:\n" + "\n".join(tail), file=sys.stderr)

    def finish(self, timeout):
        """Continues every stopped process, writes the stop step, waits for
        every agent; the exit codes of the current agents."""
        signal_all(list(self.stopped), signal.SIGCONT)
        if self.stop_step is None:
            self.stop_step = self.progress() + STOP_AHEAD
            self.write_stop(self.stop_step)
        deadline = time.monotonic() + timeout
        codes = {}
        for g in self.agents:
            try:
                codes[g] = self.agent(g).wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[g] = None
        return codes

    def write_stop(self, step):
        tmp = self.stop_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{step}\n")
        os.rename(tmp, self.stop_path)

    def state(self):
        """The bytes of one rank-0 --dump-state file (None without one)."""
        names = sorted(n for n in os.listdir(self.workdir) if n.startswith("state.") and n.endswith(".0"))
        if not names:
            return None
        with open(os.path.join(self.workdir, names[0]), "rb") as f:
            return f.read()

    def differing_states(self):
        """The --dump-state files (state.<group>.<rank>) of each rank that
        differ from the first group's; every group that trained to the stop
        step wrote one (a group told the run was over writes none)."""
        by_rank = {}
        for name in sorted(os.listdir(self.workdir)):
            if name.startswith("state."):
                by_rank.setdefault(name.rsplit(".", 1)[1], []).append(os.path.join(self.workdir, name))
        differ = []
        for paths in by_rank.values():
            with open(paths[0], "rb") as f:
                first = f.read()
            for p in paths[1:]:
                with open(p, "rb") as f:
                    if f.read() != first:
                        differ.append(os.path.basename(p))
        if not by_rank:
            differ.append("no state was dumped")
        return differ

    def kill_all(self):
        for procs in self.agents.values():
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=30)
        if self.ctrund.poll() is None:
            self.ctrund.kill()
        self.ctrund.wait(timeout=30)
        for g, lines in self.lines.items():  # the workers' lines, stamped, for a look afterwards
            with open(os.path.join(self.workdir, f"out{g}.log"), "w") as f:
                f.writelines(f"{t:.3f} {line}\n" for t, line in lines)


class Chaos:
    """The schedule, injected into one Run."""

    def __init__(self, run, kinds, rng):
        self.run, self.kinds, self.rng = run, kinds, rng
        self.faults = []  # {"t", "kind", "group"}
        self.busy = {}  # group -> when its last fault's effect ends (it is back once it commits after that)
        self.threads = []

    def recovered(self, g):
        """g committed a step since its last fault's effect ended."""
        end = self.busy.get(g)
        if end is None:
            return True
        with self.run.lock:
            if self.run.ft:
                return any(t > end and STEP_LINE.match(line) for t, line in reversed(self.run.lines[g][-20:]))
            # The whole-job restart: one job, whose rank 0 alone logs its steps;
            # g is back once the job steps again after g's fault.
            return any(t > end and PLAIN_LINE.match(line)
                       for lines in self.run.lines.values() for t, line in reversed(lines[-20:]))

    def sole_holder(self):
        """The fault-tolerant run's group that alone committed its latest
        step (the others behind it: held back for being late, or healing),
        or None. Faulting it would lose the steps only it holds."""
        if not self.run.ft:
            return None
        last = {}
        with self.run.lock:
            for g in range(GROUPS):
                steps = [int(m.group(1)) for _, line in self.run.lines[g][-20:] if (m := STEP_LINE.match(line))]
                last[g] = max(steps, default=-1)
        top = max(last.values(), default=-1)
        holders = [g for g, step in last.items() if step == top]
        return holders[0] if top >= 0 and len(holders) == 1 else None

    def pick_group(self):
        """A group to fault, never the last one holding the run's state: with
        in-memory replicas, faulting every group at once loses the state,
        which no schedule here claims to survive. So never the one group that
        alone committed the latest step either (on a loaded machine a group
        can fall behind without a fault: held back for being late). Waits up
        to PERIOD for a faulted group to be back; None when none came back."""
        deadline = time.time() + PERIOD
        while True:
            free = [g for g in range(GROUPS) if self.recovered(g)]
            if len(free) >= 2 or time.time() > deadline:
                break
            time.sleep(0.05)
        if len(free) < 2:
            return None
        holder = self.sole_holder()
        return self.rng.choice([g for g in free if g != holder])

    def inject(self, kind):
        run = self.run
        g = None if kind == "ctrund" else self.pick_group()
        now = time.time()
        fault = {"t": now, "kind": kind, "group": g}
        if kind != "ctrund" and g is None:
            fault["skipped"] = "every other group was still recovering from an earlier fault"
        elif kind == "kill":
            workers = run.workers(g)
            if not workers:
                fault["skipped"] = "no worker running"
            else:
                signal_all([self.rng.choice(workers)], signal.SIGKILL)
                self.busy[g] = now
        elif kind == "agent":
            run.agent(g).kill()
            self.later(1.0, lambda: run.start_agent(g))
            self.busy[g] = now + 1.0
        elif kind == "hang":
            workers = run.workers(g)
            if workers:
                victim = self.rng.choice(workers)
                signal_all([victim], signal.SIGSTOP)
                run.stopped.add(victim)
                self.later(HANG_S, lambda: self.resume([victim]))
                self.busy[g] = now + HANG_S
            else:
                fault["skipped"] = "no worker running"
        elif kind == "cut":
            run.hosts.cut(g + 1, True)
            self.later(CUT_S, lambda: run.hosts.cut(g + 1, False))
            self.busy[g] = now + CUT_S
        elif kind == "slow":
            self.busy[g] = now + SLOW_S
            t = threading.Thread(target=self.slow, args=(g, now + SLOW_S), daemon=True)
            t.start()
            self.threads.append(t)
        elif kind == "ctrund":
            run.ctrund.kill()
            run.ctrund.wait(timeout=30)
            run.start_ctrund()
        self.faults.append(fault)

    def resume(self, pids):
        signal_all(pids, signal.SIGCONT)
        self.run.stopped.difference_update(pids)

    def slow(self, g, until):
        while time.time() < until and self.run.agent(g).poll() is None:
            workers = self.run.workers(g)
            signal_all(workers, signal.SIGSTOP)
            self.run.stopped.update(workers)
            time.sleep(0.07)
            self.resume(workers)
            time.sleep(0.03)

    def later(self, delay, fn):
        t = threading.Timer(delay, fn)
        t.start()
        self.threads.append(t)

    def join(self):
        for t in self.threads:
            t.join(timeout=max(HANG_S, SLOW_S) + 30)


def schedule(kinds, count, seed):
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    return [order[i % len(order)] for i in range(count)], rng


def drive(run, kinds):
    """Warm-up, the baseline, the faults; the phase times."""
    run.wait_progress(WARMUP, 180)
    t0 = time.time()
    time.sleep(BASELINE_S)
    t1 = time.time()
    order, rng = schedule(kinds, FAULTS, SEED)
    chaos = Chaos(run, kinds, rng)
    for i, kind in enumerate(order):
        delay = t1 + i * PERIOD - time.time()
        if delay > 0:
            time.sleep(delay)
        chaos.inject(kind)
    time.sleep(max(0.0, t1 + FAULTS * PERIOD - time.time()))
    t2 = time.time()
    chaos.join()
    return {"baseline": (t0, t1), "chaos": (t1, t2)}, chaos.faults


def committed(run):
    """step -> {"t": first commit time, "quorums": set, "groups": {g: t}}."""
    steps = {}
    for g, lines in run.lines.items():
        for t, line in lines:
            m = STEP_LINE.match(line)
            if m:
                s = steps.setdefault(int(m.group(1)), {"t": t, "quorums": set(), "groups": {}})
                s["t"] = min(s["t"], t)
                s["quorums"].add(int(m.group(2)))
                s["groups"].setdefault(g, t)
    return steps


def reached(run):
    """Restart runs: step -> the first time any rank logged it."""
    steps = {}
    for lines in run.lines.values():
        for t, line in lines:
            m = PLAIN_LINE.match(line)
            if m:
                s = int(m.group(1))
                steps[s] = min(steps.get(s, t), t)
    return steps


def rate(step_times, span):
    """Steps first reached within span (t0, t1), per second."""
    t0, t1 = span
    inside = [s for s, t in step_times.items() if t0 <= t < t1]
    return len(inside) / (t1 - t0)


def recoveries(step_times, faults, touched):
    """Per fault: seconds from it to the first commit, by a group it did not
    touch, of the step after the one in flight. `touched(fault)` -> groups."""
    out = []
    for f in faults:
        before = [s for s, info in step_times.items() if info["t"] <= f["t"]]
        target = (max(before) + 2) if before else 0
        later = [info for s, info in step_times.items() if s >= target]
        times = [t for info in later for g, t in info["groups"].items() if g not in touched(f) and t >= f["t"]]
        out.append(min(times) - f["t"] if times else None)
    return out


def restart_recoveries(step_times, faults):
    out = []
    for f in faults:
        before = [s for s, t in step_times.items() if t <= f["t"]]
        best = max(before) if before else -1
        after = [t for s, t in step_times.items() if s > best + 1 and t >= f["t"]]
        out.append(min(after) - f["t"] if after else None)
    return out


def pct(values, q):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def ft_phase(hosts, tmp, kinds, failures):
    """The fault-tolerant job under the schedule: its report, its table printed."""
    ft = Run(hosts, os.path.join(tmp, "ft"), True)
    try:
        phases, faults = drive(ft, kinds)
        codes = ft.finish(120)
    finally:
        ft.kill_all()
    orphans = marked("CTRUN_CHAOS_RUN", ft.marker)
    steps = committed(ft)
    step_t = {s: info["t"] for s, info in steps.items()}
    top = max(steps) if steps else -1
    missing = [s for s in range(top + 1) if s not in steps]
    twice = [s for s, info in steps.items() if len(info["quorums"]) > 1]
    lost = (len(missing) + len(twice)) * BATCH * NPROC * GROUPS

    def touched(f):
        return set() if f["group"] is None else {f["group"]}

    for f, r in zip(faults, recoveries(steps, faults, touched)):
        f["recovery_s"] = r
    for i, f in enumerate(faults):  # steps discarded (step, quorum), as the untouched groups saw them
        end = faults[i + 1]["t"] if i + 1 < len(faults) else phases["chaos"][1]
        f["discarded"] = len({m.groups() for g, lines in ft.lines.items() if g not in touched(f)
                              for t, line in lines if f["t"] <= t < end for m in [DISCARD_LINE.match(line)] if m})
    base = rate(step_t, phases["baseline"])
    under = rate(step_t, phases["chaos"])
    differ = ft.differing_states()
    if differ:
        failures.append(f"the groups' final states differ: {differ}")
    bad_exits = {g: c for g, c in codes.items() if c != 0}
    if bad_exits:
        failures.append(f"agents exited {bad_exits} (each must exit 0)")
        ft.dump_tails()
    if orphans:
        failures.append(f"processes left after the run: {orphans}")
    if lost:
        failures.append(f"{lost} samples lost: steps never committed {missing[:10]}, "
                        f"committed under two quorums {twice[:10]}")
    injected = [f for f in faults if "skipped" not in f]
    for kind in kinds:
        if FAULTS >= len(kinds) and not any(f["kind"] == kind for f in injected):
            failures.append(f"no '{kind}' fault was injected")
    unrecovered = sum(1 for f in injected if f["recovery_s"] is None)
    if unrecovered:
        failures.append(f"{unrecovered} fault(s) with no committed step after them")
    print(f"\n--ft-replicas 1:{GROUPS}: {GROUPS} groups x {NPROC} rank(s), batch {BATCH} per rank; baseline "
          f"{base:.2f} steps/s, under chaos {under:.2f} steps/s; {top + 1} steps committed, {lost} samples lost")
    print(f"{'kind':<8} {'count':>5} {'recovery p50 s':>15} {'p99 s':>7} {'discarded':>9}")
    for kind in kinds:
        mine = [f for f in injected if f["kind"] == kind]
        r = [f["recovery_s"] for f in mine]
        print(f"{kind:<8} {len(mine):>5} {fmt(pct(r, 50)):>15} {fmt(pct(r, 99)):>7} "
              f"{sum(f['discarded'] for f in mine):>9}", flush=True)
    return {"baseline_steps_per_s": base, "chaos_steps_per_s": under, "goodput": under / base if base else None,
            "samples_lost": lost, "exits": codes, "faults": faults, "steps": top + 1, "stop_step": ft.stop_step,
            "state": ft.state(),
            "curve": sorted((t - phases["chaos"][0], s) for s, t in step_t.items())}


def exact_phase(hosts, tmp, ft, failures):
    """EXACT=1: the chaos run's state against the same job with no fault and
    against one process running every shard, both to the same stop step."""
    out = {"stop_step": ft["stop_step"], "runs": {}}
    for name, groups in (("no_faults", GROUPS), ("one_process", 1)):
        run = Run(hosts, os.path.join(tmp, name), True, groups=groups, stop=ft["stop_step"])
        try:
            codes = run.finish(600)
        finally:
            run.kill_all()
        same = run.state() is not None and run.state() == ft["state"]
        out["runs"][name] = {"groups": groups, "exits": codes, "same_bits": same}
        if set(codes.values()) != {0}:
            failures.append(f"--ft-exact's {name} run: agents exited {codes}")
        elif not same:
            failures.append(f"--ft-exact: the {name} run's final state differs from the chaos run's")
    print(f"\n--ft-exact: the chaos run's state at step {ft['stop_step']} against "
          + ", ".join(f"{n} ({r['groups']} group{'s' if r['groups'] > 1 else ''}): "
                      f"{'the same bits' if r['same_bits'] else 'DIFFERENT'}" for n, r in out["runs"].items()),
          flush=True)
    out["equal"] = all(r["same_bits"] for r in out["runs"].values())
    return out


def restart_phase(hosts, tmp, kinds):
    """The same job as one DDP job with whole-job restarts under the same schedule."""
    rs = Run(hosts, os.path.join(tmp, "restart"), False)
    try:
        phases, faults = drive(rs, kinds)
    finally:
        rs.kill_all()
    steps = reached(rs)
    base = rate(steps, phases["baseline"])
    # Progress: new steps only (a step recomputed after a restart is not progress).
    t1, t2 = phases["chaos"]
    before = max([s for s, t in steps.items() if t < t1], default=0)
    after = max([s for s, t in steps.items() if t < t2], default=0)
    under = (after - before) / (t2 - t1)
    for f, r in zip(faults, restart_recoveries(steps, faults)):
        f["recovery_s"] = r
    print(f"\nwhole-job restart (--nnodes {GROUPS}, a checkpoint every {CKPT_EVERY} steps): baseline "
          f"{base:.2f} steps/s, new steps under chaos {under:.2f} steps/s")
    print(f"{'kind':<8} {'count':>5} {'recovery p50 s':>15} {'p99 s':>7}")
    for kind in kinds:
        r = [f["recovery_s"] for f in faults if f["kind"] == kind and "skipped" not in f]
        print(f"{kind:<8} {len(r):>5} {fmt(pct(r, 50)):>15} {fmt(pct(r, 99)):>7}", flush=True)
    return {"baseline_steps_per_s": base, "chaos_steps_per_s": under, "goodput": under / base if base else None,
            "faults": faults}


def main():
    ft_jobs.check_build()
    hosts = Hosts()
    kinds = [k for k in KINDS if k != "cut" or hosts.netns]
    if "cut" in KINDS and not hosts.netns:
        print("# cut left out: it needs root, ip and iptables for network namespaces", flush=True)
    tmp = tempfile.mkdtemp(prefix="ctrun-chaos-")
    failures = []
    report = {"groups": GROUPS, "nproc": NPROC, "ft_exact": EXACT, "batch": BATCH, "period_s": PERIOD, "faults": FAULTS,
              "kinds": kinds, "seed": SEED, "hang_s": HANG_S, "cut_s": CUT_S, "slow_s": SLOW_S,
              "netns": bool(hosts.netns)}
    print(f"chaos: a fault every {PERIOD:g} s, {FAULTS} faults of {','.join(kinds)} (seed {SEED}; hang "
          f"{HANG_S:g} s, cut {CUT_S:g} s, slow {SLOW_S:g} s); work folder {tmp}", flush=True)
    try:
        if FT:
            report["ft"] = ft_phase(hosts, tmp, kinds, failures)
            if EXACT:
                report["exact"] = exact_phase(hosts, tmp, report["ft"], failures)
            report["ft"].pop("state")
        if RESTART:
            report["restart"] = restart_phase(hosts, tmp, kinds)
    finally:
        hosts.down()
    print("\njson:", benchjson.write("chaos", report, os.path.join(ft_jobs.HERE, ".."), path=os.environ.get("JSON")))
    if FT:
        ft = report["ft"]
        injected = [f for f in ft["faults"] if "skipped" not in f]
        hang_like = [f["recovery_s"] for f in injected if f["kind"] in HOLDING]
        draw(report)
        print(f"RESULT chaos_goodput_ft {fmt(ft['goodput'], 3)}")
    if "restart" in report:
        print(f"RESULT chaos_goodput_restart {fmt(report['restart']['goodput'], 3)}")
    if FT:
        print(f"RESULT chaos_recovery_p99_s {fmt(pct([f['recovery_s'] for f in injected], 99), 3)}")
        print(f"RESULT chaos_hang_recovery_p99_s {fmt(pct(hang_like, 99), 3)}")
        print(f"RESULT chaos_samples_lost {ft['samples_lost']}")
        print(f"RESULT chaos_faults {len(injected)}")
    if failures:
        for f in failures:
            print(f"FAILED: {f}", file=sys.stderr)
        sys.exit(1)


def draw(report):
    chart = os.environ.get("CHART", os.path.join(ft_jobs.BUILD, "bench", "chaos-steps.png"))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# no chart: python3-matplotlib is not installed")
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    curve = report["ft"]["curve"]
    ax.plot([t for t, _ in curve], [s for _, s in curve], ".", markersize=2, label="committed step (--ft)")
    t1 = min(f["t"] for f in report["ft"]["faults"]) if report["ft"]["faults"] else 0
    for f in report["ft"]["faults"]:
        ax.axvline(f["t"] - t1, color="grey", linewidth=0.5)
        ax.text(f["t"] - t1, 0, f["kind"], rotation=90, fontsize=6, va="bottom")
    ax.set_xlabel("seconds since the first fault")
    ax.set_ylabel("committed step")
    ax.legend()
    os.makedirs(os.path.dirname(chart), exist_ok=True)
    fig.savefig(chart, dpi=120, bbox_inches="tight")
    print(f"# chart: {chart}")


if __name__ == "__main__":
    main()
