"""Crash-loop policy and bounded kill (issue 19, items 3 and 5), with real
ctrun and real workers:
- --fail-fast-on-startup: a script that fails at import is not restarted
  --max-restarts times; ctrun exits 3 (do not requeue);
- --restart-backoff: the restarts are spaced S, 2S... (the events file's
  timestamps, checked as a lower bound only), and a signal during the wait
  ends ctrun at once;
- --kill-timeout: a process SIGKILL cannot end (a zombie nobody reaps) does
  not hang ctrun; it names the pid and its state and exits 4.
"""
import json
import os
import signal
import unittest

import harness as h


def events(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class CrashPolicyTest(unittest.TestCase):
    def test_fail_fast_stops_a_startup_crash_without_restarts(self):
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "3", "--fail-fast-on-startup",
                   "--events-file", path, h.worker("fail_at_import.py")], timeout=120)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("do not requeue", r.stderr)
        self.assertIn("ctrun_test_module_that_does_not_exist", r.stderr)
        ev = events(path)
        names = [e["event"] for e in ev]
        self.assertEqual(names.count("worker_started"), 2, names)
        self.assertNotIn("restart", names)
        startup = [e for e in ev if e["event"] == "startup_failed"]
        self.assertEqual(len(startup), 1, names)
        self.assertEqual(startup[0]["remaining_restarts"], 3)
        self.assertEqual((ev[-1]["event"], ev[-1]["exit_code"]), ("finished", 3))

    def test_a_bad_launch_is_not_restarted(self):
        # Every rank fails at import within 1 s, the same way: no restart can
        # fix it, so none is spent (exit 3, do not requeue), and the verdict
        # says so as the last line and in the finished event.
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "3", "--events-file", path,
                   h.worker("fail_at_import.py")], timeout=120)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("not restarting: every rank failed within 1 s of its start with the same error", r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        # A stock script: no error file and no stderr kept, so its exit code is
        # the error every rank shared.
        self.assertRegex(last, r"^\[ctrun\] error: verdict: rank [01] on \S+ failed within 1 s of its start, as "
                               r"every rank did: exited with code 1; 1 other rank failed after it \(other error\)$")
        ev = events(path)
        names = [e["event"] for e in ev]
        self.assertNotIn("restart", names)
        self.assertEqual(len([e for e in ev if e["event"] == "restart_refused"]), 1, names)
        self.assertEqual((ev[-1]["event"], ev[-1]["exit_code"], ev[-1]["cause_class"]), ("finished", 3, "bad_launch"))

    def test_the_same_error_twice_is_not_restarted_a_third_time(self):
        # Rank 1 raises the same error after its first second, attempt after
        # attempt: the second time, no restart is spent on it.
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "5", "--events-file", path,
                   h.worker("fault.py"), "exception", "1.2", "1"], timeout=120)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("not restarting: rank 1 failed twice in a row with the same error: "
                      "ValueError: rank 1 always fails here", r.stderr)
        names = [e["event"] for e in events(path)]
        self.assertEqual(names.count("restart"), 1, names)
        self.assertEqual(names.count("restart_refused"), 1, names)

    def test_backoff_spaces_the_restarts(self):
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", "1", "--max-restarts", "2", "--restart-backoff", "1",
                   "--events-file", path, h.worker("fail_at_import.py")], timeout=120)
        self.assertEqual(r.returncode, 1, r.stderr)
        ev = events(path)
        restarts = [e for e in ev if e["event"] == "restart"]
        self.assertEqual([e["delay_s"] for e in restarts], [1.0, 2.0])
        # Each attempt's workers start at least the documented delay after
        # the previous attempt's last worker exited.
        attempts, exits = [], []
        for e in ev:
            if e["event"] == "worker_started":
                attempts.append((e["ts"], list(exits)))
            elif e["event"] == "worker_exited":
                exits.append(e["ts"])
        self.assertEqual(len(attempts), 3, [e["event"] for e in ev])
        for (started, exited_before), delay in zip(attempts[1:], (1.0, 2.0)):
            self.assertGreaterEqual(started - max(exited_before), delay)

    def test_a_signal_during_the_backoff_ends_ctrun_without_waiting_it_out(self):
        # The delay is an hour; the test's own limit (60 s) is far below it.
        p = h.start(["--nproc-per-node", "1", "--max-restarts", "3", "--restart-backoff", "3600",
                     h.worker("fail_at_import.py")])
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.communicate()))
        h.read_until(p.stderr, "restarting the worker group in 3600.0 s", 60)
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)

    def test_kill_timeout_gives_up_on_a_process_sigkill_cannot_end(self):
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        pids_file = os.path.join(d, "pids")
        self.addCleanup(self._kill_parent, pids_file)
        r = h.run(["--nproc-per-node", "1", "--shutdown-timeout", "1", "--kill-timeout", "1",
                   "--events-file", path, h.worker("unreaped_child.py"), pids_file], timeout=120)
        self.assertEqual(r.returncode, 4, r.stderr)
        with open(pids_file) as f:
            _, b = (int(x) for x in f.read().split())
        stuck = [e for e in events(path) if e["event"] == "workers_stuck"]
        self.assertEqual(len(stuck), 1)
        self.assertEqual(stuck[0]["processes"],
                         [{"local_rank": 0, "pid": b, "worker": False, "comm": "python3",
                           "state": "Z (zombie)"}])
        self.assertIn(f"pid {b}", r.stderr)
        self.assertIn("Z (zombie)", r.stderr)

    @staticmethod
    def _kill_parent(pids_file):
        try:
            with open(pids_file) as f:
                a, _ = (int(x) for x in f.read().split())
        except FileNotFoundError:
            return
        h.kill_all([a])
        h.wait_gone([a], 30)


if __name__ == "__main__":
    unittest.main()
