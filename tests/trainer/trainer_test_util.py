"""Shared helpers for the trainer integration tests: find binaries, pick free
ports, launch N ranks with the environment torchrun/ctrun would export."""
import os
import socket
import subprocess
import unittest

BUILD_DIR = os.environ.get("CTRUN_BUILD_DIR", "")


def binary(relpath):
    """Absolute path of a build output, or skip the test if it is not built."""
    path = os.path.join(BUILD_DIR, relpath)
    if not BUILD_DIR or not os.path.exists(path):
        raise unittest.SkipTest(f"{relpath} not built (set CTRUN_BUILD_DIR)")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world, port, extra=None):
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCHELASTIC_RESTART_COUNT": "0",
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
    port = free_port()
    procs = [subprocess.Popen(argv, env=rank_env(r, world, port, extra_env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
