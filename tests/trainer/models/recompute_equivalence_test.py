"""Activation recomputation changes memory, not the training: under a real
`ctrun` (its store, its Gloo workers), ctrun-gpt with `--recompute full` and
`--recompute selective` ends 3 SGD (momentum) steps with every parameter
bitwise equal to `--recompute none`, and prints the same losses, on:

  ddp        2 ranks, --mesh dp=2 (DDP's bucketed all-reduce)
  pp2_tp2_sp 4 ranks, --mesh pp=2,tp=2 --sequence-parallel, 1F1B with 4
             micro-batches (the recomputed blocks run tensor-parallel
             collectives again in backward, one stage waits on the other)
  hsdp_tp2   4 ranks, --mesh dp=2,tp=2 --dp-shard full (FSDP frees each
             unit after its forward and gathers it again for its backward,
             where the recomputation runs on the regathered parameters)

Bitwise: the dumped parameter files (--dump-params) are compared byte for
byte. Also: recomputation is really on (full recomputation's peak step bytes
are below none's on every DDP rank: a count of tensor bytes, not a timing),
and the comparison can fail (another seed gives other bytes)."""
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from parallel_test_util import MODEL, gpt_tool, losses
from trainer_test_util import BUILD_DIR, plain_only

STEPS = ["--steps", "3"]
POLICIES = ["none", "full", "selective"]
LAYOUTS = [
    # (name, world, extra flags)
    ("ddp", 2, ["--mesh", "dp=2"]),
    ("pp2_tp2_sp", 4, ["--mesh", "pp=2,tp=2", "--sequence-parallel", "--micro-batches", "4"]),
    ("hsdp_tp2", 4, ["--mesh", "dp=2,tp=2", "--dp-shard", "full"]),
]
DEADLINE = 120
# Under ASan + UBSan (scripts/test-sanitized.sh): the DDP layout only.
if os.environ.get("CTRUN_SANITIZED") == "1":
    LAYOUTS = LAYOUTS[:1]


def dump_bytes(prefix):
    """{file suffix: bytes} of every PREFIX.pp*.tp*.{bin,json} dump."""
    files = sorted(glob.glob(prefix + ".pp*.tp*.*"))
    out = {}
    for path in files:
        with open(path, "rb") as f:
            out[path[len(prefix):]] = f.read()
    return out


def peak_step_bytes(log):
    """{rank: peak_step_bytes} from the workers' STATS lines."""
    return {int(r): int(b) for r, b in re.findall(r"^STATS rank=(\d+) .*?peak_step_bytes=(\d+)", log, re.M)}


class RecomputeEquivalenceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = gpt_tool()
        cls.ctrun = os.path.join(BUILD_DIR, "launcher", "ctrun")
        if not os.path.exists(cls.ctrun):
            raise unittest.SkipTest("ctrun is not built in CTRUN_BUILD_DIR")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_ctrun(self, name, world, extra, model=MODEL):
        """ctrun --nproc-per-node `world` ctrun-gpt ...; returns (dump bytes,
        losses, log). ctrun binds the workers' store on a port it picks."""
        prefix = os.path.join(self.tmp.name, name)
        argv = [self.ctrun, "--nproc-per-node", str(world), "--no-python", self.tool,
                *model, *STEPS, *extra, "--dump-params", prefix]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=DEADLINE, env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.assertEqual(proc.returncode, 0, f"{name}: ctrun exited {proc.returncode}:\n{proc.stdout[-4000:]}")
        dumped = dump_bytes(prefix)
        self.assertTrue(dumped, f"{name}: no parameter dump under {prefix}")
        return dumped, losses(proc.stdout), proc.stdout

    def layout_run(self, layout, world, extra, policy):
        key = (layout, policy)
        if key not in self.runs:
            self.runs[key] = self.run_ctrun(f"{layout}_{policy}", world, [*extra, "--recompute", policy])
        return self.runs[key]

    def test_full_and_selective_are_bitwise_equal_to_none(self):
        for layout, world, extra in LAYOUTS:
            ref_dump, ref_losses, _ = self.layout_run(layout, world, extra, "none")
            self.assertEqual(sorted(ref_losses), [1, 2, 3], layout)
            for policy in ("full", "selective"):
                with self.subTest(layout=layout, recompute=policy):
                    dumped, step_losses, _ = self.layout_run(layout, world, extra, policy)
                    self.assertEqual(sorted(dumped), sorted(ref_dump))
                    for suffix in ref_dump:
                        self.assertTrue(dumped[suffix] == ref_dump[suffix],
                                        f"{layout} --recompute {policy}: {suffix} differs from --recompute none")
                    self.assertEqual(step_losses, ref_losses)

    def test_recomputation_is_on(self):
        layout, world, extra = LAYOUTS[0]
        none = peak_step_bytes(self.layout_run(layout, world, extra, "none")[2])
        full = peak_step_bytes(self.layout_run(layout, world, extra, "full")[2])
        self.assertEqual(sorted(none), list(range(world)))
        self.assertEqual(sorted(full), list(range(world)))
        for rank in none:
            self.assertLess(full[rank], none[rank], f"rank {rank}: full recomputation kept as much as none")

    @plain_only("the comparison can fail: a check of the test, not a trainer path")
    def test_comparison_can_fail(self):
        layout, world, extra = LAYOUTS[0]
        ref_dump, ref_losses, _ = self.layout_run(layout, world, extra, "none")
        other = [a if a != "5" else "6" for a in MODEL]  # another seed
        self.assertNotEqual(other, MODEL)
        dumped, step_losses, _ = self.run_ctrun("ddp_selective_other_seed", world,
                                                [*extra, "--recompute", "selective"], model=other)
        self.assertEqual(sorted(dumped), sorted(ref_dump))
        self.assertTrue(any(dumped[s] != ref_dump[s] for s in ref_dump if s.endswith(".bin")))
        self.assertNotEqual(step_losses, ref_losses)


if __name__ == "__main__":
    unittest.main()
