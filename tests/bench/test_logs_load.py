"""bench/logs_load and bench/logs_scale.py against a real ctrund: the
simulated nodes ship what they say (every rank's lines, in order, under its
node's label, each accepted), a refused run is reported as a failure, and
the bench's follower accounts for every line (seen, or dropped by the ring).

Run by CTest (CTRUN_BUILD_DIR set) at tiny sizes; waits on pipes with
deadlines, reads no timings.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from ctrund_fixture import BUILD_DIR, start_ctrund

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CTRUN = os.path.join(BUILD_DIR, "launcher", "ctrun")
LOAD = os.path.join(BUILD_DIR, "bench", "logs_load")
DEADLINE_S = 30
LINE = re.compile(r"^(10\.1\.0\.\d+#\d+)/(\d+): \[rank (\d+)\] step (\d+) t \d+\.\d+ loss ")


class LogsLoadTest(unittest.TestCase):
    def run_load(self, endpoint, *args):
        return subprocess.run([LOAD, "--endpoint", endpoint, "--timeout-s", "10", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)

    def test_every_rank_ships_its_lines_in_order_under_its_node(self):
        _, endpoint = start_ctrund(self)
        p = self.run_load(endpoint, "--run-id", "tiny", "--nodes", "3", "--ranks", "2", "--rate", "40",
                          "--duration-s", "0.5", "--threads", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.splitlines()
        self.assertEqual(out[:2], ["ready", "start"])
        r = json.loads(out[2])
        self.assertTrue(r["ok"], r)
        self.assertEqual((r["lines_sent"], r["lines_expected"], r["accepted"]), (120, 120, 120))
        self.assertEqual((r["failed_streams"], r["keep_alive_errors"]), (0, 0))
        shown = subprocess.run([CTRUN, "logs", "--rdzv-endpoint", endpoint, "--rdzv-id", "tiny"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        steps = {}
        for line in shown.stdout.splitlines():
            m = LINE.match(line)
            self.assertIsNotNone(m, line)
            node, rank, text_rank, step = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
            self.assertEqual(rank, text_rank)
            self.assertEqual(node, f"10.1.0.{rank // 2}#{10000 + rank // 2}")
            steps.setdefault(rank, []).append(step)
        self.assertEqual(steps, {rank: list(range(20)) for rank in range(6)})

    def test_a_refused_run_is_a_failure(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write("secret\n")
            token.flush()
            os.chmod(token.name, 0o600)
            _, endpoint = start_ctrund(self, "--token-file", token.name)
            p = self.run_load(endpoint, "--nodes", "2", "--ranks", "1", "--rate", "10", "--duration-s", "0.2")
        self.assertEqual(p.returncode, 1)
        r = json.loads(p.stdout.splitlines()[-1])
        self.assertFalse(r["ok"])
        self.assertIn("token", r["error"].lower())

    def test_bad_flags_exit_2_naming_the_flag(self):
        p = subprocess.run([LOAD, "--endpoint", "127.0.0.1:1", "--nodes", "5000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--nodes 5000", p.stderr)

    def test_the_bench_accounts_for_every_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, CTRUN_BUILD_DIR=BUILD_DIR, NODES="4", RANKS="2", RATE="50", DURATION="0.5",
                       REPS="1", FOLLOW_WAIT="10", JSON=os.path.join(tmp, "scale.json"))
            env.pop("REF_BUILD_DIR", None)
            p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "logs_scale.py")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, timeout=90)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(os.path.join(tmp, "scale.json")) as f:
                run = json.load(f)["runs"]["this"][0]
        results = dict(re.findall(r"^RESULT (\S+) (\S+)$", p.stdout, re.M))
        self.assertEqual(set(results), {"logs_8k_ranks_ctrund_cpu", "logs_8k_ranks_rss_mib", "logs_8k_ranks_lost_lines",
                                        "logs_8k_ranks_other_lost_lines", "logs_8k_ranks_follow_catchup_s",
                                        "logs_8k_ranks_follow_shown_pct"})
        # 200 lines through a ring of 1,048,576: every one is seen.
        self.assertEqual((run["sent"], run["seen"], run["ring_dropped"], run["other_lost"]), (200, 200, 0, 0))
        self.assertEqual(results["logs_8k_ranks_lost_lines"], "0")
        self.assertEqual(results["logs_8k_ranks_follow_shown_pct"], "100.00")
        self.assertGreater(float(results["logs_8k_ranks_rss_mib"]), 0)


if __name__ == "__main__":
    unittest.main()
