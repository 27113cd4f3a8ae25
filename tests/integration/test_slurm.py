"""ctrun under a real Slurm (slurmctld + 2 slurmd + munge on this host, see
slurm/cluster.py): `sbatch scripts/slurm/allreduce.sbatch` runs
`srun ctrun <Gloo all-reduce>` on 2 nodes x 2 workers with no rendezvous
flags, and Slurm's preemption signal reaches the workers."""
import os
import re
import subprocess
import sys
import time
import unittest

import harness as h

sys.path.insert(0, os.path.join(h.HERE, "slurm"))
import cluster  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(h.HERE))
SBATCH = os.path.join(SOURCE, "scripts", "slurm", "allreduce.sbatch")
SIGNAL_WORKER = os.path.join(h.HERE, "slurm", "signal_worker.py")


class SlurmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            cls.cluster = cluster.Cluster(nodes=2).__enter__()
        except cluster.Unavailable as e:
            raise unittest.SkipTest(f"no test Slurm on this machine: {e}")

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def submit(self, *args, env=None):
        """sbatch; returns (job id, output file)."""
        out = os.path.join(h.tempdir(self), "job.out")
        job_env = dict(h.base_env(CTRUN=h.ctrun_bin()), **(env or {}))
        r = self.cluster.run(["sbatch", "--parsable", "-o", out, *args], env=job_env)
        job = r.stdout.strip().split(";")[0]
        self.addCleanup(lambda: self.cluster.run(["scancel", job], check=False))
        return job, out

    def wait_job(self, job, timeout=240):
        """Waits (bounded poll of scontrol) for the job to end; returns (state, exit code)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.cluster.run(["scontrol", "-o", "show", "job", job]).stdout
            state = re.search(r"JobState=(\S+)", info).group(1)
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state, re.search(r"ExitCode=(\S+)", info).group(1)
            time.sleep(0.1)
        self.fail(f"job {job} still running after {timeout} s: {self.cluster.log_tail()}")

    def test_sbatch_srun_ctrun_two_nodes_two_workers_each(self):
        job, out = self.submit(SBATCH, h.worker("allreduce.py"))
        state, code = self.wait_job(job)
        with open(out) as f:
            log = f.read()
        self.assertEqual((state, code), ("COMPLETED", "0:0"), log)
        for rank in range(4):
            self.assertIn(f"rank {rank} world 4 sum 10", log)
        # No flag named them: the run id, the host (n1's NodeAddr, node 0) and
        # the node ranks came from Slurm.
        self.assertRegex(log, rf"hosting the rendezvous for run '{job}\.0' on 127\.0\.0\.1:294\d\d")
        self.assertIn("this node is group rank 0", log)
        self.assertIn("this node is group rank 1", log)
        self.assertIn("127.0.0.2#", log)  # n2 advertised its own NodeAddr

    def test_usr1_from_slurm_reaches_every_worker(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        job, out = self.submit(SBATCH, SIGNAL_WORKER, env={"ANNOUNCE": fifo.path})
        ready = fifo.lines(4, timeout=240)
        self.assertEqual(sorted(ready), [f"ready {r}" for r in range(4)])
        self.cluster.run(["scancel", "--signal=USR1", job])
        got = fifo.lines(4, timeout=240)
        # Every worker is told to checkpoint. slurmd signals the two nodes one
        # after the other: when one agent has left on SIGUSR1 before the other
        # node's signal arrives, that node restarts its group, and its workers
        # get SIGTERM instead (both are preemption signals to a script).
        self.assertEqual(sorted(line.split()[2] for line in got), ["0", "1", "2", "3"], got)
        self.assertTrue(all(line.split()[1] in ("SIGUSR1", "SIGTERM") for line in got), got)
        self.assertGreaterEqual(sum(line.split()[1] == "SIGUSR1" for line in got), 2, got)
        state, code = self.wait_job(job)
        with open(out) as f:
            log = f.read()
        # Each ctrun exits 128 + SIGUSR1 after its workers stopped; srun passes it on.
        self.assertEqual(code, "138:0", log)
        self.assertIn("Received SIGUSR1 death signal", log)


class SlurmValueTest(unittest.TestCase):
    """No cluster needed: ctrun reads a step's variables as srun would set them."""

    STEP = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_NNODES": "2", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "127.0.0.[1-2]", "SLURM_STEP_NUM_TASKS": "2",
            "SLURMD_NODENAME": "127.0.0.1"}

    def check_usage_error(self, needle, **env):
        r = h.run([h.worker("allreduce.py")], env=h.base_env(**dict(self.STEP, **env)))
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(needle, lines[0])

    def test_bad_slurm_values_are_one_line_and_exit_2(self):
        self.check_usage_error("SLURM_STEP_NODELIST 'n[1-'", SLURM_STEP_NODELIST="n[1-")
        self.check_usage_error("SLURM_NODEID '5'", SLURM_NODEID="5")
        self.check_usage_error("SLURM_STEP_NUM_TASKS '4'", SLURM_STEP_NUM_TASKS="4")
        self.check_usage_error("SLURM_STEP_NUM_NODES 'two'", SLURM_STEP_NUM_NODES="two")
        self.check_usage_error("SLURM_STEP_NODELIST 'nosuchnode[1-2]': first host 'nosuchnode1' does not resolve",
                               SLURM_STEP_NODELIST="nosuchnode[1-2]", PATH="/nonexistent")


if __name__ == "__main__":
    unittest.main()
