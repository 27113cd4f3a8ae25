"""bench/ft_quorum_load against a real ctrund: the simulated replica groups
step through the quorum with compact answers (every group answered each
step, the churn's groups lost and back), and a refused call is reported as
a failure, not a result.

Run by CTest (CTRUN_BUILD_DIR set); waits on pipes with deadlines, never
sleeps, reads no timings.
"""
import json
import os
import subprocess
import unittest

from ctrund_fixture import BUILD_DIR, start_ctrund

LOAD = os.path.join(BUILD_DIR, "bench", "ft_quorum_load")
DEADLINE_S = 30


class FtQuorumLoadTest(unittest.TestCase):
    def run_load(self, endpoint, *args):
        return subprocess.run([LOAD, "--endpoint", endpoint, "--timeout-s", str(DEADLINE_S), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=DEADLINE_S * 3)

    def test_64_groups_step_with_losses_and_compact_answers(self):
        proc, endpoint = start_ctrund(self)
        p = self.run_load(endpoint, "--groups", "64", "--steps", "8", "--step-s", "0", "--min-losses", "3",
                          "--channels", "2", "--server-pid", str(proc.pid))
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertTrue(r["ok"], r["error"])
        self.assertEqual((r["groups"], r["steps"], r["losses"], r["held_back"]), (64, 8, 3, 0))
        # A step with a group gone has 63 members; the rest all 64.
        self.assertEqual((r["min_world"], r["max_world"]), (63, 64))
        # Each loss of a member was pushed to the 63 other groups' watches.
        self.assertEqual(r["lost_events"], 3 * 63)
        # Losses at steps 3, 5 and 7 (spread over 1..7), back at 4, 6 and 8:
        # a loss discards its step (a new quorum id), a return changes the
        # members (another); steps 1 and 2 keep quorum 1.
        self.assertEqual(r["quorum_ids"], [1, 1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(len(r["latency_s"]), 8)
        self.assertEqual(len(r["server_cpu_s"]), 8)
        self.assertTrue(all(x >= 0 for x in r["server_cpu_s"]))
        self.assertTrue(all(x > 0 for x in r["server_rss_kib"]))

    def test_a_run_with_other_params_is_refused(self):
        _, endpoint = start_ctrund(self)
        first = self.run_load(endpoint, "--groups", "4", "--steps", "2", "--step-s", "0", "--min-losses", "0",
                              "--run-id", "shared")
        self.assertEqual(first.returncode, 0, first.stderr)
        # The run is finished (every group left as finished): a later run of
        # the same id and other params (max_replicas) is refused.
        p = self.run_load(endpoint, "--groups", "5", "--steps", "2", "--step-s", "0", "--run-id", "shared")
        self.assertEqual(p.returncode, 1)
        r = json.loads(p.stdout)
        self.assertFalse(r["ok"])
        self.assertIn("--ft-replicas", r["error"])

    def test_bad_flags_exit_2_naming_the_flag(self):
        p = subprocess.run([LOAD, "--endpoint", "127.0.0.1:1", "--groups", "1"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--groups", p.stderr)


if __name__ == "__main__":
    unittest.main()
