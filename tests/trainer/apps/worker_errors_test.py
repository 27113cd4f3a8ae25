"""The example worker fails with one clear line and a non-zero exit, and
overwrites nothing, when: it was not started by a launcher, the store is
unreachable, the checkpoint is corrupt or from another run, or the dataset is
missing. It also writes the message to TORCHELASTIC_ERROR_FILE, bad flags
(exit 2) included, as ctrun-gpt does for its --mesh errors. A missing
--checkpoint-dir is made, as os.makedirs(exist_ok=True) would."""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
import fork_server
from trainer_test_util import RefusingPort, Store, binary, rank_env

SMALL = ["--train-limit", "256", "--test-limit", "100", "--epochs", "1", "--log-every", "0"]


class WorkerErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = binary("trainer/apps/ctrun-fashion-mnist")

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.stores = []

    def env(self, rank=0, world=1, extra=None):
        """A rank's environment, with a store of its own (kept until the test ends)."""
        self.stores.append(Store())
        return rank_env(rank, world, self.stores[-1].port, extra)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_worker(self, args, env):
        p = fork_server.run([self.worker, *args], env=env, capture_output=True, timeout=90)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        return lines[0]

    def test_not_launched(self):
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        line = self.run_worker(SMALL, env)
        self.assertIn("RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set", line)
        self.assertIn("ctrun", line)

    def test_store_unreachable(self):
        error_file = os.path.join(self.tmp, "error.json")
        with RefusingPort() as nobody:
            env = rank_env(1, 2, nobody.port, {"TORCHELASTIC_ERROR_FILE": error_file})
            line = self.run_worker(SMALL + ["--store-timeout", "2"], env)
        self.assertIn("cannot reach the c10d store at MASTER_ADDR:MASTER_PORT=127.0.0.1:", line)
        with open(error_file) as f:
            self.assertIn("cannot reach the c10d store", json.load(f)["message"])

    def test_dataset_missing(self):
        line = self.run_worker(SMALL + ["--data-dir", "/nonexistent"], self.env())
        self.assertIn("'/nonexistent/train-images-idx3-ubyte.gz' not found", line)
        self.assertIn("dataset-fashion-mnist", line)

    def test_corrupt_checkpoint_is_rejected_and_kept(self):
        path = os.path.join(self.tmp, "checkpoint.pt")
        with open(path, "wb") as f:
            f.write(b"ctrun-checkpoint 1 5 0\nabcde")
        line = self.run_worker(SMALL + ["--checkpoint-dir", self.tmp], self.env())
        self.assertIn("is corrupt (CRC mismatch)", line)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"ctrun-checkpoint 1 5 0\nabcde")

    def test_checkpoint_of_another_run_is_rejected(self):
        args = SMALL + ["--checkpoint-dir", self.tmp]
        ok = fork_server.run([self.worker, *args, "--seed", "1"], env=self.env(),
                            capture_output=True, timeout=90)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        path = os.path.join(self.tmp, "checkpoint.pt")
        with open(path, "rb") as f:
            before = f.read()
        line = self.run_worker(args + ["--seed", "2"], self.env())
        self.assertIn("was saved with --seed 1, not 2", line)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)

    def error_file_env(self, rank, world):
        self.error_file = os.path.join(self.tmp, "error.json")
        return self.env(rank, world, {"TORCHELASTIC_ERROR_FILE": self.error_file})

    def error_file_message(self):
        with open(self.error_file) as f:
            return json.load(f)["message"]

    def test_bad_flag(self):
        line = self.run_worker(["--batch-size", "0"], self.error_file_env(0, 1))
        self.assertIn("--batch-size 0: must be at least 1", line)
        self.assertEqual("ctrun-fashion-mnist: " + self.error_file_message(), line)

    def test_missing_checkpoint_dir_is_made(self):
        ckpt = os.path.join(self.tmp, "a", "b")
        ok = fork_server.run([self.worker, *SMALL, "--checkpoint-dir", ckpt], env=self.env(),
                            capture_output=True, timeout=90)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertTrue(os.path.isfile(os.path.join(ckpt, "checkpoint.pt")))

    def test_checkpoint_dir_that_is_a_file(self):
        path = os.path.join(self.tmp, "file")
        open(path, "w").close()
        line = self.run_worker(SMALL + ["--checkpoint-dir", path], self.env())
        self.assertIn(f"--checkpoint-dir '{path}' exists and is not a directory", line)

    def test_gpt_mesh_error_goes_to_the_error_file(self):
        gpt = binary("trainer/apps/ctrun-gpt")
        p = fork_server.run([gpt, "--mesh", "pp=2,dp=2,tp=2"], env=self.error_file_env(0, 4),
                           capture_output=True, timeout=90)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("pp*dp*tp = 8 but WORLD_SIZE is 4", self.error_file_message())
        p = fork_server.run([gpt, "--mesh", "tp=two"], env=self.error_file_env(0, 4),
                           capture_output=True, timeout=90)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--mesh 'tp=two'", self.error_file_message())


if __name__ == "__main__":
    unittest.main()
