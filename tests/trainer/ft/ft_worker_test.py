"""ctrun-fashion-mnist --ft against a fake agent: the worker's side of fault
tolerance (docs/fault-tolerance.md, "Worker <-> agent: a local socket")
without ctrun's agent or rendezvous.

The fake (FakeAgent) serves one Unix socket per replica group and answers
when every worker of the quorum's groups has sent its `sync`: commit = the
AND of the ballots (or 0 for a step a test discards, after which the quorum
id grows, as after a commit failure), the ring's right neighbours from the
ports the workers sent. Each group is started with the environment
torchrun (or `ctrun --standalone`) and the agent would give it. Cases:
2 groups x 1 rank; 2 x 2 ranks (Gloo within a group, a ring per local
rank); under ctrun; a discarded step; an `abort` pushed before a step; a
group that joins late and heals from the other. Every case checks that the
groups end bitwise equal (every rank's parameters and SGD momentum) and
log the committed steps each once, under the expected quorum; a discarded
step runs again on the same samples, so those runs end bitwise equal to
the run without one."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import Store, binary, rank_env, spawn

GROUPS = 2
SANITIZED = os.environ.get("CTRUN_SANITIZED") == "1"
STEPS = 6
ARGS = ["--train-limit", "256", "--test-limit", "64", "--batch-size", "8", "--deterministic",
        "--log-every", "0", "--max-steps", str(STEPS), "--ft"]


class FakeAgent:
    """One Unix socket per group. Answers when every worker of every member
    group has sent its sync, with one quorum of the members. `discard`:
    steps whose vote is answered commit 0 (the quorum id then grows).
    `join_at`: the last group waits (its first sync unanswered) until the
    others reach that step, then joins a new quorum and heals from them,
    which serve."""

    def __init__(self, directory, groups, ranks, discard=(), join_at=None, abort_at=None):
        self.ranks = ranks
        self.abort_at = abort_at
        self.discard = set(discard)
        self.members = list(range(groups if join_at is None else groups - 1))
        self.joiner = None if join_at is None else groups - 1
        self.join_at = join_at
        self.paths = [os.path.join(directory, f"agent{g}.sock") for g in range(groups)]
        self.quorum = 1
        self.right = None  # by (group, local rank): the current quorum's ring neighbours
        self.pending = {}  # by (group, local rank): (connection, sync fields)
        self.lines = []  # every line the workers sent
        self.errors = []
        self.lock = threading.Lock()
        self.listeners = []
        for path in self.paths:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(ranks)
            self.listeners.append(s)
        for g, s in enumerate(self.listeners):
            threading.Thread(target=self._accept, args=(g, s), daemon=True).start()

    def close(self):
        for s in self.listeners:
            s.close()

    def _accept(self, group, listener):
        for _ in range(self.ranks):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(group, conn), daemon=True).start()

    def _read(self, group, conn):
        with conn, conn.makefile("r") as lines:
            for line in lines:
                fields = line.split()
                with self.lock:
                    self.lines.append((group, line.strip()))
                    if fields[0] == "sync":
                        self.pending[(group, int(fields[1]))] = (conn, fields)
                        self._try_answer()
                    elif fields[0] == "done":  # the worker waits for it before it exits
                        conn.sendall(b"bye\n")

    def _all_pending(self, groups):
        return all((g, r) in self.pending for g in groups for r in range(self.ranks))

    def _try_answer(self):
        if not self._all_pending(self.members):
            return
        lines = [self.pending[(g, r)][1] for g in self.members for r in range(self.ranks)]
        committed = {int(f[2]) for f in lines}
        if len(committed) != 1:
            self.errors.append(f"groups at different committed steps {committed}")
        step = committed.pop()
        ballots = [f[5] for f in lines]
        commit = "-"
        if any(b != "-" for b in ballots):
            ok = len({b.rsplit("/", 1)[0] for b in ballots}) == 1 and all(b.endswith("/1") for b in ballots)
            commit = "1" if ok and step not in self.discard else "0"
        max_step = step + (1 if commit == "1" else 0)
        joining = self.joiner is not None and max_step >= self.join_at
        if joining and not self._all_pending([self.joiner]):
            return  # answered once the joiner's first sync is in
        sources = list(self.members)
        if commit == "0":
            self.discard.discard(step)
        if commit == "0" or joining:
            self.quorum += 1
            self.right = None
        if joining:
            self.members.append(self.joiner)
            self.joiner = None
        world = len(self.members)
        if self.right is None:
            self.right = {(g, r): "127.0.0.1:" + self.pending[(self.members[(i + 1) % world], r)][1][3]
                          for i, g in enumerate(self.members) for r in range(self.ranks)}
        heal_ports = {key: self.pending[key][1][4] for key in self.pending}
        for i, g in enumerate(self.members):
            for r in range(self.ranks):
                conn, _ = self.pending.pop((g, r))
                right = self.right[(g, r)] if world > 1 else "-"
                heal, serve, decision = "-", "1" if joining else "0", commit
                if joining and g not in sources:
                    heal = ",".join(f"127.0.0.1:{heal_ports[(s, r)]}" for s in sources)
                    serve, decision = "0", "-"
                push = "abort a member was lost\n" if max_step == self.abort_at and g == 0 else ""
                conn.sendall(f"{push}quorum {decision} {self.quorum} {i} {world} {max_step} {right} {heal} {serve}\n"
                             .encode())


class FtWorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = binary("trainer/apps/ctrun-fashion-mnist")
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_groups(self, name, discard=(), ranks=1, join_at=None, abort_at=None, ctrun=False, exact=False):
        """Runs the groups of `ranks` workers against a fake agent; returns
        (rank 0's stdout by group, every rank's dump, the agent)."""
        directory = os.path.join(self.tmp.name, name)
        os.makedirs(directory)
        agent = FakeAgent(directory, GROUPS, ranks, discard, join_at, abort_at)
        stores = [None if ctrun else Store() for _ in range(GROUPS)]
        dump = os.path.join(directory, "state")
        procs = []
        for g, r in [(g, r) for g in range(GROUPS) for r in range(ranks)]:
            env = rank_env(r, ranks, stores[g].port if stores[g] else 0, {
                "CTRUN_FT_SOCKET": agent.paths[g], "CTRUN_FT_HOST": "127.0.0.1",
                "CTRUN_FT_GROUP": str(g), "CTRUN_FT_REPLICAS": f"1:{GROUPS}"})
            if exact:
                env["CTRUN_FT_EXACT"] = "1"
            launcher = [binary("launcher/ctrun"), "--standalone", "--nproc-per-node", "1", "--no-python"]
            if ctrun:  # ctrun's agent sets the torchrun variables; the fake agent's stay
                env = {k: v for k, v in env.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                       "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                       "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT")}
            argv = [*(launcher if ctrun else []), self.tool, *ARGS, "--dump-state", dump]
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                         if ctrun else spawn(argv, env, subprocess.PIPE, subprocess.PIPE))
        outs = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 0, err)
                outs.append(out)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            agent.close()
        self.assertEqual(agent.errors, [])
        dumps = []
        for g, r in [(g, r) for g in range(GROUPS) for r in range(ranks)]:
            with open(f"{dump}.{g}.{r}", "rb") as f:
                dumps.append(f.read())
        return outs[::ranks], dumps, agent

    def committed(self, out):
        return [(int(m[1]), int(m[2]), int(m[3]))
                for m in re.finditer(r"^ft step (\d+) quorum (\d+) replicas (\d+) loss \S+$", out, re.M)]

    def plain(self):
        """The plain run (2 groups x 1 rank, nothing discarded), run once."""
        if not hasattr(type(self), "plain_run"):
            type(self).plain_run = self.run_groups("plain")
        return type(self).plain_run

    def test_groups_end_bitwise_equal(self):
        outs, dumps, agent = self.plain()
        for out in outs:
            self.assertEqual(self.committed(out), [(s, 1, GROUPS) for s in range(STEPS)], out)
        self.assertGreater(len(dumps[0]), 0)
        self.assertEqual(dumps[0], dumps[1])
        self.assertTrue(any(line.endswith(" -") for _, line in agent.lines), "the first sync has no ballot")
        # The comparison can fail: the groups train on different samples
        # (their step-0 losses differ) and agree only by averaging gradients.
        losses = [re.search(r"^ft step 0 .* loss (\S+)$", out, re.M)[1] for out in outs]
        self.assertNotEqual(losses[0], losses[1])

    def test_discarded_step_is_run_again(self):
        outs, dumps, _ = self.run_groups("discard", discard=[2])
        expected = [(s, 1, GROUPS) for s in range(2)] + [(s, 2, GROUPS) for s in range(2, STEPS)]
        for out in outs:
            self.assertEqual(self.committed(out), expected, out)
            self.assertIn("ft discard step 2 quorum 1: another member voted no", out)
        self.assertEqual(dumps[0], dumps[1])
        self.assertEqual(dumps[0], self.plain()[1][0], "a rerun step uses the same samples")

    @unittest.skipIf(SANITIZED, "ASan + UBSan: tests/integration/test_ft.py runs two ranks per group under real agents")
    def test_two_ranks_per_group(self):
        # Gloo within each group, the ring of each local rank across them.
        outs, dumps, _ = self.run_groups("ranks2", ranks=2)
        for out in outs:
            self.assertEqual(self.committed(out), [(s, 1, GROUPS) for s in range(STEPS)], out)
        self.assertEqual(len(dumps), 2 * GROUPS)
        for other in dumps[1:]:
            self.assertEqual(other, dumps[0])

    def joined(self):
        """Group 1 joins at step 3 and heals (nothing discarded), run once."""
        if not hasattr(type(self), "join_run"):
            type(self).join_run = self.run_groups("join", join_at=3)
        return type(self).join_run

    def test_a_late_group_heals_and_joins(self):
        outs, dumps, agent = self.joined()
        self.assertEqual(self.committed(outs[0]), [(s, 1, 1) for s in range(3)] + [(s, 2, 2) for s in range(3, STEPS)])
        self.assertEqual(self.committed(outs[1]), [(s, 2, 2) for s in range(3, STEPS)], outs[1])
        self.assertIn("ft healed step 3 quorum 2", outs[1])
        self.assertTrue(any(g == 1 and line.startswith("healed 0 3 127.0.0.1:") for g, line in agent.lines),
                        agent.lines)
        self.assertEqual(dumps[0], dumps[1])


    def test_exact_results_do_not_depend_on_the_quorum(self):
        # --ft-exact (CTRUN_FT_EXACT=1): group 0 trains steps 0-2 alone (both
        # shards of each step), group 1 then heals (the hint with the state)
        # and the two train on; the run ends on the bits of the one where
        # both trained every step. Without it the two runs differ.
        _, together, _ = self.run_groups("exact", exact=True)
        outs, late, _ = self.run_groups("exact_join", join_at=3, exact=True)
        self.assertIn("ft exact: each step is 2 shards of 8 samples", outs[0])
        self.assertIn("ft healed step 3 quorum 2", outs[1])
        self.assertEqual(self.committed(outs[0]), [(s, 1, 1) for s in range(3)] + [(s, 2, 2) for s in range(3, STEPS)])
        self.assertEqual(together[0], together[1])
        self.assertEqual(late[0], together[0])
        self.assertEqual(late[1], together[0])
        self.assertNotEqual(self.joined()[1][0], self.plain()[1][0])

    def test_an_abort_fails_the_step_on_every_group(self):
        # The agent pushes `abort` to group 0 just before its answer for
        # step 2: its ring fails that step's all-reduce, group 1 sees the
        # close; both vote no, and step 2 runs again under a new quorum.
        outs, dumps, _ = self.run_groups("abort", abort_at=2)
        expected = [(s, 1, GROUPS) for s in range(2)] + [(s, 2, GROUPS) for s in range(2, STEPS)]
        for out in outs:
            self.assertEqual(self.committed(out), expected, out)
        self.assertIn("ft discard step 2 quorum 1: ring 1 rank 0: aborted", outs[0])
        self.assertRegex(outs[1], r"ft discard step 2 quorum 1: ring 1 rank 1: .*closed the connection")
        self.assertEqual(dumps[0], dumps[1])
        self.assertEqual(dumps[0], self.plain()[1][0])


    @unittest.skipIf(SANITIZED, "ASan + UBSan: tests/integration/test_ft.py runs the groups under real agents")
    def test_groups_under_ctrun_standalone(self):
        # Each group a `ctrun --standalone` job whose environment has the agent's variables.
        outs, dumps, _ = self.run_groups("ctrun", ctrun=True)
        for out in outs:
            self.assertEqual(self.committed(out), [(s, 1, GROUPS) for s in range(STEPS)], out)
        self.assertEqual(dumps[0], dumps[1])
        self.assertEqual(dumps[0], self.plain()[1][0])


if __name__ == "__main__":
    unittest.main()
