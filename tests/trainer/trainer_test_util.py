"""Shared helpers for the trainer integration tests: find binaries, host the
ranks' c10d store, launch N ranks with the environment torchrun/ctrun would
export.

No helper picks a port for a rank to bind later (another test could take it
in between): the store is hosted here, bound to port 0 and read back, and
the ranks are its clients, as under torchrun's agent store
(TORCHELASTIC_USE_AGENT_STORE=True). Tests that start ctrun leave the port
to ctrun, which binds port 0 itself."""
import datetime
import os
import socket
import subprocess
import unittest

from fork_server import leak_check_rank, spawn

BUILD_DIR = os.environ.get("CTRUN_BUILD_DIR", "")
# The ASan + UBSan stage (scripts/test-sanitized.sh) sets CTRUN_SANITIZED=1:
# there every trainer process start costs ~2 s more, so the tests run each of
# the trainer's C++ paths once rather than every layout and check.
SANITIZED = os.environ.get("CTRUN_SANITIZED") == "1"


def plain_only(why):
    """Runs a test in the plain suite only. `why` says what it checks that
    no other C++ path needs under the sanitizers: the comparison's own power
    to fail, or usage errors the flag parsers' unit tests (run sanitized)
    already cover."""
    return unittest.skipIf(SANITIZED, f"plain suite only: {why}")


def binary(relpath):
    """Absolute path of a build output, or skip the test if it is not built."""
    path = os.path.join(BUILD_DIR, relpath)
    if not BUILD_DIR or not os.path.exists(path):
        raise unittest.SkipTest(f"{relpath} not built (set CTRUN_BUILD_DIR)")
    return path


class Store:
    """A c10d TCPStore served by this process on 127.0.0.1, on a port the
    kernel picked (port 0, read back as .port). Keep it alive while ranks
    use it; one per launch (the ranks' keys are under /worker/attempt_0)."""

    def __init__(self):
        import torch.distributed as dist
        self._store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=300),
                                    wait_for_workers=False)
        self.port = self._store.port


class RefusingPort:
    """A port on 127.0.0.1 where every connection is refused: a socket
    bound to port 0 and held, never listening, so no one else can take the
    port while the test runs. Use as a context manager."""

    def __enter__(self):
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        return self

    def __exit__(self, *exc):
        self._socket.close()


def rank_env(rank, world, port, extra=None):
    """The environment of rank `rank` of `world`, a client of the store at
    127.0.0.1:`port` (a Store's)."""
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0",
        "OMP_NUM_THREADS": "1",
    })
    env.update(extra or {})
    return env


def run_ranks(argv, world, timeout=120, extra_env=None):
    """Runs `argv` as `world` ranks; returns [(returncode, stderr)] by rank."""
    return [(code, err) for code, _, err in run_ranks_output(argv, world, timeout, extra_env)]


def run_ranks_output(argv, world, timeout=120, extra_env=None):
    """Runs `argv` as `world` ranks; returns [(returncode, stdout, stderr)] by
    rank. Kills every rank if any is still running at the deadline."""
    store = Store()
    procs = [spawn(argv, rank_env(r, world, store.port, extra_env), subprocess.PIPE, subprocess.PIPE,
                   leak_check=leak_check_rank(r, world))
             for r in range(world)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def read_floats(path):
    import array
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values
