"""--events-file / CTRUN_EVENTS_FILE: one JSON line per agent event, in
order, through a failure, a restart and a success; each line names the agent
(node_id) so agents sharing a host and a file can be told apart."""
import json
import os
import unittest

import harness as h


class EventsTest(unittest.TestCase):
    def test_restart_run_writes_every_event(self):
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "1", "--rdzv-id", "ev",
                   h.worker("crash_once.py")],
                  env=h.base_env(DUMP_DIR=d, CTRUN_EVENTS_FILE=path), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            events = [json.loads(line) for line in f]
        for e in events:
            self.assertEqual(e["run_id"], "ev")
            self.assertIsInstance(e["ts"], float)
        names = [e["event"] for e in events]
        self.assertEqual(names[:4], ["rendezvous_started", "round_complete", "worker_started", "worker_started"])
        exits = [e for e in events if e["event"] == "worker_exited"]
        self.assertEqual(len(exits), 4)
        restart = next(e for e in events if e["event"] == "restart")
        # Local rank 1 fails with 1 on the first attempt; local rank 0 either
        # finished first (exit 0) or was still running and was stopped (SIGTERM).
        first = [(e["local_rank"], e.get("exit_code", e.get("signal")))
                 for e in events[:events.index(restart)] if e["event"] == "worker_exited"]
        self.assertEqual(len(first), 2, first)
        self.assertIn((1, 1), first)
        self.assertTrue((0, 0) in first or (0, "SIGTERM") in first, first)
        self.assertEqual((restart["cause"], restart["restart_count"], restart["remaining_restarts"]),
                         ("worker_failed", 1, 0))
        self.assertEqual(names.count("round_complete"), 2)
        self.assertEqual(events[-1]["event"], "finished")
        self.assertEqual((events[-1]["state"], events[-1]["exit_code"]), ("succeeded", 0))
        times = [e["ts"] for e in events]
        self.assertEqual(times, sorted(times))

    def test_unwritable_path_is_a_usage_error_that_creates_nothing(self):
        tmp = h.tempdir(self)
        r = h.run(["--events-file", "/nonexistent/dir/e.jsonl", "--no-python", "/bin/true"],
                  env=h.base_env(TMPDIR=tmp), timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--events-file /nonexistent/dir/e.jsonl: No such file or directory", r.stderr)
        self.assertEqual(os.listdir(tmp), [], "a usage error must leave no log directory behind")

    def test_two_agents_on_one_host_are_told_apart_by_node_id(self):
        d = h.tempdir(self)
        path = os.path.join(d, "events.jsonl")
        # The first agent hosts the rendezvous: it binds port 0 and says
        # which port it got; the second joins that.
        port = 0
        procs = []
        for addr in ("127.0.0.1", "127.0.0.2"):
            args = ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", "pair", "--local-addr", addr, "--events-file", path, "--no-python", "/bin/true"]
            if port == 0:
                p, port = h.start_host(args)
            else:
                p = h.start(args)
            procs.append(p)
        outs = h.finish(self, procs, timeout=60)
        self.assertEqual([p.returncode for p in procs], [0, 0], [err for _, err in outs])
        with open(path) as f:
            events = [json.loads(line) for line in f]
        ids = {f"{addr}#{p.pid}" for addr, p in zip(("127.0.0.1", "127.0.0.2"), procs)}
        self.assertEqual({e["node_id"] for e in events}, ids)
        self.assertEqual(len({e["node"] for e in events}), 1)  # the host name, the same for both
        ranks = {e["node_id"]: e["group_rank"] for e in events if e["event"] == "round_complete"}
        self.assertEqual(sorted(ranks.values()), [0, 1])


if __name__ == "__main__":
    unittest.main()
