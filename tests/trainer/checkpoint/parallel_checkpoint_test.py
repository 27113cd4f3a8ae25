"""Checkpoints of a model on a device mesh: saved per mesh coordinate,
resumed on another mesh, and used by ctrun's restart when a pipeline stage
dies.

test_resume_on_another_mesh: 2 steps on pp=2,dp=2,tp=2 (8 ranks), then 2
more resumed on pp=1,dp=4,tp=2 (under ASan + UBSan: pp=2,tp=2, then
dp=2,tp=2): the parameters (and SGD momentum, which the resumed steps use)
match 4 unbroken steps of one process within 2e-5.
test_dead_stage_restarts_from_checkpoint: under `ctrun --nproc-per-node 4
--max-restarts 1`, pipeline stage 1 of pp=2,tp=2 SIGKILLs itself before
step 3 (fault injection on the first attempt); ctrun restarts the group,
which resumes from the step-3 checkpoint and ends equal to an unbroken run.
test_sharded_dp_resumes_across_layouts: FSDP/HSDP (--dp-shard) saves and
loads the same checkpoints: 2 steps on pp=2,dp=2 with --dp-shard full
(units gathered per pipeline step), 1 more resumed on dp=4 with 2 replicas
x 2 shards, the last resumed on a DDP mesh (tp=2): every resume re-lays the
flat shards and their momentum out, and the run ends equal to one process
(under ASan + UBSan: dp=2 full, then tp=2, then dp=2 grad-op, on 2 ranks).
test_corrupt_checkpoint_is_refused: a shard cut short is named in a
one-line error and nothing is trained.
test_adam_state_resumes_on_another_mesh: Adam (ctrun-gpt's default) saved
on tp=2, resumed on one rank: its step count is one number per parameter,
not a slice to join, and the run ends equal to an unbroken one."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from parallel_test_util import MODEL, check_ok, full_params, gpt_tool, losses, run_gpt, worst_difference
from trainer_test_util import BUILD_DIR, SANITIZED

TOL = 2e-5
DEADLINE = 240


class ParallelCheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = gpt_tool()
        cls.tmp = tempfile.TemporaryDirectory()
        prefix = os.path.join(cls.tmp.name, "single")
        results = run_gpt(cls.tool, 1, [*MODEL, "--steps", "4", "--micro-batches", "1", "--dump-params", prefix])
        assert results[0][0] == 0, results[0][2]
        cls.reference = full_params(prefix)
        cls.reference_losses = losses(results[0][1])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_resume_on_another_mesh(self):
        # Under ASan + UBSan the same pp/tp split on 4 ranks (no dp): the
        # checkpoint code is the same, at half the process starts.
        world, saved, resumed = (4, "pp=2,tp=2", "dp=2,tp=2") if SANITIZED else (8, "pp=2,dp=2,tp=2", "pp=1,dp=4,tp=2")
        ckpt = os.path.join(self.tmp.name, "mesh_ckpt")
        check_ok(self, run_gpt(self.tool, world, [*MODEL, "--steps", "2", "--mesh", saved,
                                                  "--checkpoint-dir", ckpt, "--checkpoint-every", "2"]), saved)
        self.assertEqual(sorted(os.listdir(os.path.join(ckpt, "step-2"))),
                         ["meta.pt"] + [f"shard-pp{p}-tp{t}.pt" for p in (0, 1) for t in (0, 1)])
        prefix = os.path.join(self.tmp.name, "resumed")
        results = run_gpt(self.tool, world, [*MODEL, "--steps", "4", "--mesh", resumed,
                                             "--checkpoint-dir", ckpt, "--dump-params", prefix])
        check_ok(self, results, resumed)
        out = "".join(o for _, o, _ in results)
        self.assertIn(f"resumed from step 2 (saved by {world} ranks)", out)
        self.assertEqual(sorted(losses(out)), [3, 4])
        self.assertLessEqual(worst_difference(full_params(prefix), self.reference), TOL)

    def test_dead_stage_restarts_from_checkpoint(self):
        ctrun = os.path.join(BUILD_DIR, "launcher", "ctrun")
        if not os.path.exists(ctrun):
            self.skipTest("ctrun is not built in CTRUN_BUILD_DIR")
        ckpt = os.path.join(self.tmp.name, "restart_ckpt")
        prefix = os.path.join(self.tmp.name, "restarted")
        # No --master-port: ctrun binds the workers' store on a port of its choosing.
        argv = [ctrun, "--nproc-per-node", "4", "--max-restarts", "1",
                "--no-python", self.tool, *MODEL, "--steps", "4", "--mesh", "pp=2,tp=2",
                "--checkpoint-dir", ckpt, "--checkpoint-every", "1", "--crash-stage", "1", "--crash-at-step", "3",
                "--dump-params", prefix]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=DEADLINE, env=dict(os.environ, OMP_NUM_THREADS="1"))
        log = proc.stdout
        self.assertEqual(proc.returncode, 0, log[-4000:])
        self.assertIn("fault injection, SIGKILL before step 3", log)
        self.assertIn("resumed from step 3 (saved by 4 ranks)", log)
        self.assertRegex(log, r"restart|Restart")
        self.assertLessEqual(worst_difference(full_params(prefix), self.reference), TOL)

    def test_sharded_dp_resumes_across_layouts(self):
        ckpt = os.path.join(self.tmp.name, "sharded_dp_ckpt")
        chain = [  # (steps, world, flags): each run resumes the one before
            (2, 4, ["--mesh", "pp=2,dp=2", "--dp-shard", "full"]),
            (3, 4, ["--mesh", "dp=4", "--dp-shard", "full", "--dp-shard-size", "2"]),
            (4, 2, ["--mesh", "tp=2"]),
        ]
        if SANITIZED:  # the same save and load code on 2 ranks a run
            chain = [(2, 2, ["--mesh", "dp=2", "--dp-shard", "full"]), (3, 2, ["--mesh", "tp=2"]),
                     (4, 2, ["--mesh", "dp=2", "--dp-shard", "grad-op"])]
        saver = {2: chain[0][1], 3: chain[1][1], 4: chain[2][1]}
        prefix = os.path.join(self.tmp.name, "sharded_dp_resumed")
        for steps, world, flags in chain:
            dump = ["--dump-params", prefix] if steps == 4 else []  # dumps of other layouts have other files
            results = run_gpt(self.tool, world, [*MODEL, "--steps", str(steps), *flags, "--checkpoint-dir", ckpt,
                                                 *dump])
            check_ok(self, results, " ".join(flags))
            out = "".join(o for _, o, _ in results)
            if steps > 2:
                self.assertIn(f"resumed from step {steps - 1} (saved by {saver[steps - 1]} ranks)", out)
                self.assertEqual(sorted(losses(out)), [steps])
        self.assertLessEqual(worst_difference(full_params(prefix), self.reference), TOL)

    def test_adam_state_resumes_on_another_mesh(self):
        adam = [a for a in MODEL if a not in ("--momentum", "0.9")]
        adam[adam.index("sgd")], adam[adam.index("0.2")] = "adam", "0.01"
        reference = os.path.join(self.tmp.name, "adam_single")
        check_ok(self, run_gpt(self.tool, 1, [*adam, "--steps", "4", "--dump-params", reference]), "unbroken")
        ckpt = os.path.join(self.tmp.name, "adam_ckpt")
        check_ok(self, run_gpt(self.tool, 2, [*adam, "--steps", "2", "--mesh", "tp=2",
                                              "--checkpoint-dir", ckpt]), "tp=2")
        prefix = os.path.join(self.tmp.name, "adam_resumed")
        results = run_gpt(self.tool, 1, [*adam, "--steps", "4", "--checkpoint-dir", ckpt, "--dump-params", prefix])
        check_ok(self, results, "resumed")
        self.assertIn("resumed from step 2 (saved by 2 ranks)", results[0][1])
        # Adam divides by the root of its second moment, which magnifies the
        # last-bit differences of tp=2's sums (2.1e-5 seen); a step count
        # restarted or doubled moves parameters by ~lr/10 = 1e-3.
        self.assertLessEqual(worst_difference(full_params(prefix), full_params(reference)), 1e-4)

    def test_corrupt_checkpoint_is_refused(self):
        ckpt = os.path.join(self.tmp.name, "corrupt_ckpt")
        check_ok(self, run_gpt(self.tool, 2, [*MODEL, "--steps", "1", "--mesh", "tp=2",
                                              "--checkpoint-dir", ckpt]), "save")
        shard = os.path.join(ckpt, "step-1", "shard-pp0-tp1.pt")
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) // 2)
        results = run_gpt(self.tool, 2, [*MODEL, "--steps", "2", "--mesh", "tp=2", "--checkpoint-dir", ckpt])
        for code, out, err in results:
            self.assertEqual(code, 1, err)
            self.assertRegex(err, rf"^ctrun-gpt: checkpoint '{ckpt}/step-1/shard-pp0-tp1.pt' cannot be loaded "
                                  r"\(unreadable: .*\); remove it or use the model it was saved from\n$")
            self.assertNotIn("step 2 loss", out)


if __name__ == "__main__":
    unittest.main()
