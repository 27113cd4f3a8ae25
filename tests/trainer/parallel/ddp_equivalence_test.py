"""DDP equivalence: k steps of SmallCnn + SGD(momentum) under DDP on 1, 2 and 4
real processes (Gloo over TCP) end with the same parameters as one process
trained on the concatenated global batch.

Tolerance: max |ddp - single| <= 2e-5 over all parameters (float32; the only
difference is summation order: per-rank means averaged by all-reduce versus
one mean). With fp16 gradient compression: 5e-3. Each case also checks that
the comparison can fail: a run on a different batch differs by far more."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
import fork_server
from trainer_test_util import SANITIZED, binary, plain_only, read_floats, run_ranks

TOL = 2e-5
TOL_FP16 = 5e-3


class DdpEquivalenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = binary("tests/trainer/trainer_ddp_check")
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def out(self, name):
        return os.path.join(self.tmp.name, name)

    def single(self, world, steps, batch, accum=1, unused=False):
        """The single process's parameters (each configuration run once)."""
        path = self.out(f"single_{world}_{steps}_{batch}_{accum}_{unused}.bin")
        if os.path.exists(path):
            return read_floats(path)
        argv = [self.tool, "train", "--single", "--world", str(world), "--steps", str(steps),
                "--batch", str(batch * accum), "--out", path]
        if unused:
            argv.append("--unused")
        fork_server.run(argv, check=True, timeout=120)
        return read_floats(path)

    def ddp(self, world, steps, batch, *extra):
        path = self.out(f"ddp_{world}_{'_'.join(extra)}.bin")
        if os.path.exists(path):
            os.remove(path)
        argv = [self.tool, "train", "--world", str(world), "--steps", str(steps),
                "--batch", str(batch), "--out", path, *extra]
        results = run_ranks(argv, world)
        for rank, (code, err) in enumerate(results):
            self.assertEqual(code, 0, f"rank {rank} failed: {err}")
        return read_floats(path), results[0][1]

    def assertClose(self, a, b, tol):
        self.assertEqual(len(a), len(b))
        worst = max(abs(x - y) for x, y in zip(a, b))
        self.assertLessEqual(worst, tol, f"max |diff| {worst} > {tol}")
        return worst

    def test_world_sizes_match_single_process(self):
        # Under ASan + UBSan (CTRUN_SANITIZED=1): 1 and 4 ranks cover the paths 2 ranks take.
        for world in ((1, 4) if SANITIZED else (1, 2, 4)):
            with self.subTest(world=world):
                got, _ = self.ddp(world, 4, 4)
                self.assertClose(got, self.single(world, 4, 4), TOL)

    @plain_only("the comparison can fail: a check of the test, not a trainer path")
    def test_comparison_can_fail(self):
        got, _ = self.ddp(2, 4, 4)
        other = self.single(1, 4, 4)  # half the batch: a different trajectory
        worst = max(abs(x - y) for x, y in zip(got, other))
        self.assertGreater(worst, 100 * TOL)

    def test_many_small_buckets(self):
        got, err = self.ddp(2, 4, 4, "--bucket-cap-mb", "0.001")
        self.assertIn("buckets=4", err)  # a bias+weight pair each
        self.assertClose(got, self.single(2, 4, 4), TOL)

    def test_no_sync_accumulation_equals_larger_batch(self):
        got, _ = self.ddp(2, 3, 4, "--accum", "3")
        self.assertClose(got, self.single(2, 3, 4, accum=3), TOL)

    def test_unused_parameter_is_left_alone(self):
        got, _ = self.ddp(2, 3, 4, "--unused")
        self.assertClose(got, self.single(2, 3, 4, unused=True), TOL)

    def test_fp16_compression_is_close(self):
        got, _ = self.ddp(2, 4, 4, "--compress", "fp16")
        reference = self.single(2, 4, 4)
        worst = self.assertClose(got, reference, TOL_FP16)
        self.assertGreater(worst, 0.0)  # it really went through fp16

    def test_bf16_compression_is_close_or_refused_clearly(self):
        path = self.out("bf16.bin")
        argv = [self.tool, "train", "--world", "2", "--steps", "4", "--batch", "4", "--out", path,
                "--compress", "bf16"]
        results = run_ranks(argv, 2)
        if all(code == 0 for code, _ in results):
            self.assertClose(read_floats(path), self.single(2, 4, 4), 5e-2)
            return
        for code, err in results:  # torch 1.13's Gloo has no bf16 reduction
            self.assertEqual(code, 1)
            self.assertIn("--grad-compression bf16: the gloo process group of this libtorch "
                          "cannot all-reduce bfloat16", err)


if __name__ == "__main__":
    unittest.main()
