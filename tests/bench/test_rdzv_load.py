"""bench/rdzv_load against a real ctrund: the simulated agents speak the
rendezvous protocol correctly (every agent gets the round with distinct
ranks 0..N-1, the survivors of a drop the next one with 0..N-2), and a
refused protocol is reported as a failure, not a result.

Run by CTest (CTRUN_BUILD_DIR set); waits on pipes with deadlines, never
sleeps, reads no timings.
"""
import json
import os
import subprocess
import tempfile
import unittest

from ctrund_fixture import BUILD_DIR, start_ctrund

LOAD = os.path.join(BUILD_DIR, "bench", "rdzv_load")
DEADLINE_S = 30


class RdzvLoadTest(unittest.TestCase):
    def run_load(self, endpoint, *args):
        return subprocess.run([LOAD, "--endpoint", endpoint, "--timeout-s", str(DEADLINE_S), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=DEADLINE_S + 10)

    def test_16_agents_get_the_round_and_survive_a_drop(self):
        proc, endpoint = start_ctrund(self)
        p = self.run_load(endpoint, "--agents", "16", "--drop", "1", "--channels", "4",
                          "--server-pid", str(proc.pid))
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertTrue(r["ok"])
        self.assertEqual((r["agents"], r["channels"], r["dropped"]), (16, 4, 1))
        self.assertEqual(r["error"], "")
        self.assertEqual(r["keep_alive_errors"], 0)
        # The server's figures were read from its /proc entry.
        self.assertEqual(set(r["server"]), {"connected", "storm", "round", "drop"})
        for phase in r["server"].values():
            self.assertGreaterEqual(phase["cpu_s"], 0)
            self.assertGreater(phase["hwm_kib"], 0)
        # The run it drove is closed: a late agent is refused.
        p = self.run_load(endpoint, "--agents", "16", "--drop", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("closed", p.stderr)

    def test_every_dropped_agent_is_taken_as_gone_from_its_stream(self):
        # 20 agents vanish at once; the first one's drop sends every other
        # member a RestartRequested, so most of the others cancel while that
        # write to them is in flight. Each must still be taken as gone when
        # its stream ends, not evicted when its keep-alives run out (the
        # server once forgot a cancel that a failed write reported again).
        with tempfile.TemporaryFile("w+") as log:
            proc, endpoint = start_ctrund(self, log=log)
            p = self.run_load(endpoint, "--agents", "400", "--drop", "20", "--channels", "4")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(json.loads(p.stdout)["ok"])
            proc.terminate()
            proc.wait(timeout=DEADLINE_S)
            log.seek(0)
            text = log.read()
        self.assertEqual(text.count("dropped its connection; taken as gone"), 20, text)
        self.assertNotIn("Evicted", text)

    def test_a_refused_join_is_a_failure(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write("secret\n")
            token.flush()
            os.chmod(token.name, 0o600)
            _, endpoint = start_ctrund(self, "--token-file", token.name)
            p = self.run_load(endpoint, "--agents", "3", "--drop", "1")
        self.assertEqual(p.returncode, 1)
        r = json.loads(p.stdout)
        self.assertFalse(r["ok"])
        self.assertIn("token", r["error"].lower())

    def test_bad_flags_exit_2_naming_the_flag(self):
        p = subprocess.run([LOAD, "--endpoint", "127.0.0.1:1", "--agents", "5", "--drop", "5"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--drop 5 must be below --agents", p.stderr)


if __name__ == "__main__":
    unittest.main()
