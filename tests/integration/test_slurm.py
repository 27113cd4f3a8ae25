"""ctrun under a real Slurm (slurmctld + 2 slurmd + munge on this host, see
slurm/cluster.py): `sbatch scripts/slurm/allreduce.sbatch` runs
`srun ctrun <Gloo all-reduce>` on 2 nodes x 2 workers with no rendezvous
flags, Slurm's preemption signal reaches the workers, and Slurm's own
`--signal=B:USR1@N` ahead of a time limit makes ctrun-fashion-mnist save
(exit 75), the batch script requeue, and the second run resume at that step."""
import json
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
PREEMPT_SBATCH = os.path.join(h.HERE, "slurm", "preempt.sbatch")
DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE")


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

    def wait_requeued_job(self, job, timeout):
        """Waits (bounded poll of scontrol) until the job was requeued at least
        once and its last run ended; returns (state, exit code, restarts).
        Between the runs the job passes through REQUEUED and PENDING; the
        restart count goes up when `scontrol requeue` is called, so a job that
        ends with none was not requeued (that is returned at once too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.cluster.run(["scontrol", "-o", "show", "job", job]).stdout
            state = re.search(r"JobState=(\S+)", info).group(1)
            restarts = int(re.search(r"Restarts=(\d+)", info).group(1))
            if state in FINAL:
                return state, re.search(r"ExitCode=(\S+)", info).group(1), restarts
            time.sleep(0.1)
        self.fail(f"job {job} not requeued and ended within {timeout} s (last: {info.strip()}): "
                  f"{self.cluster.log_tail()}")

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

    @unittest.skipUnless(os.path.exists(DATA), "dataset-fashion-mnist is not installed")
    def test_signal_before_the_time_limit_saves_and_the_requeued_run_resumes(self):
        """slurm/preempt.sbatch, docs/preemption.md's script: `--time=1
        --signal=B:USR1@20 --requeue`, the batch shell passes SIGUSR1 on to
        `srun ctrun --preempt-grace 15 --preempt-signal SIGUSR1`, and on 75
        runs `scontrol requeue`. Nothing here signals the job: the notice is
        Slurm's own. slurmctld checks time limits every 30 s (fixed in Slurm),
        so the signal comes 20 to 50 s before the limit, 10 to 40 s into the
        run; the test cluster's cred_expire=10 and 1 s scheduler intervals
        start the requeued run about 15 s after the requeue (Slurm's defaults:
        2 to 3 min). About 30 to 70 s in all."""
        d = h.tempdir(self)
        ev = os.path.join(d, "events.jsonl")
        trainer = os.path.join(h.build_dir(), "trainer", "apps", "ctrun-fashion-mnist")
        # Far more steps than a minute takes: the first run is still training when
        # the signal comes. The script adds --max-steps 1 to the second run.
        train = [trainer, "--train-limit", "6400", "--test-limit", "100", "--epochs", "1000", "--batch-size", "16",
                 "--threads", "1", "--log-every", "1", "--checkpoint-dir", os.path.join(d, "ckpt")]
        job, out = self.submit(PREEMPT_SBATCH, *train, env={"CTRUN_EVENTS_FILE": ev})
        state, code, restarts = self.wait_requeued_job(job, timeout=150)
        with open(out) as f:
            log = f.read()
        # For messages: the log without its thousands of step lines.
        brief = "\n".join(line for line in log.splitlines() if "(rank 0, last batch)" not in line)
        self.assertEqual((state, code, restarts), ("COMPLETED", "0:0", 1), brief)
        # The script's own record of each run (run N: SLURM_RESTART_COUNT);
        # Slurm keeps only the last run's exit code. Slurm's "CANCELLED ...
        # DUE TO JOB REQUEUE" line shows only when the script is still there
        # when the requeue ends it, so it is not looked for.
        self.assertTrue("ctrun exited 75 in run 0\n" in log, brief)
        self.assertTrue("ctrun exited 0 in run 1\n" in log, brief)
        self.assertFalse("DUE TO TIME LIMIT" in log, brief)
        with open(ev) as f:
            events = [json.loads(line) for line in f]
        notices = [e for e in events if e["event"] == "preempt_notice"]
        saved = [e for e in events if e["event"] == "preempt_saved"]
        self.assertEqual([n["source"] for n in notices], ["SIGUSR1"], events)
        self.assertEqual(len(saved), 1, events)
        step = saved[0]["step"]
        self.assertLessEqual(saved[0]["seconds"], 15)
        # Saved before the one-minute limit: the first run's first event is
        # its start (within a second of the job's).
        self.assertLess(saved[0]["ts"] - events[0]["ts"], 60, events)
        # The second run goes on from exactly the saved step.
        resumed = re.search(r"resuming from '[^']*': step (\d+),", log)
        self.assertIsNotNone(resumed, brief)
        self.assertEqual(int(resumed.group(1)), step, brief)
        after = re.search(r" step (\d+):", log[resumed.end():])
        self.assertIsNotNone(after, log[resumed.start():])
        self.assertEqual(int(after.group(1)), step + 1, log[resumed.start():])


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
