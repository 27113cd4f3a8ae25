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
import json
import os
import subprocess
import sys
import tempfile
import unittest

from harness import base_env, build_dir

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "..", "..", "bench", "chaos.py")


class ChaosQuick(unittest.TestCase):
    def test_six_faults_of_three_kinds_lose_nothing(self):
        with tempfile.TemporaryDirectory(prefix="chaos-quick-") as tmp:
            env = base_env()
            env.update({"CTRUN_BUILD_DIR": build_dir(), "NGROUPS": "2", "NPROC": "1", "FAULTS": "6",
                        "KINDS": "kill,agent,hang", "PERIOD": "4", "HANG_S": "3", "BASELINE_S": "3",
                        "WARMUP": "5", "RESTART": "0", "SEED": "7", "BATCH": "8",
                        "JSON": os.path.join(tmp, "chaos.json"), "CHART": os.path.join(tmp, "chaos.png"),
                        "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"})
            run = subprocess.run([sys.executable, DRIVER], env=env, capture_output=True, text=True, timeout=150)
            out = run.stdout + run.stderr
            self.assertEqual(run.returncode, 0, out[-4000:])
            with open(os.path.join(tmp, "chaos.json")) as f:
                report = json.load(f)
        ft = report["ft"]
        kinds = sorted(f["kind"] for f in ft["faults"] if "skipped" not in f)
        self.assertEqual(kinds, ["agent", "agent", "hang", "hang", "kill", "kill"], out[-2000:])
        self.assertEqual(ft["samples_lost"], 0)
        self.assertEqual(set(ft["exits"].values()), {0}, ft["exits"])
        self.assertGreater(ft["steps"], 0)
        self.assertIn("RESULT chaos_samples_lost 0", out)


if __name__ == "__main__":
    unittest.main()
