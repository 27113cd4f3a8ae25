"""kill -9 of a worker mid-epoch: the run resumes from rank 0's last
checkpoint and, in --deterministic mode, ends with exactly (bitwise) the
parameters of an uninterrupted run.

test_kill9_under_ctrun: `ctrun --nproc-per-node 2 --max-restarts 1` restarts
the group itself (skipped when ctrun is not built in CTRUN_BUILD_DIR).
test_kill9_relaunched_by_hand: the test plays the launcher (torchrun's env,
TORCHELASTIC_USE_AGENT_STORE=False), so the trainer side is covered alone.
test_resume_at_other_world_size: stop 2 ranks mid-epoch, go on with 3: the
epoch's remaining samples are re-sharded and the run reaches the same end
step."""
import os
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import BUILD_DIR, Store, binary, leak_check_rank, rank_env, spawn

DEADLINE = 120
# Under ASan + UBSan one epoch: the kill at step 12 and the resume from step
# 10 or 15 fall in it.
COMMON = ["--train-limit", "4000", "--test-limit", "500", "--epochs", "2", "--deterministic",
          "--checkpoint-every", "5", "--log-every", "1", "--seed", "3"]


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def descendants(pid):
    out = []
    for child in children(pid):
        out.append(child)
        out.extend(descendants(child))
    return out


class ResumeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = binary("trainer/apps/ctrun-fashion-mnist")
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.reference = os.path.join(cls.tmp.name, "reference.bin")
        ckpt = os.path.join(cls.tmp.name, "ref_ckpt")
        os.mkdir(ckpt)
        cls.run_by_hand(2, COMMON + ["--checkpoint-dir", ckpt, "--dump-params", cls.reference])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def run_by_hand(cls, world, args, kill_rank=None, kill_at_step=None):
        """Launches `world` ranks; with kill_rank, SIGKILLs it once rank 0 logs
        `kill_at_step`, then stops the rest. Returns (codes, rank-0 stdout)."""
        store = Store()
        procs = [spawn([cls.worker, *args], rank_env(r, world, store.port),
                       stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, stderr=subprocess.PIPE,
                       leak_check=leak_check_rank(r, world))
                 for r in range(world)]
        lines = []
        try:
            for line in procs[0].stdout:
                lines.append(line)
                if kill_rank is not None and f" step {kill_at_step}:" in line:
                    procs[kill_rank].send_signal(signal.SIGKILL)
                    kill_rank = None
            codes = [p.wait(timeout=DEADLINE) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return codes, "".join(lines), [p.stderr.read() for p in procs]

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_kill9_relaunched_by_hand(self):
        ckpt = os.path.join(self.tmp.name, "hand_ckpt")
        os.mkdir(ckpt)
        out = os.path.join(self.tmp.name, "hand.bin")
        args = COMMON + ["--checkpoint-dir", ckpt, "--dump-params", out, "--store-timeout", "30"]
        codes, _, errs = self.run_by_hand(2, args, kill_rank=1, kill_at_step=12)
        self.assertEqual(codes[1], -signal.SIGKILL)
        # Rank 0 fails with one line naming the failed collective's peer, and
        # is not killed by the signal a write to the dead peer raises (SIGPIPE).
        self.assertEqual(codes[0], 1, f"rank 0 must fail when its peer dies: {errs[0]}")
        self.assertEqual(len(errs[0].splitlines()), 1, errs[0])
        self.assertRegex(errs[0], r"^ctrun-fashion-mnist: .*(peer|Broken pipe)")
        self.assertFalse(os.path.exists(out))
        codes, log, errs = self.run_by_hand(2, args)
        self.assertEqual(codes, [0, 0], errs)
        self.assertRegex(log, r"resuming from '.*checkpoint.pt': step 1[05]")
        self.assertEqual(self.read(out), self.read(self.reference))

    def test_resume_at_other_world_size(self):
        ckpt = os.path.join(self.tmp.name, "elastic_ckpt")
        os.mkdir(ckpt)
        args = COMMON + ["--checkpoint-dir", ckpt]
        codes, _, errs = self.run_by_hand(2, args + ["--max-steps", "20"])
        self.assertEqual(codes, [0, 0], errs)
        codes, log, errs = self.run_by_hand(3, args)
        self.assertEqual(codes, [0, 0, 0], errs)
        # 4000 samples, epoch 0: 20 steps x 2 ranks x 64 = 2560 consumed; the
        # remaining 1440 on 3 ranks are 480 each = 8 steps; epoch 1 is 21.
        self.assertIn("step 20, epoch 0, 2560 samples into it (saved with 2 ranks, now 3)", log)
        self.assertIn("done: 49 steps", log)

    def test_kill9_under_ctrun(self):
        ctrun = os.environ.get("CTRUN_BIN") or os.path.join(BUILD_DIR, "launcher", "ctrun")
        if not os.path.exists(ctrun):
            self.skipTest("ctrun is not built in CTRUN_BUILD_DIR (or set CTRUN_BIN)")
        ckpt = os.path.join(self.tmp.name, "ctrun_ckpt")
        os.mkdir(ckpt)
        out = os.path.join(self.tmp.name, "ctrun.bin")
        argv = [ctrun, "--nproc-per-node", "2", "--max-restarts", "1",
                "--no-python", self.worker,  # ctrun binds the workers' store on a port of its choosing
                *COMMON, "--checkpoint-dir", ckpt, "--dump-params", out]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, OMP_NUM_THREADS="1"))
        lines, killed = [], None
        try:
            for line in proc.stdout:
                lines.append(line)
                if killed is None and " step 12:" in line:
                    workers = [p for p in descendants(proc.pid)]
                    self.assertGreaterEqual(len(workers), 2, "".join(lines))
                    killed = workers[-1]
                    os.kill(killed, signal.SIGKILL)
            code = proc.wait(timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log = "".join(lines)
        self.assertIsNotNone(killed, log)
        self.assertEqual(code, 0, log)
        self.assertRegex(log, r"resuming from '.*checkpoint.pt': step 1[05]")
        self.assertEqual(self.read(out), self.read(self.reference))


if __name__ == "__main__":
    unittest.main()
