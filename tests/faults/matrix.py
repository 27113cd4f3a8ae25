"""ctrun's fault matrix: real agents, real Gloo workers that checkpoint, one
injected fault per case, and three checks after each: the expected outcome,
zero orphan processes, an intact checkpoint.

Used by test_faults.py (CTest) and bench/faults.py (N runs, with torchrun
beside it). Every wait is on an event: a FIFO line from a worker, a process
exit, or a bounded poll of a log file with a deadline."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import harness as h  # noqa: E402
import netns  # noqa: E402

TRAIN = os.path.join(HERE, "workers", "ckpt_train.py")
TORCHRUN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "torchrun_compat.py")
# The cases torchrun (torch 1.13, c10d) can run too: bench/faults.py runs them beside ctrun.
TORCHRUN_CASES = ("worker_sigkill", "worker_exit", "agent_sigkill")
FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=2,join_timeout=30"
TOTAL_STEPS = 60


class CaseFailed(Exception):
    pass


def reserved_port():
    """A port for torchrun 1.13's agents (bench/faults.py only): its host
    cannot bind port 0 and say which port it got. ctrun's runs never use
    this: their host binds port 0 and logs the port (Run.agent)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Result:
    def __init__(self, case, expected):
        self.case = case
        self.expected = expected
        self.outcome = "-"
        self.recovery_s = None
        self.orphans = 0
        self.ok = False
        self.xfail = None    # reason, when the case cannot run as designed yet
        self.skipped = None  # reason, when this machine cannot run it
        self.detail = ""

    def row(self):
        rec = "-" if self.recovery_s is None else f"{self.recovery_s:.2f}"
        verdict = ("SKIP" if self.skipped else "XFAIL" if self.xfail else "ok" if self.ok else "FAIL")
        note = self.skipped or self.xfail or self.detail
        return f"{self.case:<18} {verdict:<5} {self.outcome:<34} {rec:>8} {self.orphans:>7}  {note}"


HEADER = f"{'case':<18} {'':<5} {'outcome':<34} {'recov_s':>8} {'orphans':>7}  note"


class Run:
    """One case's processes, FIFO and files; `close` leaves nothing behind."""

    def __init__(self, name, launcher="ctrun"):
        self.name = name
        self.launcher = launcher
        self.dir = tempfile.mkdtemp(prefix=f"ctrun_fault_{name}_")
        self.fifo = h.Fifo(self.dir)
        self.ckpt_dir = os.path.join(self.dir, "ckpt")
        os.mkdir(self.ckpt_dir)
        # The rendezvous port: ctrun's first agent hosts on port 0 and logs
        # the one it bound; torchrun's agents need one chosen in advance.
        self.port = reserved_port() if launcher == "torchrun" else None
        self.agents = []
        self.logs = []
        self.others = []  # daemons
        self.lines = []   # (monotonic time, line)
        self.pending = []
        self.pids = set()  # workers and their children seen on the FIFO
        self.sessions = set()  # session ids whose every member must be gone at the end
        self.hosts = None

    def env(self, **extra):
        base = dict(ANNOUNCE=self.fifo.path, CKPT_DIR=self.ckpt_dir, TOTAL_STEPS=TOTAL_STEPS,
                    STEP_SECONDS="0.05", TORCH_ELASTIC_SHUTDOWN_TIMEOUT="5")
        base.update(extra)
        return h.base_env(**base)

    def agent(self, index, nnodes, conf=FAST, extra=(), env=None, endpoint=None, addr=None):
        if self.launcher == "torchrun":
            return self.torchrun_agent(index, nnodes, conf, extra, env)
        hosting = endpoint is None and self.port is None
        if hosting and "is_host=0" in conf:
            raise CaseFailed("the first agent of a case must host the rendezvous (it binds port 0)")
        args = [h.ctrun_bin(), "--nnodes", nnodes, "--nproc-per-node", "1",
                "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint or f"127.0.0.1:{0 if hosting else self.port}",
                "--rdzv-id", f"fault-{self.name}", "--local-addr", addr or f"127.0.0.{index + 1}",
                "--rdzv-conf", conf, "--tee", "3", *extra, TRAIN]
        if self.hosts is not None:
            args = self.hosts.command(index, args)
        log = open(os.path.join(self.dir, f"agent{index}.log"), "w+")
        p = subprocess.Popen(args, env=env or self.env(), stdout=log, stderr=subprocess.STDOUT, text=True)
        self.agents.append(p)
        self.logs.append(log)
        if hosting:
            self.port = self.hosted_port(len(self.logs) - 1, p)
        return p

    def hosted_port(self, index, p, timeout=60):
        """The port the hosting agent (log `index`, process `p`) bound, from
        its "hosting the rendezvous ... on HOST:PORT" line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = h.HOSTING.search(self.log(index))
            if m:
                return int(m.group(2))
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise CaseFailed(f"the hosting agent logged no port (exit {p.poll()}): {self.log(index)[-600:]}")

    def torchrun_agent(self, index, nnodes, conf, extra, env):
        """The same agent as torchrun 1.13 runs it: underscored flags, integer
        timeouts, no keep-alive settings (fixed at 5 s x 3), no --local-addr."""
        keep = [kv for kv in conf.split(",") if not kv.startswith("keep_alive")]
        args = [h.PYTHON, TORCHRUN, "--nnodes", nnodes, "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{self.port}",
                "--rdzv_id", f"fault-{self.name}", "--rdzv_conf", ",".join(keep),
                "--monitor_interval", "0.1", *["--" + a[2:].replace("-", "_") if a.startswith("--") else a for a in extra],
                TRAIN]
        log = open(os.path.join(self.dir, f"agent{index}.log"), "w+")
        p = subprocess.Popen(args, env=env or self.env(), stdout=log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        self.agents.append(p)
        self.logs.append(log)
        self.sessions.add(p.pid)
        return p

    def log(self, index):
        self.logs[index].flush()
        with open(self.logs[index].name) as f:
            return f.read()

    def wait_line(self, pred, timeout, what):
        """Returns (time, line) of the first unconsumed line matching pred."""
        deadline = time.monotonic() + timeout
        while True:
            for i, (t, line) in enumerate(self.pending):
                if pred(line):
                    del self.pending[i]
                    return t, line
            left = deadline - time.monotonic()
            if left <= 0:
                raise CaseFailed(f"timed out waiting for {what}; worker lines: {[l for _, l in self.lines][-8:]}")
            try:
                line = self.fifo.lines(1, timeout=left)[0]
            except TimeoutError:
                continue
            now = time.monotonic()
            self.lines.append((now, line))
            self.pending.append((now, line))
            if line.startswith("corrupt"):
                raise CaseFailed(f"checkpoint check failed in a worker: {line}")
            if line.startswith("start "):
                f = line.split()
                self.pids.update((int(f[1]), int(f[2])))
                self.sessions.add(int(f[1]))

    def starts(self, count, timeout, world=None, after=None):
        """Waits for `count` start lines (of world `world`); returns them as dicts and the last time."""
        out, last = [], None
        for _ in range(count):
            t, line = self.wait_line(
                lambda l: l.startswith("start ") and (world is None or int(l.split()[3]) == world),
                timeout, f"{count} workers to start" + (f" at world {world}" if world else ""))
            f = line.split()
            out.append(dict(pid=int(f[1]), child=int(f[2]), world=int(f[3]), restart=int(f[4]),
                            group_rank=int(f[5]), rank=int(f[6]), step=int(f[7])))
            last = t
        return out, last

    def step(self, n, timeout=60):
        t, _ = self.wait_line(lambda l: l.startswith("step ") and int(l.split()[1]) >= n, timeout, f"step {n}")
        return t

    def wait_exit(self, procs, timeout):
        deadline = time.monotonic() + timeout
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                raise CaseFailed(f"agent pid {p.pid} still running after {timeout} s")
        return codes

    def check_checkpoint(self, final_step=None):
        """The file parses, its tensor matches its step, resumes never went back."""
        path = os.path.join(self.ckpt_dir, "ckpt.json")
        with open(path) as f:
            state = json.load(f)
        if state["tensor"] != [float(state["step"])] * 4:
            raise CaseFailed(f"checkpoint tensor {state['tensor']} does not match step {state['step']}")
        if final_step is not None and state["step"] != final_step:
            raise CaseFailed(f"checkpoint at step {state['step']}, expected {final_step}")
        resumed = [int(l.split()[7]) for _, l in self.lines if l.startswith("start ")]
        if resumed != sorted(resumed):
            raise CaseFailed(f"a restart resumed from an earlier step: {resumed}")
        return state["step"]

    def orphans(self, timeout=10):
        """Waits for every worker, worker child and agent to be gone; returns the count left."""
        pids = set(self.pids) | {p.pid for p in self.agents}
        # Processes in a worker's session that were never announced count too.
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    if int(fields[3]) in self.sessions:
                        pids.add(int(entry))
                except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                    pass
        left = h.wait_gone(sorted(pids), timeout=timeout)
        h.kill_all(left)
        return len(left)

    def close(self):
        for p in self.agents + self.others:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                p.wait(timeout=10)
        h.kill_all([pid for pid in self.pids if not h.is_zombie_or_gone(pid)])
        for sid in self.sessions:
            try:
                os.killpg(sid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for log in self.logs:
            log.close()
        self.fifo.close()
        if self.hosts is not None:
            self.hosts.down()
        if os.environ.get("CTRUN_FAULTS_KEEP"):
            print(f"kept {self.dir}", file=sys.stderr)
        else:
            subprocess.run(["rm", "-rf", self.dir], check=False)


def warnings_of(log, limit=1200):
    """The agent's warning and error lines (what says why it failed), else its tail."""
    lines = [l for l in log.splitlines() if "] warning:" in l or "] error:" in l]
    return ("\n".join(lines) or log)[-limit:]


def finish_ok(run, res, survivors, timeout=90):
    codes = run.wait_exit(survivors, timeout)
    for p, code in zip(survivors, codes):
        if code != 0:
            raise CaseFailed(f"agent exited {code}: {warnings_of(run.log(run.agents.index(p)))}")
    run.check_checkpoint(TOTAL_STEPS)


# --- the cases -------------------------------------------------------------


def case_worker_sigkill(run, res):
    a = [run.agent(i, "2", extra=["--max-restarts", "2"]) for i in range(2)]
    first, _ = run.starts(2, 60)
    run.step(10)
    victim = next(s for s in first if s["group_rank"] == 1)
    t0 = time.monotonic()
    os.kill(victim["pid"], signal.SIGKILL)
    again, t1 = run.starts(2, 60)
    res.recovery_s = t1 - t0
    res.outcome = f"restart at world {again[0]['world']}, resumed step {again[0]['step']}"
    finish_ok(run, res, a)


def case_worker_exit(run, res):
    env = run.env(FAULT="exit:1:10")
    a = [run.agent(i, "2", extra=["--max-restarts", "2"], env=env) for i in range(2)]
    run.starts(2, 60)
    t0 = run.step(10)
    again, t1 = run.starts(2, 60)
    res.recovery_s = t1 - t0
    res.outcome = f"restart at world {again[0]['world']}, resumed step {again[0]['step']}"
    finish_ok(run, res, a)


def case_worker_hang(run, res):
    env = run.env(FAULT="hang:1:10")
    extra = ["--max-restarts", "2", "--heartbeat-timeout", "10", "--heartbeat-initial-timeout", "60"]
    a = [run.agent(i, "2", extra=extra, env=env) for i in range(2)]
    run.starts(2, 60)
    t0 = run.step(10)
    again, t1 = run.starts(2, 60)
    res.recovery_s = t1 - t0
    res.outcome = f"restart at world {again[0]['world']}, resumed step {again[0]['step']}"
    finish_ok(run, res, a)
    if "missed its heartbeat" not in run.log(0) + run.log(1):
        raise CaseFailed("no agent reported the missed heartbeat")


def three_agents(run, conf=FAST, extra=("--max-restarts", "3")):
    host = run.agent(0, "2:3", conf=conf + ",is_host=1", extra=extra)
    others = [run.agent(i, "2:3", conf=conf + ",is_host=0", extra=extra) for i in (1, 2)]
    first, _ = run.starts(3, 60, world=3)
    run.step(10)
    return [host] + others, first


def case_agent_sigkill(run, res):
    a, first = three_agents(run)
    t0 = time.monotonic()
    a[2].kill()
    try:
        again, t1 = run.starts(2, 60, world=2)
    except CaseFailed:
        done = [l for _, l in run.lines if l.startswith("done ")]
        if done:
            res.outcome = f"no restart: {len(done)} workers finished at world 3"
            raise CaseFailed("the killed agent's worker ran on as an orphan and the job finished without "
                             "noticing the node loss")
        raise
    res.recovery_s = t1 - t0
    res.outcome = f"continue at world 2, resumed step {again[0]['step']}"
    finish_ok(run, res, a[:2])


def case_agent_sigstop(run, res):
    # A short join_timeout: once thawed, the frozen node finds the job gone
    # (its host finished) and must give up within it.
    a, first = three_agents(run, conf=FAST.replace("join_timeout=30", "join_timeout=10"))
    frozen = [a[2].pid] + [p for s in first if s["group_rank"] == 2 for p in (s["pid"], s["child"])]
    t0 = time.monotonic()
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    again, t1 = run.starts(2, 60, world=2)
    res.recovery_s = t1 - t0
    finish_ok(run, res, a[:2])
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
    code = run.wait_exit([a[2]], 90)[0]
    res.outcome = f"continue at world 2; thawed node exit {code}"


def case_rdzv_host_killed(run, res):
    conf = FAST.replace("join_timeout=30", "join_timeout=10")
    a, first = three_agents(run, conf=conf)
    t0 = time.monotonic()
    a[0].kill()
    codes = run.wait_exit(a[1:], 60)
    res.recovery_s = time.monotonic() - t0
    if any(c == 0 for c in codes):
        res.outcome = f"survivors exit {codes}"
        raise CaseFailed(f"expected a clean failure, survivors exited {codes}")
    logs = run.log(1) + run.log(2)
    if "rendezvous" not in logs:
        raise CaseFailed(f"no rendezvous error reported: {logs[-600:]}")
    res.outcome = f"clean failure: survivors exit {codes}"
    run.check_checkpoint()


def daemon_help():
    ctrund = os.path.join(h.build_dir(), "rendezvous", "ctrund")
    r = subprocess.run([ctrund, "--help"], capture_output=True, text=True)
    return ctrund, r.stdout + r.stderr


def case_daemon_restart(run, res):
    ctrund, text = daemon_help()
    if "--state-dir" not in text:
        res.xfail = "ctrund --help shows no --state-dir (daemon persistence not there yet)"
        return
    state = os.path.join(run.dir, "state")
    os.mkdir(state)
    # The first ctrund binds port 0; the restarted one binds the port it
    # logged, as a daemon restarted in place does.
    endpoint = "127.0.0.1:0"

    def daemon():
        nonlocal endpoint
        d = subprocess.Popen([ctrund, "--listen", endpoint, "--state-dir", state], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        run.others.append(d)
        line = d.stdout.readline()
        if "serving rendezvous on " not in line:
            raise CaseFailed(f"ctrund did not start: {line!r}")
        endpoint = line.split("serving rendezvous on ", 1)[1].strip()
        return d

    d = daemon()
    a = [run.agent(i, "2", conf=FAST + ",is_host=0", extra=["--max-restarts", "2"],
                   env=run.env(STEP_SECONDS="0.1"), endpoint=endpoint) for i in range(2)]
    run.starts(2, 60)
    run.step(10)
    t0 = time.monotonic()
    d.kill()
    d.wait()
    daemon()
    t1 = run.step(TOTAL_STEPS // 2 + 5)
    res.recovery_s = t1 - t0
    restarts = len([1 for t, l in run.lines if l.startswith("start ") and t > t0]) // 2
    res.outcome = f"continue after daemon restart ({restarts} group restarts)"
    finish_ok(run, res, a)


def netns_run(run, res, index):
    if not netns.available():
        res.skipped = "needs root, ip and iptables for network namespaces"
        return None
    run.hosts = netns.Hosts(3, f"10.214.{(os.getpid() + index) % 200 + 20}", f"cf{os.getpid() % 10000}{index}")
    run.hosts.up()
    return run.hosts


def netns_agents(run, conf, total=TOTAL_STEPS):
    hosts = run.hosts
    env = run.env(GLOO_SOCKET_IFNAME="eth0", TOTAL_STEPS=total)
    endpoint = f"{hosts.ip(0)}:29400"
    a = [run.agent(i, "2:3", conf=conf + (",is_host=1" if i == 0 else ",is_host=0"),
                   extra=["--max-restarts", "3"], env=env, endpoint=endpoint, addr=hosts.ip(i))
         for i in range(3)]
    first, _ = run.starts(3, 90, world=3)
    run.step(10)
    return a, first


def case_partition(run, res):
    if netns_run(run, res, 1) is None:
        return
    a, _ = netns_agents(run, FAST)
    t0 = time.monotonic()
    run.hosts.partition(2)
    again, t1 = run.starts(2, 60, world=2)
    res.recovery_s = t1 - t0
    finish_ok(run, res, a[:2])
    a[2].send_signal(signal.SIGTERM)
    code = run.wait_exit([a[2]], 30)[0]
    res.outcome = f"continue at world 2; cut-off node exit {code}"


def case_packet_loss(run, res):
    if netns_run(run, res, 2) is None:
        return
    conf = "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=5,join_timeout=60"
    # Under 30 % loss a step costs ~1.5 s: train 15 steps past the fault, not 50.
    total = 25
    a, _ = netns_agents(run, conf, total)
    ns = run.hosts.names[2]
    t0 = time.monotonic()
    # 30 % of what reaches the host over its link is dropped (one direction:
    # on both, half of all round trips fail and TCP's backoff turns a step
    # into tens of seconds, past any bound a test can wait for).
    netns.sh("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-i", "eth0", "-m", "statistic",
             "--mode", "random", "--probability", "0.3", "-j", "DROP")
    codes = run.wait_exit(a, 150)
    res.recovery_s = None
    worlds = sorted({int(l.split()[3]) for t, l in run.lines if l.startswith("start ") and t > t0})
    res.outcome = (f"completed in {time.monotonic() - t0:.0f} s" +
                   (f", restarted at world {worlds}" if worlds else ", no restart") + f"; exits {codes}")
    if codes[0] != 0 or codes[1] != 0:
        raise CaseFailed(f"the clean nodes exited {codes}")
    run.check_checkpoint(total)


CASES = [
    # name, expected outcome, function
    ("worker_sigkill", "restart", case_worker_sigkill),
    ("worker_exit", "restart", case_worker_exit),
    ("worker_hang", "restart (heartbeat)", case_worker_hang),
    ("agent_sigkill", "continue at world 2", case_agent_sigkill),
    ("agent_sigstop", "continue at world 2", case_agent_sigstop),
    ("rdzv_host_killed", "clean failure with a report", case_rdzv_host_killed),
    ("daemon_restart", "continue", case_daemon_restart),
    ("partition", "continue at world 2", case_partition),
    ("packet_loss_30pct", "complete", case_packet_loss),
]


def run_case(name, launcher="ctrun"):
    """Runs one case with `launcher` (ctrun, or torchrun for TORCHRUN_CASES);
    returns its Result (never raises for a case failure)."""
    expected, fn = next((e, f) for n, e, f in CASES if n == name)
    res = Result(name, expected)
    run = Run(name, launcher)
    try:
        fn(run, res)
        if not res.skipped and not res.xfail:
            res.ok = True
    except CaseFailed as e:
        res.detail = str(e)[:300]
    except Exception as e:  # noqa: BLE001 - a broken case is a failed row, not a crash
        res.detail = f"{type(e).__name__}: {e}"[:300]
    finally:
        if not res.skipped:
            # A case that gave up while its job still ran stops the agents the
            # way a user would (SIGTERM); what outlives that is an orphan.
            for p in run.agents:
                if p.poll() is None:
                    try:
                        p.send_signal(signal.SIGCONT)
                        p.terminate()
                        p.wait(timeout=30)
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        pass
            try:
                res.orphans = run.orphans()
            except Exception as e:  # noqa: BLE001
                res.detail += f" (orphan check failed: {e})"
            if res.orphans:
                res.ok = False
                res.detail = (res.detail + f" {res.orphans} orphan process(es)").strip()
        run.close()
    return res
