"""Hang forensics (issue 19, item 4), with real ctrun, gdb and workers: before
ctrun kills a hung worker it saves the worker's stacks to
attempt_N/<local_rank>/stacks.txt, and the failure report names the file and
the innermost frame.
- a Python worker whose heartbeat stops while it is blocked in
  stuck_in_allreduce_wait: its Python frames (and native ones) are saved
  before the SIGTERM;
- a C worker (built here with cc -g) that ignores SIGTERM, blocked in
  stuck_in_native_wait: its native frames are saved when the shutdown grace
  ends, before the SIGKILL;
- --hang-stacks-timeout 0 saves nothing.
"""
import os
import subprocess
import unittest

import harness as h


def stacks_file(log_dir, local_rank):
    runs = [d for d in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, d))]
    assert len(runs) == 1, runs
    return os.path.join(log_dir, runs[0], "attempt_0", str(local_rank), "stacks.txt")


class HangStacksTest(unittest.TestCase):
    def python_hang(self, *extra):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "1", "--heartbeat-timeout", "1", "--log-dir", d, *extra,
                   h.worker("stuck_in_allreduce_wait.py")], timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        return d, r

    def test_a_python_worker_whose_heartbeat_stopped(self):
        d, r = self.python_hang()
        path = stacks_file(d, 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("its heartbeat expired", text.splitlines()[0])
        python = text.split("Native threads")[0]
        self.assertIn('.py", line ', python)
        self.assertIn(" in stuck_in_allreduce_wait", python)
        self.assertIn("Thread 1 (", text.split("Native threads")[1])
        self.assertIn(f"stacks    : {path} (innermost frame: stuck_in_allreduce_wait (", r.stderr)
        self.assertIn(f"saved the stacks of worker local_rank 0", r.stderr)

    def test_a_native_worker_that_ignores_sigterm(self):
        d = h.tempdir(self)
        binary = os.path.join(d, "stuck_native")
        subprocess.run(["cc", "-g", "-O0", "-o", binary, h.worker("stuck_native.c")], check=True)
        logs = os.path.join(d, "logs")
        r = h.run(["--nproc-per-node", "2", "--shutdown-timeout", "1", "--log-dir", logs,
                   "--no-python", binary, os.path.join(d, "ready")], timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        path = stacks_file(logs, 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("still running after the shutdown grace", text.splitlines()[0])
        self.assertNotIn("Python threads", text)
        self.assertIn("in stuck_in_native_wait ()", text)
        self.assertIn(f"stacks    : {path} (innermost frame: stuck_in_native_wait at ", r.stderr)
        self.assertIn("stuck_native.c:", r.stderr)
        self.assertFalse(os.path.exists(stacks_file(logs, 1)))  # it had exited

    def test_off(self):
        d, r = self.python_hang("--hang-stacks-timeout", "0")
        self.assertFalse(os.path.exists(stacks_file(d, 0)))
        self.assertNotIn("stacks    :", r.stderr)


if __name__ == "__main__":
    unittest.main()
