"""Top-k compression's state (DGC's per-rank residual and momentum, and the
warm-up count) survives a checkpoint: 2 ranks with --grad-compression
topk:0.01 and error feedback, past the dense warm-up, stopped at step K
(--max-steps) and resumed to the end, end with exactly (bitwise) the
parameters of the uninterrupted run.

The comparison can fail: resumed with the checkpoint's top-k directory
removed (as a checkpoint saved without top-k), error feedback starts from
zero and the parameters differ. A missing rank file stops every rank with
one line naming it. At another world size (1 rank) the run resumes from the
ranks' mean and says so."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import binary, plain_only, read_floats, run_ranks_output

DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
WORLD = 2
# 640 samples / (2 ranks x 32) = 10 steps an epoch, 2 epochs; dense for the
# first 3 steps, stopped at step 12, mid-epoch, top-k for 9 steps before it.
STOP = 12
COMMON = ["--train-limit", "640", "--test-limit", "64", "--epochs", "2", "--batch-size", "32", "--lr", "0.05",
          "--momentum", "0.9", "--seed", "5", "--threads", "1", "--log-every", "0", "--checkpoint-every", "0",
          "--grad-compression", "topk:0.01", "--topk-warmup-steps", "3"]


class TopkResumeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = binary("trainer/apps/ctrun-fashion-mnist")
        if not os.path.exists(DATA):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.reference = cls.path("reference.bin")
        cls.run_ok(WORLD, ["--dump-params", cls.reference])
        cls.stopped = cls.path("stopped")
        cls.run_ok(WORLD, ["--checkpoint-dir", cls.stopped, "--max-steps", str(STOP)])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def launch(cls, world, extra):
        return run_ranks_output([cls.worker, *COMMON, *extra], world, timeout=120)

    @classmethod
    def run_ok(cls, world, extra):
        results = cls.launch(world, extra)
        for rank, (code, _, err) in enumerate(results):
            if code != 0:
                raise AssertionError(f"rank {rank} of {extra} exited {code}: {err[-2000:]}")
        return results[0][1]

    def copy_of_stopped(self, name):
        """A copy of the checkpoint directory at step STOP, to resume from."""
        copy = self.path(name)
        shutil.copytree(self.stopped, copy)
        return copy

    def resume(self, name, world=WORLD, edit=None):
        ckpt = self.copy_of_stopped(name)
        if edit:
            edit(ckpt)
        dump = self.path(name + ".bin")
        out = self.run_ok(world, ["--checkpoint-dir", ckpt, "--dump-params", dump])
        return out, read_floats(dump)

    def test_files_written_per_rank(self):
        step_dir = os.path.join(self.stopped, "topk", f"step-{STOP}")
        self.assertEqual(sorted(os.listdir(step_dir)), ["rank-0.pt", "rank-1.pt"])

    def test_resume_is_bitwise_the_uninterrupted_run(self):
        out, params = self.resume("exact")
        self.assertIn("top-k: restored each rank's residual and momentum from '", out)
        self.assertIn(f"({STOP} synced steps toward the warm-up)", out)
        self.assertTrue(params == read_floats(self.reference), "resumed parameters differ from the reference")
        # The end-of-epoch checkpoint (step 20) committed, then step 12's files went.
        self.assertEqual(os.listdir(os.path.join(self.path("exact"), "topk")), ["step-20"])

    @plain_only("the comparison's power to fail")
    def test_without_the_topk_state_the_run_differs(self):
        out, params = self.resume("no_state", edit=lambda ckpt: shutil.rmtree(os.path.join(ckpt, "topk")))
        self.assertIn(f"top-k: the checkpoint at step {STOP} has no top-k state", out)
        self.assertFalse(params == read_floats(self.reference), "the top-k state made no difference")

    def test_missing_rank_file_is_one_line_naming_it(self):
        ckpt = self.copy_of_stopped("missing")
        missing = os.path.join(ckpt, "topk", f"step-{STOP}", "rank-1.pt")
        os.remove(missing)
        results = self.launch(WORLD, ["--checkpoint-dir", ckpt])
        self.assertEqual([code for code, _, _ in results], [1, 1])
        err = results[1][2].strip()
        self.assertEqual(err, f"ctrun-fashion-mnist: top-k state '{missing}' is missing; remove its directory "
                              f"'{os.path.dirname(missing)}' to restart error feedback from zero")
        self.assertIn("another rank could not restore its top-k state", results[0][2])

    @plain_only("the world-size change runs the same load path as the exact resume")
    def test_other_world_size_starts_from_the_mean(self):
        out, params = self.resume("one_rank", world=1)
        self.assertIn("top-k: saved with 2 ranks, now 1: every rank starts from the mean", out)
        self.assertEqual(len(params), len(read_floats(self.reference)))


if __name__ == "__main__":
    unittest.main()
