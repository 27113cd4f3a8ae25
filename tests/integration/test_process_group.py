"""Nothing of ctrun's process group outlives ctrun (issue 20).

ctrun runs in a process group (and session) of its own; its orphan guard
shares that group, its workers each have a session of their own. When ctrun
has exited, on every way out (success, a worker failure, SIGTERM, a usage
error found after the guard exists), no process may remain in its group,
not even a zombie: ctrun must have ended and reaped its guard itself.

This test process makes itself a child subreaper, so that anything ctrun
leaves behind is re-parented here and stays visible (as a zombie at least)
until the test reaps it: a guard left behind cannot slip past the check by
being reaped by init first.
"""
import ctypes
import os
import signal
import subprocess
import unittest

import harness

PR_SET_CHILD_SUBREAPER = 36


def group_members(pgid):
    """[(pid, state, name)] of every process in process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:
            found.append((int(entry), fields[0], name))
    return found


def our_children():
    kids = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            kids.update(int(p) for p in f.read().split())
    return kids


class ProcessGroupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")

    def setUp(self):
        self.addCleanup(self.reap_leftovers)

    def reap_leftovers(self):
        """Kills and reaps whatever ctrun left re-parented to this process."""
        for pid in our_children():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    def start(self, args, env=None):
        return subprocess.Popen([harness.ctrun_bin()] + args, env=env or harness.base_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def assert_nothing_left(self, proc, err):
        # proc has exited and been reaped (communicate/wait): its group must
        # be empty now, with no grace period, and nothing of its may have been
        # re-parented to us.
        left = group_members(proc.pid)
        self.assertEqual(left, [], f"left in ctrun's process group after it exited: {left}\n"
                                   f"ctrun stderr:\n{err[-2000:]}")
        self.assertEqual(our_children(), set(),
                         f"processes re-parented to the test after ctrun exited\n{err[-2000:]}")

    def test_success(self):
        p = self.start(["--standalone", "--nproc-per-node", "2", "--no-python", "/bin/true"])
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assert_nothing_left(p, err)

    def test_worker_failure(self):
        # Rank 0 fails at once; rank 1 would run for a minute and is stopped by ctrun.
        script = 'if [ "$LOCAL_RANK" = 0 ]; then exit 3; fi; exec sleep 60'
        p = self.start(["--standalone", "--nproc-per-node", "2", "--no-python",
                        "/bin/sh", "-c", script])
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("exitcode  : 3", err)
        self.assert_nothing_left(p, err)

    def test_sigterm(self):
        d = harness.tempdir(self)
        fifo = harness.Fifo(d)
        self.addCleanup(fifo.close)
        script = f'echo "$LOCAL_RANK" > {fifo.path}; exec sleep 60'
        p = self.start(["--standalone", "--nproc-per-node", "2", "--no-python",
                        "/bin/sh", "-c", script])
        harness.fifo_lines(self, fifo, 2, 60, [p])
        # The check below can fail: the guard is there while ctrun runs.
        members = group_members(p.pid)
        self.assertIn("ctrun-guard", [name for _, _, name in members], members)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assert_nothing_left(p, err)

    def test_usage_error_after_the_guard(self):
        # --log-dir is checked after the guard is forked (it makes directories).
        d = harness.tempdir(self)
        not_a_dir = os.path.join(d, "file")
        open(not_a_dir, "w").close()
        p = self.start(["--standalone", "--nproc-per-node", "1", "--log-dir",
                        os.path.join(not_a_dir, "logs"), "--no-python", "/bin/true"])
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 2, err)
        self.assertIn("--log-dir", err)
        self.assert_nothing_left(p, err)


if __name__ == "__main__":
    unittest.main()
