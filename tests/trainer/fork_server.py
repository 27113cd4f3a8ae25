"""Starts the trainer's ranks by fork from a started process of the same
binary (trainer/apps/fork_server.h) rather than by exec: an exec'd libtorch
binary spends ~0.8 s of CPU (2.3 s under ASan) before main, and these tests
start hundreds of ranks. The rank runs the binary's main with the argv,
environment and standard streams it would have had from subprocess.Popen
(stdin: /dev/null).

`spawn` returns a Popen-like object (pid, stdout, stderr, poll, wait,
communicate, send_signal, kill, returncode). A launch's first and last
ranks end with LeakSanitizer's check (in an ASan build); the ranks between
repeat their code paths and skip its ~1 s (`leak_check_rank`). One server
per binary and per set of the variables read before main (LD_*, OMP_*, the
sanitizers'):
a rank whose values of those differ gets a server of its own, so it starts
exactly as exec would have started it."""
import array
import os
import select
import socket
import subprocess
import time

# Read by the dynamic loader, libgomp, the sanitizers and libtorch's static
# initialisers before main: a forked rank has its server's values of these.
_BEFORE_MAIN = ("LD_", "OMP_", "GOMP_", "KMP_", "MKL_", "ASAN_", "UBSAN_", "LSAN_", "MALLOC_", "GLIBC_",
                "TORCH_", "GLOG_")
# CTRUN_EXEC_RANKS=1 starts every rank with exec (to compare the two).
_DISABLED = os.environ.get("CTRUN_EXEC_RANKS") == "1"
_servers = {}


def _before_main(env):
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_BEFORE_MAIN)))


class _Server:
    """One fork server: the binary started with CTRUN_FORK_SERVER_FD, and the
    exit statuses it reported that no rank has collected yet."""

    def __init__(self, binary, env):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([binary], env=dict(env, CTRUN_FORK_SERVER_FD=str(theirs.fileno())),
                                     pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self.statuses = {}

    def fork(self, argv, env, fds, leak_check):
        fields = [f"leak-check={int(leak_check)}", str(len(argv)), *argv,
                  str(len(env)), *(f"{k}={v}" for k, v in env.items())]
        payload = "".join(f + "\0" for f in fields).encode()
        self.sock.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        while True:
            reply = self._read(None)
            if reply.startswith("pid "):
                return int(reply.split()[1])
            if reply.startswith("error "):
                raise OSError(f"fork server of {argv[0]}: {reply[6:]}")

    def _read(self, timeout):
        """The next message (exit reports are filed), or None at the timeout."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        data = self.sock.recv(4096).decode()
        if not data:
            raise OSError(f"the fork server (pid {self.proc.pid}) is gone: exit {self.proc.wait()}")
        if data.startswith("exit "):
            _, pid, status = data.split()
            self.statuses[int(pid)] = int(status)
        return data

    def status(self, pid, timeout):
        """pid's wait status; None if it has not ended within `timeout` s
        (0: do not wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self.statuses:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._read(left) is None:
                return None
        return self.statuses.pop(pid)


class Rank:
    """A forked rank, used as a subprocess.Popen (text mode)."""

    def __init__(self, server, argv, env, stdout, stderr, leak_check):
        self.args = argv
        self.returncode = None
        self._server = server
        theirs = []  # the descriptors the rank gets: closed here once it has them

        def stream(spec, default):
            if spec == subprocess.PIPE:
                r, w = os.pipe()
                theirs.append(w)
                return w, open(r, "r", closefd=True)
            if spec == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                theirs.append(fd)
                return fd, None
            if spec is None:
                return default, None
            return (spec if isinstance(spec, int) else spec.fileno()), None

        stdin = os.open(os.devnull, os.O_RDONLY)
        theirs.append(stdin)
        out_fd, self.stdout = stream(stdout, 1)
        err_fd, self.stderr = (out_fd, None) if stderr == subprocess.STDOUT else stream(stderr, 2)
        try:
            self.pid = server.fork(argv, env, [stdin, out_fd, err_fd], leak_check)
        finally:
            for fd in theirs:
                os.close(fd)

    def poll(self):
        return self._collect(0)

    def wait(self, timeout=None):
        if self._collect(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def _collect(self, timeout):
        if self.returncode is None:
            status = self._server.status(self.pid, timeout)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def communicate(self, timeout=None):
        """Reads stdout and stderr to their ends, then waits (as Popen's)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        files = [s for s in (self.stdout, self.stderr) if s is not None and not s.closed]
        chunks = {f.fileno(): [] for f in files}
        open_fds = {f.fileno(): f for f in files}
        while open_fds:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            ready, _, _ = select.select(list(open_fds), [], [], left)
            for fd in ready:
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.pop(fd).close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        text = [b"".join(parts).decode(errors="replace") for parts in chunks.values()]
        out = text.pop(0) if self.stdout in files else None
        err = text.pop(0) if self.stderr in files else None
        return out, err

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(9)

    def terminate(self):
        self.send_signal(15)


def leak_check_rank(rank, world):
    """Whether rank `rank` of `world` ends with the leak check: the first
    and the last (a pipeline's first and last stages; the ranks between
    take their paths)."""
    return rank in (0, world - 1)


def spawn(argv, env, stdout=None, stderr=None, leak_check=True):
    """subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr,
    text=True), with the rank forked from a started process of argv[0].
    leak_check=False: no LeakSanitizer check at its exit (an ASan build's
    forked rank whose code paths another rank of the launch takes too;
    fork_server.h says why it costs)."""
    if _DISABLED:
        return subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, text=True)
    key = (argv[0], _before_main(env))
    server = _servers.get(key)
    if server is None or server.proc.poll() is not None:
        server = _servers[key] = _Server(argv[0], env)
    return Rank(server, list(argv), env, stdout, stderr, leak_check)


def run(argv, env=None, timeout=None, stdout=None, stderr=None, capture_output=False, check=False):
    """subprocess.run(argv, env=..., text=True, ...) with a forked rank."""
    if capture_output:
        stdout = stderr = subprocess.PIPE
    p = spawn(argv, dict(os.environ) if env is None else env, stdout, stderr)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise
    if check and p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, argv, out, err)
    return subprocess.CompletedProcess(argv, p.returncode, out, err)
