"""`ctrun status --why` (the failures' verdict): three loopback agents of a
ctrund with two workers each and --max-restarts 0. Rank 4 raises after a
synchronised step; the other ranks fail from the lost connection (or are
stopped by their agents) after it. Once every agent has exited, `ctrun
status --why` names rank 4's node, its error file's message and its
traceback's last line, and lists the others as consequences; the status
page's JSON carries the same verdict. Waits on process exits, never sleeps."""
import json
import re
import subprocess
import unittest
import urllib.request

import harness as h

FAIL_RANK = 4
CONF = "is_host=0,last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60"
MESSAGE = f"ValueError: rank {FAIL_RANK} failed on purpose"


class WhyTest(unittest.TestCase):
    def test_the_first_failure_is_the_root_cause_and_the_rest_consequences(self):
        d = h.tempdir(self)
        daemon = h.Ctrund(self)
        addrs = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
        env = h.base_env(FAIL_RANK=FAIL_RANK)
        procs = []
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for i, addr in enumerate(addrs):
            procs.append(h.start(["--nnodes", "3", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                  "--rdzv-endpoint", daemon.endpoint, "--rdzv-id", "why", "--local-addr", addr,
                                  "--rdzv-conf", CONF, "--max-restarts", "0", "--log-dir", f"{d}/logs-{i}",
                                  h.worker("raise_after_barrier.py")], env=env))
        outs = h.finish(self, procs, 40)
        for p, (_, err) in zip(procs, outs):
            self.assertNotEqual(p.returncode, 0, err)
        # The node whose agent printed rank 4 in its failure report.
        failed = [addrs[i] for i, (_, err) in enumerate(outs) if re.search(rf"rank\s*: {FAIL_RANK} \(", err)]
        self.assertEqual(len(failed), 1, "\n".join(err[-2000:] for _, err in outs))

        why = subprocess.run([h.ctrun_bin(), "status", "--why", "--rdzv-endpoint", daemon.endpoint,
                              "--rdzv-id", "why"], capture_output=True, text=True, timeout=20)
        self.assertEqual(why.returncode, 0, why.stderr)
        lines = why.stdout.splitlines()
        self.assertRegex(lines[0], rf"^root cause: rank {FAIL_RANK} \(node {re.escape(failed[0])}\b.*, local rank 0\) "
                                   rf"exited with 1 at .* UTC: {MESSAGE}$")
        self.assertIn(f"  last line: {MESSAGE}", lines)
        self.assertTrue(any(line.startswith("  error file: ") for line in lines), why.stdout)
        consequences = [line for line in lines if line.startswith("consequences: ")]
        self.assertEqual(len(consequences), 1, why.stdout)
        # Every other rank is a consequence, each named once in a group.
        listed = []
        for line in lines[lines.index(consequences[0]) + 1:]:
            m = re.match(r"^  ranks? ([\d, -]+) on \d nodes?: (connection error|failed .* after it|stopped by its agent)",
                         line)
            if m:
                for part in m.group(1).split(", "):
                    lo, _, hi = part.partition("-")
                    listed += range(int(lo), int(hi or lo) + 1)
        self.assertEqual(sorted(listed), [r for r in range(6) if r != FAIL_RANK], why.stdout)

        # The status page's JSON: the same verdict.
        url = daemon.page + "api/runs"
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        run = [x for x in doc["runs"] if x["run_id"] == "why"][0]
        self.assertEqual(run["why"]["root"]["rank"], FAIL_RANK)
        self.assertEqual(run["why"]["root"]["error_message"], MESSAGE)
        self.assertEqual(run["why"]["failures_seen"], 6)

        # ctrund's log says in words how the failed nodes left (not "normal_exit").
        log = daemon.stop()
        self.assertRegex(log, r"run 'why': node \S+ left: its workers failed with no restarts left; the run is closed")
        self.assertNotIn("normal_exit", log)


if __name__ == "__main__":
    unittest.main()
