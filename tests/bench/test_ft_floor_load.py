"""bench/ft_floor_load, the floor under bench/ft_quorum.sh: its clients and
its own server (a child process) step together, every group answered each
step, and its report has ft_quorum_load's shape (bench/ft_quorum.py reads
both alike).

Run by CTest (CTRUN_BUILD_DIR set); waits on pipes with deadlines, never
sleeps, reads no timings.
"""
import json
import os
import subprocess
import unittest

from ctrund_fixture import BUILD_DIR

FLOOR = os.path.join(BUILD_DIR, "bench", "ft_floor_load")
DEADLINE_S = 30
# ft_quorum_load's report keys (ft_quorum_load_report.cc).
QUORUM_KEYS = {"ok", "groups", "channels", "steps", "step_s", "losses", "held_back", "lost_events", "min_world",
               "max_world", "latency_s", "server_cpu_s", "server_rss_kib", "server_hwm_kib", "quorum_ids",
               "load_cpu_s", "load_hwm_kib", "error"}


class FtFloorLoadTest(unittest.TestCase):
    def run_floor(self, *args):
        return subprocess.run([FLOOR, "--timeout-s", str(DEADLINE_S), *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S * 3)

    def test_groups_over_several_source_addresses_step_together(self):
        # 100 groups, 16 per source address: 7 addresses.
        p = self.run_floor("--groups", "100", "--steps", "5", "--step-s", "0", "--per-address", "16",
                           "--request-bytes", "89", "--reply-bytes", "47")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertTrue(r["ok"], r["error"])
        self.assertLessEqual(QUORUM_KEYS, set(r))
        self.assertEqual((r["groups"], r["steps"], r["min_world"], r["max_world"]), (100, 5, 100, 100))
        self.assertEqual((r["request_bytes"], r["reply_bytes"]), (89, 47))
        self.assertEqual(len(r["latency_s"]), 5)
        self.assertEqual(len(r["server_cpu_s"]), 5)
        self.assertTrue(all(x >= 0 for x in r["latency_s"] + r["server_cpu_s"]))
        # The server's RSS is the child's, read from /proc each step.
        self.assertTrue(all(x > 0 for x in r["server_rss_kib"]))

    def test_bad_flags_exit_2_naming_the_flag(self):
        for flag, value in (("--groups", "0"), ("--request-bytes", "4"), ("--reply-bytes", "5000")):
            p = self.run_floor(flag, value)
            self.assertEqual(p.returncode, 2, (flag, p.stderr))
            self.assertIn(flag, p.stderr)

    def test_more_groups_than_descriptors_is_refused_naming_the_limit(self):
        p = subprocess.run(["/bin/sh", "-c", f'ulimit -n 256 && ulimit -Hn 256 && exec "{FLOOR}" --groups 1000'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 1)
        self.assertIn("ulimit -Hn", p.stderr)


if __name__ == "__main__":
    unittest.main()
