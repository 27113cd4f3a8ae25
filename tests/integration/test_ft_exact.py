"""ft_exact: ctrun --ft-exact's result does not depend on faults
(docs/fault-tolerance.md, "Exact results"). bench/chaos.py's driver, small:
4 replica groups of one rank of ctrun-fashion-mnist --ft under ctrund, each
group and ctrund on a test host of its own (network namespaces), and three
faults, one of each kind the issue names: a worker SIGKILLed (its group
restarts and heals), an agent SIGKILLed and relaunched, a group's network
cut for 2 s. Then the driver trains the same job with no fault, and one
process alone running every shard of each step, to the chaos run's last
step: all three must end with bitwise-equal parameters and optimizer
state. No timing is asserted.

Plain build only (its C++ paths, the ring's exact reductions and the fixed
point, run under ASan + UBSan in their unit tests)."""
import os
import unittest

import netns
from chaos_driver import run_chaos


class FtExact(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not netns.available():
            raise unittest.SkipTest("needs root, ip and iptables for network namespaces (the cut)")
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")

    def test_a_run_with_three_faults_ends_on_the_bits_of_none_and_of_one_process(self):
        report, out = run_chaos(self, 300, NGROUPS="4", NPROC="1", FAULTS="3", KINDS="kill,agent,cut", PERIOD="3",
                                CUT_S="2", BASELINE_S="1", WARMUP="5", RESTART="0", SEED="3", BATCH="8", EXACT="1")
        ft = report["ft"]
        kinds = sorted(f["kind"] for f in ft["faults"] if "skipped" not in f)
        self.assertEqual(kinds, ["agent", "cut", "kill"], out[-2000:])
        self.assertEqual(ft["samples_lost"], 0)
        exact = report["exact"]
        self.assertEqual(exact["stop_step"], ft["stop_step"])
        self.assertGreater(exact["stop_step"], 0)
        self.assertEqual({name: r["same_bits"] for name, r in exact["runs"].items()},
                         {"no_faults": True, "one_process": True}, out[-2000:])
        self.assertEqual(exact["runs"]["one_process"]["groups"], 1)


if __name__ == "__main__":
    unittest.main()
