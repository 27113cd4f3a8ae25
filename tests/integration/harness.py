"""Shared helpers for the integration tests: find ctrun, run it, and wait on
events (process exits, FIFO messages) with deadlines — never a bare sleep."""
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
PYTHON = "/usr/bin/python3"  # Debian's, with torch


def build_dir():
    d = os.environ.get("CTRUN_BUILD_DIR")
    if not d:
        d = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build")
    return d


def ctrun_bin():
    path = os.path.join(build_dir(), "launcher", "ctrun")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} not found: build first or set CTRUN_BUILD_DIR")
    return path


def worker(name):
    return os.path.join(WORKERS, name)


def base_env(**extra):
    env = dict(os.environ)
    env["PYTHON_EXEC"] = PYTHON
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "10")
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run(args, env=None, timeout=120, prefix=(), **kw):
    """Runs ctrun to completion; returns CompletedProcess with text output.
    `prefix` runs it through a command, e.g. private_net()'s."""
    try:
        return subprocess.run(list(prefix) + [ctrun_bin()] + list(args), env=env or base_env(),
                              capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:  # say what it wrote before it was killed
        out, err = (t.decode(errors="replace") if isinstance(t, bytes) else t or "" for t in (e.stdout, e.stderr))
        raise AssertionError(f"ctrun {' '.join(args)} ran past {timeout} s; its stdout (last 4000): "
                             f"{out[-4000:]}\nits stderr (last 4000): {err[-4000:]}") from None


def start(args, env=None, prefix=(), **kw):
    """Starts ctrun with `args` (stdout and stderr are text pipes); `prefix`
    runs it through a command, e.g. private_net()'s."""
    return subprocess.Popen(list(prefix) + [ctrun_bin()] + list(args), env=env or base_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def private_net(test):
    """A network namespace with only loopback up, for processes that must
    bind ports fixed in advance (e.g. the static backend's --master-port):
    no other test can take them there. Returns the command prefix that runs a
    program in it (nsenter execs it: the Popen's pid is the program's). The
    namespace is held by a process that `test`'s cleanup ends."""
    holder = subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    test.addCleanup(lambda: (holder.stdin.close(), holder.wait(timeout=30), holder.stdout.close()))
    line = holder.stdout.readline()  # "up", or "" when unshare failed (it exits)
    if line.strip() != "up":
        test.fail(f"unshare --net did not make a network namespace (exit {holder.wait(timeout=30)})")
    return ["nsenter", f"--net=/proc/{holder.pid}/ns/net"]


HOSTING = re.compile(r"hosting the rendezvous for run '[^']*' on (\S+):(\d+)\n")


class Agent(subprocess.Popen):
    """A Popen whose stderr's first part was read by the test (start_host):
    communicate() returns that part too, so a test sees all of stderr."""
    stderr_head = ""

    def communicate(self, *args, **kw):
        out, err = super().communicate(*args, **kw)
        return out, (self.stderr_head + err) if err is not None else err


def start_host(args, env=None, timeout=60, program=None, **kw):
    """Starts the ctrun agent that hosts the rendezvous, with `args` whose
    --rdzv-endpoint says port 0 (e.g. 127.0.0.1:0): it binds a free port and
    logs "hosting the rendezvous for run ... on HOST:PORT". Reads its stderr
    until that line (at most `timeout` seconds) and returns (process, port);
    the other agents join HOST:port. The process is an Agent: its stdout and
    stderr are pipes as start()'s, and communicate() returns all of stderr.
    `program` replaces the build's ctrun (e.g. an installed copy).
    On a timeout or an early exit, kills it and raises AssertionError with
    what it wrote."""
    p = Agent([program or ctrun_bin()] + list(args), env=env or base_env(), stdout=subprocess.PIPE,
              stderr=subprocess.PIPE, text=True, **kw)
    fd = p.stderr.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        m = HOSTING.search(data.decode(errors="replace"))
        if m:
            p.stderr_head = data.decode(errors="replace")
            return p, int(m.group(2))
        left = deadline - time.monotonic()
        ready = select.select([fd], [], [], left)[0] if left > 0 else []
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            p.kill()
            p.wait()
            raise AssertionError(f"the hosting agent logged no 'hosting the rendezvous ... on HOST:PORT' "
                                 f"within {timeout} s (exit {p.returncode}); its stderr: "
                                 f"{data.decode(errors='replace')}")
        data += chunk


class Ctrund:
    """A ctrund on 127.0.0.1 port 0 with its status page and metrics on
    port 0 too, its addresses read back from what it prints: .proc, .endpoint
    (HOST:PORT), .page (the status page's URL, ending in /), .metrics (the
    metrics URL). `test`'s cleanup kills it and reaps it; stop() does so at
    once and returns what it printed on stderr (its log) after its address
    lines."""

    def __init__(self, test, *extra):
        self.proc = subprocess.Popen([os.path.join(build_dir(), "rendezvous", "ctrund"), "--listen", "127.0.0.1:0",
                                      "--metrics-port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.stop)
        out = read_until(self.proc.stdout, "/metrics\n", 10)
        self.endpoint = re.search(r"serving rendezvous on (\S+)", out).group(1)
        self.page = re.search(r"serving the status page on (\S+)", out).group(1)
        self.metrics = re.search(r"serving metrics on (\S+)", out).group(1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        if not hasattr(self, "log"):
            self.log = self.proc.communicate(timeout=30)[1]
        return self.log


def finish(test, procs, timeout):
    """Waits for every process of `procs` (from start()) to exit, `timeout`
    seconds for all; returns [(stdout, stderr)]. When one is still running at
    the deadline, kills them all and fails `test` with each one's last stderr
    lines (which agent hung, and where)."""
    deadline = time.monotonic() + timeout
    outs = []
    for i, p in enumerate(procs):
        try:
            outs.append(p.communicate(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            fail_with_tails(test, procs, f"process {i} did not exit within {timeout} s", outs, hung=i)
    return outs


def fail_with_tails(test, procs, message, outs=(), hung=None):
    """Kills what is left of `procs` and fails `test` with `message` and each
    process's last stderr lines (`outs` holds those already collected)."""
    for q in procs:
        if q.poll() is None:
            q.kill()
    tails = []
    for j, q in enumerate(procs):
        try:
            _, err = outs[j] if j < len(outs) else q.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a descendant holds the pipe
            err = "(stderr still held open by a descendant)"
        except ValueError:  # the test read it already
            err = "(stderr read by the test)"
        state = "did not exit in time" if j == hung else f"exit {q.returncode}"
        tails.append(f"--- process {j} ({state}):\n" + "\n".join((err or "").splitlines()[-15:]))
    test.fail(message + "\n" + "\n".join(tails))


def fifo_lines(test, fifo, count, timeout, procs):
    """fifo.lines(count, timeout); when they do not all arrive, fails `test`
    with what did and with the last stderr lines of `procs` (the agents)."""
    try:
        return fifo.lines(count, timeout)
    except TimeoutError as e:
        fail_with_tails(test, procs, f"workers' lines: {e}")


def read_until(stream, marker, timeout):
    """Reads the text pipe `stream` (a Popen's stdout or stderr) until
    `marker` has appeared; returns what was read. TimeoutError, with it, when
    `marker` did not come within `timeout` seconds or the pipe closed."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while marker.encode() not in data:
        left = deadline - time.monotonic()
        ready = select.select([fd], [], [], max(0, left))[0] if left > 0 else []
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            raise TimeoutError(f"no {marker!r} within {timeout} s; got: {data.decode(errors='replace')}")
        data += chunk
    return data.decode(errors="replace")


class Fifo:
    """A named pipe that workers write one-line messages to. The test holds a
    write end itself so a read never sees a spurious end-of-file."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "announce.fifo")
        os.mkfifo(self.path)
        self.rfd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.wfd = os.open(self.path, os.O_WRONLY)
        self.buf = b""

    def lines(self, count, timeout):
        """Returns `count` lines, or raises TimeoutError with what arrived."""
        deadline = time.monotonic() + timeout
        out = []
        while len(out) < count:
            while b"\n" in self.buf and len(out) < count:
                line, self.buf = self.buf.split(b"\n", 1)
                out.append(line.decode())
            if len(out) == count:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"got {len(out)} of {count} lines: {out}")
            ready, _, _ = select.select([self.rfd], [], [], left)
            if ready:
                self.buf += os.read(self.rfd, 65536)
        return out

    def close(self):
        os.close(self.rfd)
        os.close(self.wfd)


def wait_gone(pids, timeout):
    """Waits until every pid has exited (pidfd events). Returns those still alive."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    alive = dict(fds)
    while alive:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _ in poller.poll(left * 1000):
            poller.unregister(fd)
            alive.pop(fd, None)
    for fd in fds:
        os.close(fd)
    # A pidfd turns readable when the process exits; a zombie (exited, not yet
    # reaped by its parent) is gone for our purposes.
    return [pid for pid in alive.values() if not is_zombie_or_gone(pid)]


def is_zombie_or_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def tempdir(test):
    d = tempfile.TemporaryDirectory(prefix="ctrun_test_")
    test.addCleanup(d.cleanup)
    return d.name
