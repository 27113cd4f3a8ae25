"""A preemption notice (CTRUN_PREEMPT_FILE appears) while 2 ranks of
ctrun-fashion-mnist train: the ranks agree on one step, save its
checkpoint, each writes that step to its CTRUN_PREEMPT_SAVED_FILE and
exits 0; a new run from the same --checkpoint-dir starts at the next step
and, in --deterministic mode, ends with exactly (bitwise) the parameters of
an uninterrupted run. Without --checkpoint-dir the ranks exit 1, rank 0
says so in one line, and no marker is written. A notice at an epoch's
last step is taken after the epoch's end, so the resume starts the next
epoch. ctrun-gpt: the same save at one step, and the resume after it,
on a dp=2 mesh.

The test plays the launcher: it starts the ranks with torchrun's
environment plus ctrun's two preemption variables, and creates the notice
file (atomically, as ctrun does) once rank 0 has logged a step."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import SANITIZED, Store, binary, plain_only, rank_env, spawn

DEADLINE = 100
# Under ASan + UBSan one epoch (the notice comes at step 2 of 16; 32 in two epochs).
COMMON = ["--train-limit", "2000", "--test-limit", "500", "--epochs", "1" if SANITIZED else "2",
          "--deterministic", "--threads", "1", "--log-every", "1", "--seed", "5"]
NOTICE_AFTER_STEP = 2


def write_notice(path):
    """ctrun's notice: one JSON line, written to a temporary file and renamed."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps({"deadline_unix_s": 1790000000.5, "budget_s": 20.0, "source": "SIGUSR1"}) + "\n")
    os.rename(tmp, path)


class PreemptSaveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = binary("trainer/apps/ctrun-fashion-mnist")
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.reference = cls.path("reference.bin")
        codes, _, errs = cls.run_ranks(COMMON + ["--checkpoint-dir", cls.path("ref_ckpt"),
                                                 "--dump-params", cls.reference])
        assert codes == [0, 0], errs

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def run_ranks(cls, args, env=None, notice_after_step=None, worker=None):
        """Runs 2 ranks with `env` (a function of the rank) added to their
        environment; with notice_after_step, writes the notice file (env's
        CTRUN_PREEMPT_FILE) once rank 0 has logged that step. Returns
        (codes, rank-0 stdout, stderrs)."""
        store = Store()
        envs = [rank_env(r, 2, store.port, env(r) if env else None) for r in range(2)]
        procs = [spawn([worker or cls.worker, *args], envs[r],
                       stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for r in range(2)]  # 2 ranks: both leak-checked
        lines = []
        try:
            for line in procs[0].stdout:
                lines.append(line)
                if notice_after_step is not None and f" step {notice_after_step}:" in line:
                    write_notice(envs[0]["CTRUN_PREEMPT_FILE"])
                    notice_after_step = None
            codes = [p.wait(timeout=DEADLINE) for p in procs]
            errs = [p.stderr.read() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                for stream in (p.stdout, p.stderr):
                    if stream:
                        stream.close()
        return codes, "".join(lines), errs

    def preempt_env(self, name):
        """Rank r's preemption variables: one notice path, a marker each."""
        return lambda r: {"CTRUN_PREEMPT_FILE": self.path(f"{name}_notice.json"),
                          "CTRUN_PREEMPT_SAVED_FILE": self.path(f"{name}_saved_{r}"),
                          "TORCHELASTIC_ERROR_FILE": self.path(f"{name}_error_{r}.json")}

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_saves_one_step_and_resumes_from_the_next(self):
        ckpt = self.path("ckpt")
        out = self.path("resumed.bin")
        args = COMMON + ["--checkpoint-dir", ckpt, "--dump-params", out]
        codes, log, errs = self.run_ranks(args, self.preempt_env("first"), notice_after_step=NOTICE_AFTER_STEP)
        self.assertEqual(codes, [0, 0], errs)
        self.assertIn("preempted: saved step", log, "the run ended before the notice was seen")
        markers = [self.read(self.path(f"first_saved_{r}")).decode() for r in range(2)]
        self.assertRegex(markers[0], r"^\d+\n$")
        self.assertEqual(markers[0], markers[1])
        step = int(markers[0])
        self.assertGreaterEqual(step, NOTICE_AFTER_STEP, log)
        self.assertRegex(log, rf"preempted: saved step {step} in \d+\.\d\d s\n")
        self.assertNotIn(f" step {step + 1}:", log)
        self.assertNotIn("done:", log)
        self.assertFalse(os.path.exists(out), "a preempted run must stop at the save")

        # A new job, preemption on but no notice: it resumes at the next step.
        codes, log, errs = self.run_ranks(args, self.preempt_env("second"))
        self.assertEqual(codes, [0, 0], errs)
        self.assertRegex(log, rf"resuming from '.*checkpoint.pt': step {step},")
        steps = [int(s) for s in re.findall(r" step (\d+):", log)]
        self.assertEqual(steps[0], step + 1, log)
        self.assertFalse(os.path.exists(self.path("second_saved_0")))
        self.assertEqual(self.read(out), self.read(self.reference))

    @plain_only("the save, the markers and the resume are test_saves_one_step_and_resumes_from_the_next's; "
                "this one adds only where an epoch's last boundary falls")
    def test_at_an_epochs_end_the_resume_starts_the_next_epoch(self):
        # 128 samples on 2 ranks: one step per epoch, so the notice (there
        # from the start) is seen at the boundary after the epoch's end.
        args = ["--train-limit", "128", "--test-limit", "200", "--epochs", "2", "--deterministic",
                "--threads", "1", "--log-every", "1", "--seed", "5", "--checkpoint-dir", self.path("edge_ckpt")]
        reference, out = self.path("edge_reference.bin"), self.path("edge.bin")
        codes, _, errs = self.run_ranks(args[:-2] + ["--dump-params", reference])
        self.assertEqual(codes, [0, 0], errs)
        env = self.preempt_env("edge")
        write_notice(env(0)["CTRUN_PREEMPT_FILE"])
        codes, log, errs = self.run_ranks(args + ["--dump-params", out], env)
        self.assertEqual(codes, [0, 0], errs)
        self.assertRegex(log, r"epoch 0 done: .*\npreempted: saved step 1 in ")
        self.assertEqual([self.read(self.path(f"edge_saved_{r}")) for r in range(2)], [b"1\n", b"1\n"])
        codes, log, errs = self.run_ranks(args + ["--dump-params", out])
        self.assertEqual(codes, [0, 0], errs)
        self.assertIn("step 1, epoch 1, 0 samples into it", log)
        self.assertEqual(re.findall(r" step (\d+):", log), ["2"])
        self.assertEqual(self.read(out), self.read(reference))

    def test_without_checkpoint_dir_nothing_is_saved(self):
        env = self.preempt_env("nodir")
        write_notice(env(0)["CTRUN_PREEMPT_FILE"])  # there before the first step
        codes, _, errs = self.run_ranks(COMMON, env)
        self.assertEqual(codes, [1, 1], errs)
        line = "preemption notice at step 1, but no --checkpoint-dir: nothing saved"
        self.assertEqual(errs[0].strip().splitlines()[-1], line, errs[0])
        self.assertNotIn(line, errs[1])
        for r in range(2):
            self.assertFalse(os.path.exists(self.path(f"nodir_saved_{r}")))
            self.assertIn(line, json.loads(self.read(self.path(f"nodir_error_{r}.json")))["message"])

    @plain_only("the save on a notice is preempt_save.h's, which the fashion-mnist tests run sanitized")
    def test_gpt_saves_one_step_and_resumes_from_the_next(self):
        # The checkpoint is the periodic one (parallel_checkpoint_test checks
        # its resume bitwise): here, that the notice takes it at one step.
        from parallel_test_util import MODEL, gpt_tool
        args = MODEL + ["--steps", "4", "--micro-batches", "1", "--checkpoint-dir", self.path("gpt_ckpt")]
        env = self.preempt_env("gpt")
        write_notice(env(0)["CTRUN_PREEMPT_FILE"])  # seen at the first boundary, after step 1
        codes, log, errs = self.run_ranks(args, env, worker=gpt_tool())
        self.assertEqual(codes, [0, 0], errs)
        self.assertRegex(log, r"preempted: saved step 1 in \d+\.\d\d s\n")
        self.assertEqual([self.read(self.path(f"gpt_saved_{r}")) for r in range(2)], [b"1\n", b"1\n"])
        self.assertEqual(re.findall(r"(?m)^step (\d+) loss", log), ["1"])
        codes, log, errs = self.run_ranks(args, worker=gpt_tool())
        self.assertEqual(codes, [0, 0], errs)
        self.assertIn("resumed from step 1 ", log)
        self.assertEqual(re.findall(r"(?m)^step (\d+) loss", log), ["2", "3", "4"])

if __name__ == "__main__":
    unittest.main()
