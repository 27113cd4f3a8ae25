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


def consequence_ranks(test, lines):
    """The ranks `status --why`'s consequence groups list, sorted."""
    consequences = [line for line in lines if line.startswith("consequences: ")]
    test.assertEqual(len(consequences), 1, "\n".join(lines))
    listed = []
    for line in lines[lines.index(consequences[0]) + 1:]:
        m = re.match(r"^  ranks? ([\d, -]+) on \d nodes?: (connection error|failed .* after it|stopped by its agent)",
                     line)
        if m:
            for part in m.group(1).split(", "):
                lo, _, hi = part.partition("-")
                listed += range(int(lo), int(hi or lo) + 1)
    return sorted(listed)


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
        # Every agent's last line is the same verdict: the failed node's, which
        # the others got when it closed the run (theirs were connection errors).
        last = {err.strip().splitlines()[-1] for _, err in outs}
        self.assertEqual(len(last), 1, "\n\n".join(err[-2000:] for _, err in outs))
        self.assertRegex(last.pop(), rf"^\[ctrun\] error: verdict: rank {FAIL_RANK} on \S+ raised {MESSAGE}")

        why = subprocess.run([h.ctrun_bin(), "status", "--why", "--rdzv-endpoint", daemon.endpoint,
                              "--rdzv-id", "why"], capture_output=True, text=True, timeout=20)
        self.assertEqual(why.returncode, 0, why.stderr)
        lines = why.stdout.splitlines()
        # The verdict in one line first: the root cause's class, rank and host.
        self.assertRegex(lines[0], rf"^verdict: rank {FAIL_RANK} on \S+ raised {MESSAGE}; 5 other ranks failed after "
                                   rf"it \(")
        # The node with its agent's pid: three nodes share this host.
        self.assertRegex(lines[1], rf"^root cause: rank {FAIL_RANK} \(node {re.escape(failed[0])}#\d+ .*, local rank 0\) "
                                   rf"exited with 1 at .* UTC: {MESSAGE}$")
        self.assertIn(f"  last line: {MESSAGE}", lines)
        self.assertTrue(any(line.startswith("  error file: ") for line in lines), why.stdout)
        # Every other rank is a consequence, each named once in a group.
        self.assertEqual(consequence_ranks(self, lines), [r for r in range(6) if r != FAIL_RANK], why.stdout)

        # The status page's JSON: the same verdict.
        url = daemon.page + "api/runs"
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        run = [x for x in doc["runs"] if x["run_id"] == "why"][0]
        self.assertEqual(run["why"]["root"]["rank"], FAIL_RANK)
        self.assertEqual(run["why"]["root"]["error_message"], MESSAGE)
        self.assertEqual(run["why"]["failures_seen"], 6)
        self.assertEqual((run["why"]["verdict"]["cause_class"], run["why"]["verdict"]["cause_rank"]),
                         ("python_exception", FAIL_RANK))
        self.assertEqual(run["why"]["verdict"]["line"], lines[0])

        self.assertNotIn("no error file", why.stdout)  # @record wrote one

        # ctrund's log says in words how the failed nodes left (not "normal_exit").
        log = daemon.stop()
        self.assertRegex(log, r"run 'why': node \S+ left: its workers failed with no restarts left; the run is closed")
        self.assertNotIn("normal_exit", log)

    def test_without_record_the_message_comes_from_the_kept_stderr(self):
        """A stock script (no @record, so no error file) under --tee 3: the
        root cause's message and the peers' connection errors are read from
        the workers' stderr, and --why says so once, with the fix."""
        fail_rank = 2
        daemon = h.Ctrund(self)
        env = h.base_env(FAIL_RANK=fail_rank, NO_RECORD=1)
        procs = []
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for addr in ("127.0.0.1", "127.0.0.2"):
            procs.append(h.start(["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                  "--rdzv-endpoint", daemon.endpoint, "--rdzv-id", "stock", "--local-addr", addr,
                                  "--rdzv-conf", CONF, "--max-restarts", "0", "--tee", "3",
                                  h.worker("raise_after_barrier.py")], env=env))
        for p, (_, err) in zip(procs, h.finish(self, procs, 40)):
            self.assertNotEqual(p.returncode, 0, err)
        why = subprocess.run([h.ctrun_bin(), "status", "--why", "--rdzv-endpoint", daemon.endpoint],
                             capture_output=True, text=True, timeout=20, env=h.base_env(PET_RDZV_ID=None))
        self.assertEqual(why.returncode, 0, why.stderr)
        lines = why.stdout.splitlines()
        message = f"ValueError: rank {fail_rank} failed on purpose"
        self.assertRegex(lines[0], rf"^verdict: rank {fail_rank} on \S+ raised {message}; 3 other ranks failed after it")
        self.assertRegex(lines[1], rf"^root cause: rank {fail_rank} \(node .*\) exited with 1 at .* UTC: {message}$")
        self.assertIn("  no error file: the lines above are from its stderr; decorate its main with @record", why.stdout)
        self.assertEqual(why.stdout.count("no error file"), 1, why.stdout)
        self.assertFalse(any(line.startswith("  error file: ") for line in lines), why.stdout)
        # Every other rank is a consequence (a connection error read from its
        # stderr, a later failure, or stopped by its agent).
        self.assertEqual(consequence_ranks(self, lines), [r for r in range(4) if r != fail_rank], why.stdout)


if __name__ == "__main__":
    unittest.main()
