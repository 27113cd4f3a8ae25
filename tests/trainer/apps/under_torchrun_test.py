"""The worker runs unchanged under PyTorch's own torchrun (torch 1.13), in
both store modes: --rdzv_backend static exports TORCHELASTIC_USE_AGENT_STORE=True
(every rank is a client of the agent's store under /worker/attempt_0), the
c10d backend exports False (worker rank 0 hosts the store).

torch 1.13's torchrun cannot be told to bind port 0 for the static backend
(its workers would get MASTER_PORT=0), and picks the workers' port itself
(bind, close, bind later) for c10d. So each torchrun runs in a network
namespace of its own (unshare -n, loopback only): no other test can take its
ports, and the fixed ports it is given are safe."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import binary

# torch 1.13's torchrun crashes on Python 3.11 with default flags
# (pytorch#92319); fix Std.from_str in this process only, then run it.
TORCHRUN = """
import re, sys
from torch.distributed.elastic.multiprocessing import api
_orig = api.Std.from_str
api.Std.from_str = staticmethod(lambda v: api.Std(int(v)) if re.match(r"^\\d+$", v) else _orig(v))
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
"""


class UnderTorchrunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.worker = binary("trainer/apps/ctrun-fashion-mnist")
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")

    def torchrun(self, rdzv_args):
        argv = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
                "/usr/bin/python3", "-c", TORCHRUN, "--nnodes", "1", "--nproc_per_node", "2",
                *rdzv_args, "--monitor_interval", "0.1", "--no_python", self.worker,
                "--train-limit", "1000", "--test-limit", "200", "--epochs", "1", "--log-every", "0"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("2 ranks (gloo)", p.stdout)
        self.assertIn("done: 8 steps", p.stdout)

    def test_static_backend_agent_store(self):
        self.torchrun(["--rdzv_backend", "static", "--master_addr", "127.0.0.1",
                       "--master_port", "29500"])

    def test_c10d_backend_rank0_store(self):
        self.torchrun(["--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:29400",
                       "--rdzv_id", f"trainer-test-{os.getpid()}"])


if __name__ == "__main__":
    unittest.main()
