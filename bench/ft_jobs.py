"""The jobs bench/ft.py compares: 3 ctrun agents x 2 ranks of
ctrun-fashion-mnist on the loopback under one ctrund, either as three
fault-tolerant replica groups (--ft-replicas 1:3, the trainer's --ft) or as
one plain DDP job of 3 nodes (--nnodes 3, whole-job restarts). Every
agent's stdout is read by a thread that stamps each line with time.time()
on arrival (the workers flush each line; the events file's "ts" is on the
same clock), so a step's wall time needs no change to the trainer's lines.
No timing is read here: bench/ft.py reads the runs."""
import json
import os
import re
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(HERE, "..", "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
CTRUND = os.path.join(BUILD, "rendezvous", "ctrund")
TRAINER = os.path.join(BUILD, "trainer", "apps", "ctrun-fashion-mnist")
GROUPS = 3
NPROC = 2

FT_STEP = re.compile(r"^ft step (\d+) quorum (\d+) replicas (\d+) loss (\S+)")
FT_DISCARD = re.compile(r"^ft discard step (\d+) quorum (\d+)")
FT_HEALED = re.compile(r"^ft healed step (\d+)")
PLAIN_STEP = re.compile(r"^epoch \d+ step (\d+): loss (\S+)")
ASKED = "asks to join the quorum at step"
RESUMED = re.compile(r"^resuming from '[^']*': step (\d+)")


def check_build():
    for path in (CTRUN, CTRUND, TRAINER):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{path} not found: build ctrun, ctrund and ctrun-fashion-mnist first "
                             "(scripts/build.sh) or set CTRUN_BUILD_DIR")


class Ctrund:
    """One ctrund on 127.0.0.1, port 0, for the whole bench (each job has its own run id)."""

    def __init__(self):
        self.proc = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while True:
            line = self.proc.stdout.readline()
            match = re.search(r"serving rendezvous on (\S+)", line)
            if match:
                self.endpoint = match.group(1)
                break
            if not line or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"ctrund did not start: {line.strip()}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drain

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


class Agent:
    """One ctrun agent; .lines: [(time, line)] of its stdout, stamped on arrival."""

    def __init__(self, args, env, workdir, index):
        self.index = index
        self.events_path = os.path.join(workdir, f"events{index}.jsonl")
        self.err_path = os.path.join(workdir, f"err{index}.log")
        self.lines = []
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen([CTRUN, "--events-file", self.events_path, *args], env=env,
                                         stdout=subprocess.PIPE, stderr=err, text=True, cwd=workdir)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def events(self):
        if not os.path.exists(self.events_path):
            return []
        with open(self.events_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def train_args(steps, train_limit, batch):
    return ["--train-limit", str(train_limit), "--test-limit", "64", "--batch-size", str(batch),
            "--deterministic", "--max-steps", str(steps)]


def base_env(fault=None):
    env = dict(os.environ)
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.pop("CTRUN_FT_FAULT", None)
    env.pop("CTRUN_FT_HOLD", None)
    env["CTRUN_FT_FIXED_STALL"] = "1"  # group 0's hold (CTRUN_FT_HOLD) must not bench it as hung
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "10")
    env["OMP_NUM_THREADS"] = "1"
    if fault:
        env["CTRUN_FT_FAULT"] = fault
    return env


class Job:
    """GROUPS agents started together; .start: time.time() before the first."""

    def __init__(self, ctrund, workdir, run_id, ft, steps, train_limit, batch, fault_step=None,
                 checkpoint_every=0, hold_step=None, exact=False):
        self.workdir = workdir
        self.ft = ft
        os.makedirs(workdir, exist_ok=True)
        self.release = os.path.join(workdir, "release")
        self.released_at = None
        self.start = time.time()
        self.agents = []
        for g in range(GROUPS):
            args = ["--rdzv-backend", "c10d", "--rdzv-endpoint", ctrund.endpoint, "--rdzv-id", run_id,
                    "--local-addr", f"127.0.0.{g + 1}", "--nproc-per-node", str(NPROC), "--max-restarts", "1"]
            args += ["--ft-replicas", f"1:{GROUPS}"] if ft else ["--nnodes", str(GROUPS)]
            args += ["--ft-exact"] if exact else []
            args += ["--no-python", TRAINER, *train_args(steps, train_limit, batch)]
            args += ["--ft", "--log-every", "0"] if ft else ["--log-every", "1"]
            if checkpoint_every:
                args += ["--checkpoint-dir", os.path.join(workdir, "ckpt"), "--checkpoint-every",
                         str(checkpoint_every)]
            # The victim: local rank 1 of agent 1, before it trains step fault_step.
            fault = f"1:{fault_step}:train" if fault_step is not None and g == 1 else None
            env = base_env(fault)
            if hold_step is not None and g == 0:
                env["CTRUN_FT_HOLD"] = f"{hold_step}:{self.release}"
            self.agents.append(Agent(args, env, workdir, g))
        if hold_step is not None:
            threading.Thread(target=self._release_on_rejoin, daemon=True).start()

    def _release_on_rejoin(self):
        """The safety net of --ft's fault run: group 0 holds before step
        hold_step (CTRUN_FT_HOLD) until agent 1 asked to join a second time
        (its restart), so the survivors cannot finish before the restarted
        group heals on a loaded host. Usually released long before group 0
        gets there: then nobody waits."""
        while self.agents[1].proc.poll() is None:
            if self.agents[1].stderr().count(ASKED) >= 2:
                break
            time.sleep(0.02)
        self.released_at = time.time()
        open(self.release, "w").close()

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        for a in self.agents:
            try:
                a.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        failed = [a for a in self.agents if a.proc.poll() != 0]
        for a in self.agents:
            a.kill()
            a.reader.join(timeout=10)
        if failed:
            tails = "\n".join(f"--- agent {a.index} (exit {a.proc.returncode}):\n" +
                              "\n".join(a.stderr().splitlines()[-15:]) for a in self.agents)
            raise SystemExit(f"job in {self.workdir} failed or hung (timeout {timeout} s)\n{tails}")

    def kill_time(self):
        """ts of the victim's SIGKILL as its agent saw it (worker_exited)."""
        for e in self.agents[1].events():
            if e["event"] == "worker_exited" and e.get("signal") == "SIGKILL":
                return e["ts"]
        raise SystemExit(f"{self.workdir}: no worker_exited with SIGKILL in agent 1's events: "
                         "the fault was not injected")
