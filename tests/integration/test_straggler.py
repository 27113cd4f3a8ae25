"""Straggler detection (issue 19, item 6): three loopback agents with one
worker each; the worker of rank 1 takes twice as long per step. That rank,
and only that one, is flagged: a `straggler` event in its own node's events
file, and a line in `ctrun status`. The test waits for the event with a
deadline, then stops the workers."""
import json
import os
import subprocess
import time
import unittest

import harness as h

SLOW_RANK = 1


def events_of(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class StragglerTest(unittest.TestCase):
    def test_the_slow_rank_and_only_it_is_flagged(self):
        d = h.tempdir(self)
        stop = os.path.join(d, "stop")
        endpoint = "127.0.0.1:0"  # the first agent hosts: it binds a free port and says which
        env = h.base_env(STEP_S="0.1", SLOW_STEP_S="0.2", SLOW_RANK=SLOW_RANK, STOP_FILE=stop, MAX_STEPS=600)
        addrs = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
        files = [os.path.join(d, f"events-{i}.jsonl") for i in range(len(addrs))]
        procs = []
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for i, (addr, path) in enumerate(zip(addrs, files)):
            args = ["--nnodes", "3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", endpoint, "--rdzv-id", "strag", "--local-addr", addr,
                    "--rdzv-conf", "keep_alive_interval=0.3,join_timeout=60",
                    "--heartbeat-timeout", "30", "--straggler-factor", "1.5", "--straggler-intervals", "3",
                    "--events-file", path, "--log-dir", os.path.join(d, f"logs-{i}"),
                    h.worker("step_pacer.py")]
            if i == 0:
                p, port = h.start_host(args, env=env)
                endpoint = f"127.0.0.1:{port}"
            else:
                p = h.start(args, env=env)
            procs.append(p)

        deadline = time.monotonic() + 40
        flagged = []
        while not flagged and time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                h.fail_with_tails(self, procs, "an agent exited before a straggler was flagged")
            flagged = [e for path in files for e in events_of(path) if e["event"] == "straggler"]
            if not flagged:
                time.sleep(0.05)
        if not flagged:
            h.fail_with_tails(self, procs, "no straggler event within 40 s")

        status = subprocess.run([h.ctrun_bin(), "status", "--rdzv-endpoint", endpoint, "--rdzv-id", "strag"],
                                capture_output=True, text=True, timeout=20)
        open(stop, "w").close()
        outs = h.finish(self, procs, timeout=30)
        self.assertEqual([p.returncode for p in procs], [0, 0, 0], [err for _, err in outs])

        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("STEP", status.stdout)
        self.assertIn(f"stragglers: rank {SLOW_RANK} on ", status.stdout)
        for i, path in enumerate(files):
            events = events_of(path)
            group_rank = [e["group_rank"] for e in events if e["event"] == "round_complete"][-1]
            stragglers = [e for e in events if e["event"] == "straggler"]
            if group_rank == SLOW_RANK:
                self.assertGreaterEqual(len(stragglers), 1, f"node {i}: {events}")
                for e in stragglers:
                    self.assertEqual((e["rank"], e["local_rank"], e["factor"], e["intervals"]),
                                     (SLOW_RANK, 0, 1.5, 3))
                    self.assertGreater(e["step_s"], 1.5 * e["job_median_s"])
            else:
                self.assertEqual(stragglers, [], f"node {i} (group rank {group_rank}) got a straggler event")


if __name__ == "__main__":
    unittest.main()
