"""Interleaved (virtual-stage) 1F1B computes the same training as one
process: an 8-block GPT (width 16, 2 heads, sequence 8; a shape no other
test uses, so that p=4 with v=2 chunks a stage holds one block a chunk)
trained with SGD (momentum) for 3 steps on the same byte-level text
batches ends with every step's loss within 1e-6 of the single-process run
(and every parameter within 2e-5), at p=2 (m=4) and p=4 (m=8), v=2, and
at p=2 with DDP over dp=2 (one DDP over both chunks, synchronised once a
step).

Also: the comparison can fail (another seed differs); each stage of p=2
executes Megatron's interleaved order, chunk numbers included; a
checkpoint of an interleaved mesh resumes on a plain 1F1B mesh and one of
a plain mesh on an interleaved one, ending equal to one process; a
micro-batch count that is not a multiple of p is a one-line usage error
(exit 2)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from parallel_test_util import GptLayoutTest, check_ok, run_dumped, run_gpt, worst_difference
from trainer_test_util import plain_only

LOSS_TOL = 1e-6
PARAM_TOL = 2e-5
MODEL = ["--layers", "8", "--width", "16", "--heads", "2", "--seq-len", "8",
         "--global-batch", "8", "--optimizer", "sgd", "--lr", "0.2", "--momentum", "0.9",
         "--log-every", "1", "--seed", "11"]
STEPS = ["--steps", "3"]
# (p, m, dp); under ASan + UBSan (scripts/test-sanitized.sh) only p=2 with
# dp=2: p=4 (its 4 ranks, twice the messages) runs in the plain suite.
LAYOUTS = [(2, 4, 1), (4, 8, 1), (2, 2, 2)]
if os.environ.get("CTRUN_SANITIZED") == "1":
    LAYOUTS = [(2, 2, 2)]


def interleaved(p, m, dp=1):
    return ["--mesh", f"pp={p},dp={dp}", "--pp-schedule", "interleaved", "--pp-virtual-stages", "2",
            "--micro-batches", str(m)]


class InterleavedEquivalenceTest(GptLayoutTest):
    def run_layout(self, name, world, extra, model=MODEL, steps=STEPS):
        params, step_losses, results = run_dumped(self.tool, self.tmp.name, name, world, [*model, *steps, *extra])
        return params, step_losses, "".join(out for _, out, _ in results)

    def assert_matches_reference(self, params, step_losses, steps=(1, 2, 3)):
        ref_params, ref_losses, _ = self.reference
        self.assertEqual(sorted(step_losses), list(steps))
        for step in steps:
            self.assertLessEqual(abs(step_losses[step] - ref_losses[step]), LOSS_TOL,
                                 (step, step_losses, ref_losses))
        self.assertLessEqual(worst_difference(params, ref_params), PARAM_TOL)

    def test_interleaved_matches_one_process(self):
        self.assertEqual(sorted(self.reference[1]), [1, 2, 3])
        for p, m, dp in LAYOUTS:
            with self.subTest(p=p, m=m, dp=dp):
                params, step_losses, out = self.run_layout(f"pp{p}_dp{dp}_v2", p * dp, interleaved(p, m, dp))
                self.assert_matches_reference(params, step_losses)
                self.assertIn(f"interleaved with 2 chunks a stage: bubble (p-1)/(v*m+p-1) = "
                              f"{(p - 1) / (2 * m + p - 1):.3f}", out)
                if p == 4:
                    self.assertIn("rank 1: stage 1 (blocks 1-1 + 5-5)", out)

    @plain_only("the comparison can fail: a check of the test, not a trainer path")
    def test_comparison_can_fail(self):
        other = [a if a != "11" else "12" for a in MODEL]  # another seed
        params, step_losses, _ = self.run_layout("pp2_v2_other_seed", 2, interleaved(2, 4), model=other)
        self.assertGreater(worst_difference(params, self.reference[0]), 100 * PARAM_TOL)
        self.assertGreater(abs(step_losses[1] - self.reference[1][1]), 100 * LOSS_TOL)

    def test_each_stage_runs_megatrons_interleaved_order(self):
        results = run_gpt(self.tool, 2, [*MODEL, "--steps", "1", *interleaved(2, 4), "--show-schedule"])
        check_ok(self, results, "pp2 v2 m4")
        printed = "".join(out for _, out, _ in results)
        for stage, order in enumerate([
                "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0",
                "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0"]):
            self.assertIn(f"schedule stage={stage}: {order}\n", printed)

    def test_checkpoints_move_between_interleaved_and_plain(self):
        ckpt = os.path.join(self.tmp.name, "ckpt")
        save = ["--checkpoint-dir", ckpt, "--checkpoint-every", "1"]
        # Step 1 on pp=2 interleaved: stage 0 saves blocks 0-1 and 4-5.
        self.run_layout("ckpt_a", 2, [*interleaved(2, 4), *save], steps=["--steps", "1"])
        # Step 2 on plain 1F1B pp=2 (stage 0: blocks 0-3), from that checkpoint.
        _, plain_losses, out = self.run_layout("ckpt_b", 2, ["--mesh", "pp=2", *save], steps=["--steps", "2"])
        self.assertIn("resumed from step 1 (saved by 2 ranks)", out)
        # Step 3 on pp=4 interleaved (one block a chunk), from the plain one.
        params, last_losses, out = self.run_layout("ckpt_c", 4, [*interleaved(4, 4), *save], steps=STEPS)
        self.assertIn("resumed from step 2 (saved by 2 ranks)", out)
        self.assert_matches_reference(params, {**plain_losses, **last_losses}, steps=(2, 3))

    @plain_only("a usage error: gpt_pipeline_flags_test covers the parser")
    def test_micro_batches_not_a_multiple_of_p_is_a_usage_error(self):
        for code, out, err in run_gpt(self.tool, 2, [*MODEL, *STEPS, *interleaved(2, 3)], timeout=60):
            self.assertEqual(code, 2, err)
            self.assertEqual(err, "ctrun-gpt: --micro-batches 3 is not a multiple of the pipeline's 2 stages, which "
                                  "--pp-schedule interleaved with --pp-virtual-stages 2 needs; use 2 or 4\n")
            self.assertNotIn("loss", out)


if __name__ == "__main__":
    unittest.main()
