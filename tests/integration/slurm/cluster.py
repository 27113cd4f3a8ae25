"""A throw-away Slurm cluster on this one host, for tests: a private munged,
slurmctld and one slurmd per virtual node (n1, n2, ...), each node with its
own loopback address (NodeAddr 127.0.0.<i>) and port. Node names do not
resolve, so ctrun must map them through `scontrol show node`.

Everything lives in a fresh directory; nothing global is touched (munge runs
on its own socket with its own key, given to Slurm by AuthInfo). Daemons are
stopped by the pids they wrote, never by name.

Slurm's ports are fixed in slurm.conf, so the daemons, the client commands
and the jobs (they run under slurmd) run in a network namespace of the
cluster's own with only loopback up: no other test can take those ports,
and two clusters at once do not meet.

A requeued job starts again `cred_expire` seconds after its requeue, at the
scheduler's next pass: here 10 s and every second (Slurm's defaults, 120 s
and 60 s, would make a requeue test wait 2 to 3 minutes).

    with Cluster(nodes=2) as c:        # raises Unavailable when Slurm cannot run here
        c.run(["sbatch", "--wait", ...])
"""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo")
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class Unavailable(Exception):
    """Slurm cannot be installed or started on this machine (the message says why)."""


def _which(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def ensure_installed():
    """Installs Slurm and munge through scripts/install-deps.sh when missing."""
    if os.geteuid() != 0:
        raise Unavailable("a test Slurm needs root (slurmd runs jobs as their users)")
    if all(_which(d) for d in DAEMONS):
        return
    script = os.path.join(SOURCE_DIR, "scripts", "install-deps.sh")
    r = subprocess.run([script], capture_output=True, text=True, timeout=600)
    missing = [d for d in DAEMONS if not _which(d)]
    if missing:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        raise Unavailable(f"{', '.join(missing)} not installed and {script} could not install them: "
                          + " | ".join(tail))


# Slurm's own ports, in the cluster's network namespace.
CTLD_PORT = 6817
FIRST_NODE_PORT = 17001


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise Unavailable(f"timed out after {timeout} s waiting for {what}")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class Cluster:
    def __init__(self, nodes=2, cpus=None):
        self.nodes = nodes
        self.cpus = cpus or os.cpu_count() or 1
        self.dir = None
        self.env = None
        self.pid_files = []
        self.net = None     # the process that holds the cluster's network namespace
        self.prefix = []    # runs a command in it

    # -- setup --------------------------------------------------------------
    def __enter__(self):
        ensure_installed()
        self.dir = tempfile.mkdtemp(prefix="ctrun-slurm-")
        os.chmod(self.dir, 0o755)
        try:
            self._make_network()
            self._start_munge()
            self._write_conf()
            self._start_slurm()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _make_network(self):
        # Besides loopback, a veth pair inside the namespace (it leads nowhere)
        # with a documentation address: Slurm binds its ports through
        # getaddrinfo(NULL, AI_ADDRCONFIG), which finds no address on a host
        # that has only loopback.
        setup = ("ip link set lo up && ip link add ctrun0 type veth peer name ctrun1 && "
                 "ip addr add 192.0.2.1/32 dev ctrun0 && ip link set ctrun0 up && ip link set ctrun1 up && "
                 "echo up && exec cat")
        self.net = subprocess.Popen(["unshare", "--net", "sh", "-c", setup],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.net.stdout.readline().strip() != "up":  # "" when unshare failed (it exits)
            raise Unavailable(f"unshare --net did not make a network namespace (exit {self.net.wait(timeout=30)})")
        self.prefix = ["nsenter", f"--net=/proc/{self.net.pid}/ns/net"]

    def _start_munge(self):
        munge = pwd.getpwnam("munge")
        run = self._path("munge")
        key_dir = self._path("munge-key")
        os.mkdir(run, 0o755)
        os.mkdir(key_dir, 0o700)
        key = os.path.join(key_dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        for p in (run, key_dir, key):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        self.munge_socket = os.path.join(run, "munge.sock")
        pid_file = os.path.join(run, "munged.pid")
        self.pid_files.append(pid_file)
        r = subprocess.run(["runuser", "-u", "munge", "--", _which("munged"), f"--socket={self.munge_socket}",
                            f"--key-file={key}", f"--pid-file={pid_file}",
                            f"--log-file={os.path.join(run, 'munged.log')}",
                            f"--seed-file={os.path.join(run, 'munged.seed')}"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise Unavailable(f"munged did not start: {r.stderr.strip()}")

    def _write_conf(self):
        for d in ("state", "log", "run"):
            os.mkdir(self._path(d))
        for i in range(1, self.nodes + 1):
            os.makedirs(self._path("spool", f"n{i}"))
        ctld_port = CTLD_PORT
        node_ports = [FIRST_NODE_PORT + i for i in range(self.nodes)]
        host = socket.gethostname().split(".")[0]
        nodes = "\n".join(
            f"NodeName=n{i} NodeHostname={host} NodeAddr=127.0.0.{i} Port={node_ports[i - 1]} "
            f"CPUs={self.cpus} RealMemory=1000 State=UNKNOWN" for i in range(1, self.nodes + 1))
        d = self.dir
        conf = f"""ClusterName=ctrun
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket},cred_expire=10
MailProg=/bin/true
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=60
SlurmctldTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""
        self.conf = self._path("slurm.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def _daemon(self, args, pid_file, what):
        self.pid_files.append(pid_file)
        r = subprocess.run(self.prefix + args, env=self.env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise Unavailable(f"{what} did not start: {(r.stdout + r.stderr).strip()} ({self.log_tail()})")

    def _start_slurm(self):
        self._daemon([_which("slurmctld"), "-c", "-f", self.conf], self._path("run", "slurmctld.pid"), "slurmctld")
        for i in range(1, self.nodes + 1):
            self._daemon([_which("slurmd"), "-f", self.conf, "-N", f"n{i}"],
                         self._path("run", f"slurmd-n{i}.pid"), f"slurmd n{i}")

        def all_idle():
            r = self.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], check=False)
            return len(set(r.stdout.split())) >= self.nodes
        try:
            _wait_for(all_idle, 30, f"{self.nodes} idle Slurm nodes")
        except Unavailable as e:
            raise Unavailable(f"{e} ({self.log_tail()})") from None

    # -- use ----------------------------------------------------------------
    def run(self, args, check=True, timeout=60, env=None, **kw):
        """Runs a Slurm client command against this cluster."""
        r = subprocess.run(self.prefix + list(args), env=dict(self.env, **(env or {})), capture_output=True,
                           text=True, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def log_tail(self, lines=5):
        out = []
        log_dir = self._path("log")
        if os.path.isdir(log_dir):
            for name in sorted(os.listdir(log_dir)):
                with open(os.path.join(log_dir, name), errors="replace") as f:
                    out.append(f"{name}: " + " | ".join(f.read().strip().splitlines()[-lines:]))
        return "; ".join(out)

    # -- teardown -----------------------------------------------------------
    def __exit__(self, *exc):
        if self.env is not None and os.path.exists(self._path("run", "slurmctld.pid")):
            subprocess.run(self.prefix + ["scancel", "--user=root"], env=self.env, capture_output=True, timeout=30)
        # Nodes and the controller stop together; munge last, once they are gone.
        daemons = [_read_pid(f) for f in self.pid_files[1:]]
        _stop([p for p in daemons if p])
        _stop([p for p in [_read_pid(f) for f in self.pid_files[:1]] if p])
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.net is not None:
            self.net.stdin.close()
            self.net.wait(timeout=30)
            self.net.stdout.close()
        return False


def _read_pid(pid_file):
    try:
        with open(pid_file) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _stop(pids):
    """SIGTERM to each pid, SIGKILL to those still there after 10 s."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
