"""Tensor, pipeline and data parallelism on a device mesh compute the same
training as one process: a 4-block GPT (width 32, 4 heads) trained with SGD
(momentum) for 3 steps on the same byte-level text batches, under each
layout, ends with every parameter and every step's loss within 2e-5 of the
single-process model (float32; layouts differ only in the order of sums).

Layouts: tp 2 and 4; pp 2 and 4, each with 1F1B and GPipe; TP x DP; PP x DP;
the 3-D pp=2,dp=2,tp=2 on 8 ranks; tp 2 with sequence parallel; FSDP
(--strategy fsdp) at 2 and 4 ranks. Also: the
comparison can fail (another seed differs), each stage executes the
textbook 1F1B order, and a mesh that does not fit is a one-line usage
error (exit 2). Under ASan + UBSan, three of the layouts (see LAYOUTS)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from parallel_test_util import GptLayoutTest, MODEL, check_ok, run_dumped, run_gpt, worst_difference
from trainer_test_util import plain_only

TOL = 2e-5
STEPS = ["--steps", "3"]
LAYOUTS = [
    # (name, world, extra flags)
    ("tp2", 2, ["--mesh", "tp=2"]),
    ("tp4", 4, ["--mesh", "tp=4"]),
    ("pp2_1f1b", 2, ["--mesh", "pp=2", "--pp-schedule", "1f1b"]),
    ("pp2_gpipe", 2, ["--mesh", "pp=2", "--pp-schedule", "gpipe"]),
    ("pp4_1f1b", 4, ["--mesh", "pp=4", "--pp-schedule", "1f1b"]),
    ("pp4_gpipe", 4, ["--mesh", "pp=4", "--pp-schedule", "gpipe"]),
    ("tp2_dp2", 4, ["--mesh", "dp=2,tp=2"]),
    ("pp2_dp2", 4, ["--mesh", "pp=2,dp=2", "--pp-split", "3,1"]),
    ("pp2_dp2_tp2", 8, ["--mesh", "pp=2,dp=2,tp=2"]),
    ("tp2_sequence_parallel", 2, ["--mesh", "tp=2", "--sequence-parallel"]),
    # FSDP full-shard over all ranks: one unit per block (the default), and
    # one unit per stage (embedding, each block, head) at 4 ranks.
    ("fsdp2", 2, ["--strategy", "fsdp"]),
    ("fsdp4_per_stage", 4, ["--strategy", "fsdp", "--min-unit-params", "1"]),
]
# Under ASan + UBSan (CTRUN_SANITIZED=1): the 3-D layout (TP, 1F1B PP and DP
# at once), GPipe and sequence parallel cover every code path of the ten.
if os.environ.get("CTRUN_SANITIZED") == "1":
    LAYOUTS = [l for l in LAYOUTS if l[0] in ("pp2_dp2_tp2", "pp2_gpipe", "tp2_sequence_parallel")]


class ParallelEquivalenceTest(GptLayoutTest):
    def run_layout(self, name, world, extra, model=MODEL):
        params, step_losses, _ = run_dumped(self.tool, self.tmp.name, name, world, [*model, *STEPS, *extra])
        return params, step_losses

    def test_every_layout_matches_one_process(self):
        ref_params, ref_losses = self.reference
        self.assertEqual(sorted(ref_losses), [1, 2, 3])
        for name, world, extra in LAYOUTS:
            with self.subTest(layout=name):
                params, step_losses = self.run_layout(name, world, extra)
                self.assertEqual(sorted(step_losses), [1, 2, 3])
                for step, loss in ref_losses.items():
                    self.assertLessEqual(abs(step_losses[step] - loss), TOL, (step, step_losses, ref_losses))
                self.assertLessEqual(worst_difference(params, ref_params), TOL)

    @plain_only("the comparison can fail: a check of the test, not a trainer path")
    def test_comparison_can_fail(self):
        other = [a if a != "5" else "6" for a in MODEL]  # another seed
        params, step_losses = self.run_layout("tp2_other_seed", 2, ["--mesh", "tp=2"], model=other)
        self.assertGreater(worst_difference(params, self.reference[0]), 100 * TOL)
        self.assertGreater(abs(step_losses[1] - self.reference[1][1]), 100 * TOL)
        # and the training itself moves the weights
        self.assertGreater(worst_difference(self.reference[0], self.run_layout("zero_steps", 1, ["--steps", "0"])[0]),
                           100 * TOL)

    def test_each_stage_runs_the_textbook_1f1b_order(self):
        results = run_gpt(self.tool, 4, [*MODEL, "--steps", "1", "--mesh", "pp=4", "--micro-batches", "8",
                                         "--global-batch", "16", "--show-schedule"])
        check_ok(self, results, "pp4 m8")
        printed = "".join(out for _, out, _ in results)
        for stage, order in enumerate([
                "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"]):
            self.assertIn(f"schedule stage={stage}: {order}\n", printed)

    @plain_only("usage errors, raised before any training; mesh_shape_test runs the mesh checks sanitized")
    def test_bad_mesh_is_a_one_line_usage_error(self):
        cases = [
            (4, ["--mesh", "pp=2,dp=2,tp=2"],
             "--mesh pp=2,dp=2,tp=2: pp*dp*tp = 8 but WORLD_SIZE is 4 (make the product equal the number of workers)"),
            (3, ["--mesh", "tp=3"],
             "--mesh pp=1,dp=1,tp=3: tp=3 does not divide the model's attention heads (4); pick a tp that divides it"),
            (2, ["--mesh", "tp=two"],
             "--mesh 'tp=two': tp must be a positive integer (use e.g. --mesh pp=2,dp=2,tp=2)"),
            (2, ["--strategy", "fsdp", "--mesh", "tp=2"],
             "--strategy fsdp with --mesh tp=2: fsdp shards over all ranks; drop pp and tp from --mesh or "
             "use --strategy ddp"),
        ]
        for world, extra, message in cases:
            with self.subTest(mesh=extra):
                for code, _, err in run_gpt(self.tool, world, [*MODEL, *extra], timeout=60):
                    self.assertEqual(code, 2, err)
                    self.assertEqual(err, f"ctrun-gpt: {message}\n")


if __name__ == "__main__":
    unittest.main()
