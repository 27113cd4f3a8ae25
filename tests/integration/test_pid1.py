"""ctrun as a container entrypoint: PID 1 of its own PID namespace
(`unshare --pid --fork --mount-proc`, as in a container). A signal sent from
outside the namespace reaches the workers and ctrun exits 128+N
(docs/exit-codes.md); orphans re-parented to ctrun are reaped."""
import os
import signal
import subprocess
import unittest

import harness as h

SIGNAL_WORKER = os.path.join(h.HERE, "slurm", "signal_worker.py")
UNSHARE = "/usr/bin/unshare"


class ContainerEntrypointTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0 or not os.path.exists(UNSHARE):
            self.skipTest("needs root and unshare for a PID namespace")

    def start_pid1(self, *args, env=None):
        """Starts ctrun as PID 1 of a new namespace; returns (unshare process, ctrun's pid outside)."""
        p = subprocess.Popen([UNSHARE, "--pid", "--fork", "--mount-proc", h.ctrun_bin(), *args],
                             env=env or h.base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    @staticmethod
    def child_of(pid):
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
        return int(children[0])

    def signal_pid1(self, sig, expected_code, *extra):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        p = self.start_pid1("--nproc-per-node", "2", *extra, SIGNAL_WORKER,
                            env=h.base_env(ANNOUNCE=fifo.path, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="20"))
        self.assertEqual(sorted(fifo.lines(2, timeout=60)), ["ready 0", "ready 1"])
        ctrun = self.child_of(p.pid)  # PID 1 inside, an ordinary pid out here
        with open(f"/proc/{ctrun}/status") as f:
            self.assertIn("NSpid:\t%d\t1" % ctrun, f.read())
        os.kill(ctrun, sig)
        name = signal.Signals(sig).name
        self.assertEqual(sorted(fifo.lines(2, timeout=30)), [f"got {name} 0", f"got {name} 1"])
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, expected_code, err)
        self.assertIn(f"Received {name} death signal", err)

    def test_sigterm_from_outside_reaches_workers_and_exits_143(self):
        self.signal_pid1(signal.SIGTERM, 128 + signal.SIGTERM)

    def test_sigusr1_is_forwarded_when_handled_and_exits_138(self):
        self.signal_pid1(signal.SIGUSR1, 128 + signal.SIGUSR1, "--signals-to-handle", "TERM,USR1")

    def test_orphans_of_every_worker_are_reaped(self):
        p = self.start_pid1("--nproc-per-node", "2", "--tee", "1", h.worker("orphan_maker.py"))
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, out + err)
        self.assertEqual(out.count("ppid of the orphan was 1; ctrun pid is 1"), 2, out)
        self.assertEqual(out.count("zombies left: []"), 2, out)


if __name__ == "__main__":
    unittest.main()
