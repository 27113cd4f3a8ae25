"""chaos_quick: bench/chaos.sh's driver, small (docs/fault-tolerance.md,
"Chaos"): 2 replica groups of ctrun-fashion-mnist --ft under ctrund, 6
faults of 3 kinds (a worker SIGKILLed, an agent SIGKILLed and relaunched, a
worker SIGSTOPped for a few seconds), one every few seconds. The driver
checks what this test asserts on: every agent exits 0 (a relaunched one
included), no process of the run is left, no sample is lost (every step up
to the last committed by some group, none under two quorums), the groups
end bitwise equal, and each kind was injected. No timing is asserted: the
recovery times and goodput are the bench's to report.

Plain build only: its C++ paths (the quorum's hang handling, the relay
asking again, the workers' stall times) run under ASan + UBSan in their unit
tests and in `ft`."""
import unittest

from chaos_driver import run_chaos


class ChaosQuick(unittest.TestCase):
    def test_six_faults_of_three_kinds_lose_nothing(self):
        report, out = run_chaos(self, 150, NGROUPS="2", NPROC="1", FAULTS="6", KINDS="kill,agent,hang", PERIOD="4",
                                HANG_S="3", BASELINE_S="3", WARMUP="5", RESTART="0", SEED="7", BATCH="8")
        ft = report["ft"]
        kinds = sorted(f["kind"] for f in ft["faults"] if "skipped" not in f)
        self.assertEqual(kinds, ["agent", "agent", "hang", "hang", "kill", "kill"], out[-2000:])
        self.assertEqual(ft["samples_lost"], 0)
        self.assertEqual(set(ft["exits"].values()), {0}, ft["exits"])
        self.assertGreater(ft["steps"], 0)
        self.assertIn("RESULT chaos_samples_lost 0", out)


if __name__ == "__main__":
    unittest.main()
