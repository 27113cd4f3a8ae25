"""Fault tolerance without restarts (ctrun --ft-replicas; docs/fault-tolerance.md),
end to end: real ctrun agents, a real ctrund serving the quorum, real
ctrun-fashion-mnist --ft workers (Gloo within a group, the abortable ring
across groups), real SIGKILLs, the loopback.

Three replica groups of two ranks each. The groups' ids are their
--local-addr (127.0.0.1, .2, .3) and pid, so the quorum ranks them in that
order and the healing sources of each rank are known in advance. A fault is
injected with CTRUN_FT_FAULT (trainer/ft/fault_point.h): a rank kills itself
with SIGKILL at a step. The survivors must train on with the same worker
processes, and the failed group restart and heal from a live peer, then
train on with them. To keep the survivors from finishing before the
restarted group has asked to join (a race with the end of the run, not
part of what is tested), one survivor group holds at a later step
(CTRUN_FT_HOLD) until the restarted group's agent logs that it asked; the
whole quorum waits on its vote meanwhile.

At the end every rank of every group holds bitwise equal parameters and
optimizer state, and every committed step was taken once by the quorum of
its time: each group's rank 0 logs `ft step S quorum Q replicas W`, and the
groups that logged step S are exactly W, all under the same Q.

GptFaultTolerance runs the killed-rank case with ctrun-gpt --ft (a tiny
model, Adam) instead."""
import collections
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

from harness import Ctrund, base_env, build_dir, ctrun_bin, read_until, start_host

SANITIZED = os.environ.get("CTRUN_SANITIZED") == "1"
STEPS = 14
HOLD_STEP = 7
TRAIN = ["--train-limit", "256", "--test-limit", "64", "--batch-size", "8", "--deterministic", "--log-every", "0",
         "--max-steps", str(STEPS), "--ft"]
FASHION = ("ctrun-fashion-mnist", TRAIN)
# ctrun-gpt --ft (trainer/apps/gpt_ft.h): a tiny model, a global batch of
# 12 sequences shared by up to 3 x 2 ranks.
GPT_STEPS = 8
GPT = ("ctrun-gpt", ["--layers", "1", "--width", "16", "--heads", "2", "--seq-len", "16", "--global-batch", "12",
                     "--micro-batches", "1", "--log-every", "0", "--steps", str(GPT_STEPS), "--ft"])
STEP_LINE = re.compile(r"^ft step (\d+) quorum (\d+) replicas (\d+) loss", re.M)
ASKED = "asks to join the quorum at step"


def assert_equal_dumps(test, directory, count=6, by_rank=False):
    """The `count` --dump-state files in `directory` (state.<group>.<rank>)
    hold the same bytes, and some; `by_rank`: those of the same rank do (FSDP:
    rank r of every group holds the same shards)."""
    dumps = sorted(f for f in os.listdir(directory) if f.startswith("state."))
    test.assertEqual(len(dumps), count, dumps)
    contents = {}
    for name in dumps:
        with open(os.path.join(directory, name), "rb") as f:
            contents[name] = f.read()
    for name, data in contents.items():
        test.assertGreater(len(data), 0, name)
        same = [d for d in dumps if not by_rank or d.rsplit(".", 1)[1] == name.rsplit(".", 1)[1]]
        test.assertEqual(data, contents[same[0]], f"{name} differs from {same[0]}")


class AgentFiles:
    """A ctrun agent (.proc) whose stdout and stderr go to the files
    .out_path and .err_path, its events to .events (test_ft_partition.py's
    groups too)."""

    def event_list(self):
        with open(self.events) as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_for(self, text, count, timeout=120):
        """Waits until this agent's stderr holds `text` `count` times (checked
        every 20 ms, for at most `timeout` s)."""
        deadline = time.monotonic() + timeout
        while self.stderr().count(text) < count:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"agent {self.index}: {text!r} not seen {count} times "
                                     f"(exit {self.proc.returncode}); stderr tail:\n"
                                     + "\n".join(self.stderr().splitlines()[-20:]))
            time.sleep(0.02)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def stdout(self):
        with open(self.out_path) as f:
            return f.read()


class Group(AgentFiles):
    """One replica group: a ctrun agent with two workers of `trainer` (the
    binary in trainer/apps and its flags), its output in files."""

    def __init__(self, test, ctrund, run_id, index, replicas, fault=None, hold=None, trainer=FASHION):
        self.dir = test.dir
        self.index = index
        self.addr = f"127.0.0.{index + 1}"
        self.events = os.path.join(self.dir, f"events{index}.jsonl")
        self.out_path = os.path.join(self.dir, f"out{index}.log")
        self.err_path = os.path.join(self.dir, f"err{index}.log")
        env = base_env(CTRUN_FT_FAULT=fault, CTRUN_FT_HOLD=hold, CTRUN_FT_FIXED_STALL=1)
        args = [ctrun_bin(), "--ft-replicas", replicas, "--max-restarts", "3", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", ctrund.endpoint, "--rdzv-id", run_id, "--local-addr", self.addr,
                "--nproc-per-node", "2", "--events-file", self.events, "--no-python",
                os.path.join(build_dir(), "trainer", "apps", trainer[0]), *trainer[1],
                "--dump-state", os.path.join(self.dir, "state")]
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, cwd=self.dir)
        test.addCleanup(self.kill)


class FtCase(unittest.TestCase):
    """A ctrund per test, a temporary directory, and the checks."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ctrun-ft-")
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.ctrund = Ctrund(self)

    def release(self, name):
        path = os.path.join(self.dir, name)
        open(path, "w").close()
        return path

    def wait_for_status(self, ready, run_id="source", timeout=120):
        """Polls `ctrun status` of the run (every 50 ms, at most `timeout`
        s) until ready(its output) holds."""
        argv = [ctrun_bin(), "status", "--rdzv-endpoint", self.ctrund.endpoint, "--rdzv-id", run_id]
        deadline = time.monotonic() + timeout
        while True:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
            if ready(out):
                return out
            if time.monotonic() > deadline:
                self.fail(f"ctrun status never showed what the test waits for:\n{out}")
            time.sleep(0.05)

    def finish(self, groups, timeout=240):
        deadline = time.monotonic() + timeout
        for g in groups:
            try:
                g.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for g in groups:
            if g.proc.returncode != 0:
                tails = "\n".join(f"--- group {h.index} (exit {h.proc.poll()}):\n" +
                                  "\n".join((h.stderr() + h.stdout()).splitlines()[-25:]) for h in groups)
                self.fail(f"group {g.index} did not succeed\n{tails}")

    def check_equal_state(self):
        assert_equal_dumps(self, self.dir)

    def check_steps(self, groups, steps=STEPS, died_voting=None):
        """Every committed step once per member of the quorum of its time.
        `died_voting` (group index -> step): that group's rank died after its
        all-reduce, before its ballot; the quorum may commit the step without
        its ballot (its share is in the ring's sum: the server excuses a
        member that does not vote within the hang time, when its agent's
        report of the loss comes later than that), so it may be missing from
        that step's log."""
        by_step = collections.defaultdict(list)
        for g in groups:
            seen = set()
            for step, quorum, world in STEP_LINE.findall(g.stdout()):
                step = int(step)
                self.assertNotIn(step, seen, f"group {g.index} committed step {step} twice")
                seen.add(step)
                by_step[step].append((g.index, int(quorum), int(world)))
        self.assertEqual(sorted(by_step), list(range(steps)))
        for step, entries in by_step.items():
            quorums = {(q, w) for _, q, w in entries}
            self.assertEqual(len(quorums), 1, f"step {step} was committed under several quorums: {entries}")
            (_, world), = quorums
            logged = {g for g, _, _ in entries}
            excused = {g for g, s in (died_voting or {}).items() if s == step and g not in logged}
            if world > len(entries) + len(excused):
                excused |= {g for g, s in self.held_up(groups) if s == step and g not in logged}
            # Every member logged it; or, the step committed without an
            # excused member's ballot, every member but it.
            self.assertIn(world, {len(entries), len(entries) + len(excused)},
                          f"step {step}: {world} replicas, logged by {entries}; ctrund held up: "
                          f"{sorted(self.held_up(groups))}")
        return by_step

    def held_up(self, groups):
        """(group index, step) of each group the server went on without
        for being late (step_sync.h's hang time: it logs "replica group G
        held up step S"), which then discarded that step (and healed). A
        loaded machine can delay a group's vote past the hang time; read
        from ctrund's log, so only once the groups are done (it stops
        ctrund)."""
        ids = {}
        for g in groups:
            m = re.search(r"replica group (\S+) trains step", g.stderr())
            if m:
                ids[m.group(1)] = g
        held = set()
        for gid, step in re.findall(r"replica group (\S+) held up step (\d+)", self.ctrund.stop()):
            g = ids.get(gid)
            if g is not None and f"ft discard step {step} " in g.stdout():
                held.add((g.index, int(step)))
        return held

    def check_survivor(self, g):
        events = g.event_list()
        kinds = [e["event"] for e in events]
        self.assertNotIn("restart", kinds, f"group {g.index} restarted")
        pids = [e["pid"] for e in events if e["event"] == "worker_started"]
        self.assertEqual(len(pids), 2, f"group {g.index}'s workers were started again: {pids}")
        self.assertGreaterEqual(kinds.count("quorum_changed"), 2, kinds)

    def check_healed(self, g):
        kinds = [e["event"] for e in g.event_list()]
        self.assertEqual(kinds.count("restart"), 1, kinds)
        self.assertIn("replica_healing", kinds)
        self.assertIn("replica_healed", kinds)
        self.assertIn("ft healed step", g.stdout())


class FaultTolerance(FtCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")

    def test_a_killed_rank_restarts_its_group_alone_which_heals_and_trains_on(self):
        release = os.path.join(self.dir, "release")
        groups = [Group(self, self.ctrund, "kill1", 0, "1:3", hold=f"{HOLD_STEP}:{release}"),
                  Group(self, self.ctrund, "kill1", 1, "1:3", fault="1:3:train"),
                  Group(self, self.ctrund, "kill1", 2, "1:3")]
        groups[1].wait_for(ASKED, 2)
        self.release("release")
        self.finish(groups)
        self.check_equal_state()
        by_step = self.check_steps(groups)
        # The survivors trained on as a quorum of two: at least step 3, the one
        # the rank was killed in, done again without it. How many more before
        # the restarted group joins depends on how fast it starts again (under
        # load it joined at step 4 once).
        self.assertEqual(len(by_step[3]), 2, "the survivors trained step 3 again as a quorum of two")
        self.assertEqual(len(by_step[STEPS - 1]), 3, "the healed group trained the last step with the others")
        self.check_survivor(groups[0])
        self.check_survivor(groups[2])
        self.check_healed(groups[1])
        self.assertIn("ft discard step 3", groups[0].stdout())

    @unittest.skipIf(SANITIZED, "ASan + UBSan: the vote path is the kill path (plain build only, for time)")
    def test_a_kill_during_the_vote(self):
        release = os.path.join(self.dir, "release")
        groups = [Group(self, self.ctrund, "vote", 0, "1:3", hold=f"{HOLD_STEP}:{release}"),
                  Group(self, self.ctrund, "vote", 1, "1:3", fault="0:4:vote"),
                  Group(self, self.ctrund, "vote", 2, "1:3")]
        groups[1].wait_for(ASKED, 2)
        self.release("release")
        self.finish(groups)
        self.check_equal_state()
        self.check_steps(groups, died_voting={1: 4})
        self.check_survivor(groups[0])
        self.check_survivor(groups[2])
        self.check_healed(groups[1])

    @unittest.skipIf(SANITIZED, "ASan + UBSan: the same code as one group killed (plain build only, for time)")
    def test_two_of_three_groups_killed_with_min_one(self):
        release = os.path.join(self.dir, "release")
        groups = [Group(self, self.ctrund, "two", 0, "1:3", hold=f"{HOLD_STEP}:{release}"),
                  Group(self, self.ctrund, "two", 1, "1:3", fault="0:3:train"),
                  Group(self, self.ctrund, "two", 2, "1:3", fault="1:3:train")]
        groups[1].wait_for(ASKED, 2)
        groups[2].wait_for(ASKED, 2)
        self.release("release")
        self.finish(groups)
        self.check_equal_state()
        by_step = self.check_steps(groups)
        self.assertEqual(len(by_step[4]), 1, "the one survivor trained on alone")
        self.check_survivor(groups[0])
        self.check_healed(groups[1])
        self.check_healed(groups[2])

    @unittest.skipIf(SANITIZED, "ASan + UBSan: the same code as one source (plain build only, for time)")
    def test_a_healing_source_that_dies_is_replaced_by_the_next(self):
        # Group 1 dies at step 3 and asks again while group 0 holds at step 7;
        # it heals at step 8 (HOLD_STEP + 1): its rank 0's assigned source is
        # group 0's rank 0 (group ranks by address, the first healer starts at
        # source 0), which dies while it sends its state (CTRUN_FT_FAULT's
        # serve: the reply's header is out, the state not). Rank 0 then
        # heals from group 2, and group 0 restarts and heals in turn, while
        # group 2 holds at step 11 until it asked.
        first = os.path.join(self.dir, "first")
        second = os.path.join(self.dir, "second")
        groups = [Group(self, self.ctrund, "source", 0, "1:3", hold=f"{HOLD_STEP}:{first}",
                        fault=f"0:{HOLD_STEP + 1}:serve"),
                  Group(self, self.ctrund, "source", 1, "1:3", fault="1:3:train"),
                  Group(self, self.ctrund, "source", 2, "1:3", hold=f"11:{second}")]
        groups[1].wait_for(ASKED, 2)
        self.release("first")
        groups[0].wait_for(ASKED, 2)
        # Group 1 may have been held back for being late (its heal outlasted
        # the hang time once its first source died): released before its
        # bench ends, group 2 would finish the run with group 0 alone.
        self.wait_for_status(lambda out: "held back" not in out and "waiting for the next quorum" in out)
        self.release("second")
        self.finish(groups)
        self.check_equal_state()
        self.check_steps(groups)
        self.check_survivor(groups[2])
        self.check_healed(groups[0])
        self.check_healed(groups[1])
        healing = [e for e in groups[1].event_list() if e["event"] == "replica_healing"]
        self.assertTrue(healing[0]["sources"][0].startswith("127.0.0.1:"), healing)  # rank 0's assigned source
        healed = [e for e in groups[1].event_list() if e["event"] == "replica_healed"]
        self.assertTrue(healed[0]["sources"][0].startswith("127.0.0.3:"), healed)  # it died: the next one served


    @unittest.skipIf(SANITIZED, "ASan + UBSan: the relay's and server's finished paths are unit-tested (plain build "
                                "only, for time)")
    def test_a_group_back_after_the_run_finished_is_told_so_and_ends_well(self):
        # Group 1 dies at step 3; its restarted workers hold before they ask
        # to join until the other two have finished the run (a race the
        # integration test must not leave to chance). The server then answers
        # `finished`: group 1 trains nothing and ends with exit 0, instead of
        # training the whole run again alone (or, with MIN 2, waiting for
        # ever).
        release = os.path.join(self.dir, "late")
        groups = [Group(self, self.ctrund, "late", 0, "1:3"),
                  Group(self, self.ctrund, "late", 1, "1:3", fault="1:3:train", hold=f"join:{release}"),
                  Group(self, self.ctrund, "late", 2, "1:3")]
        for g in (groups[0], groups[2]):
            g.proc.wait(timeout=240)
            self.assertEqual(g.proc.returncode, 0, g.stderr())
        self.release("late")
        self.finish(groups)
        self.assertIn(f"ft the run finished at step {STEPS} before this group rejoined", groups[1].stdout())
        self.assertIn(f"the run finished at step {STEPS} before replica group", groups[1].stderr())
        self.assertEqual(STEP_LINE.findall(groups[1].stdout())[-1][0], "2", "it trained nothing after its restart")


class AgentHosted(unittest.TestCase):
    def test_the_agent_at_the_endpoint_hosts_the_quorum(self):
        """No ctrund: the agent whose address --rdzv-endpoint names hosts the
        quorum server, as it would a c10d rendezvous (HOST:0 binds a free
        port; the other group joins there, once the first has said that it
        waits for a quorum). Two groups of one rank each
        train a few steps in one quorum and end bitwise equal."""
        tmp = tempfile.TemporaryDirectory(prefix="ctrun-ft-hosted-")
        self.addCleanup(tmp.cleanup)
        trainer = os.path.join(build_dir(), "trainer", "apps", "ctrun-fashion-mnist")
        train = ["--no-python", trainer, *TRAIN[:-3], "--max-steps", "4", "--ft",
                 "--dump-state", os.path.join(tmp.name, "state")]
        common = ["--ft-replicas", "2:2", "--rdzv-backend", "c10d", "--rdzv-id", "hosted", "--nproc-per-node", "1"]
        host, port = start_host(common + ["--rdzv-endpoint", "127.0.0.1:0", "--local-addr", "127.0.0.1"] + train,
                                cwd=tmp.name)
        # Alone, the host's group waits for the quorum and says so every 5 s.
        host.stderr_head += read_until(host.stderr, f"waiting for a quorum of at least 2 replica groups at "
                                                    f"127.0.0.1:{port}, run 'hosted' (this group is at step ", 60)
        other = subprocess.Popen([ctrun_bin()] + common + ["--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr",
                                                           "127.0.0.2"] + train,
                                 env=base_env(), cwd=tmp.name, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        outs = []
        for p in (host, other):
            try:
                outs.append(p.communicate(timeout=120))
            except subprocess.TimeoutExpired:
                host.kill()
                other.kill()
                self.fail("a group did not finish within 120 s")
        for p, (out, err) in zip((host, other), outs):
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(STEP_LINE.findall(out), [(str(s), "1", "2") for s in range(4)], out)
        assert_equal_dumps(self, tmp.name, count=2)


class StockScript(unittest.TestCase):
    def test_a_stock_pytorch_script_follows_the_quorum(self):
        """tests/integration/workers/ft_stock.py, the contract's example: two
        groups of two ranks commit the same steps in the same quorum."""
        tmp = tempfile.TemporaryDirectory(prefix="ctrun-ft-stock-")
        self.addCleanup(tmp.cleanup)
        ctrund = Ctrund(self)
        procs = []
        for index in range(2):
            args = [ctrun_bin(), "--ft-replicas", "2:2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    ctrund.endpoint, "--rdzv-id", "stock", "--local-addr", f"127.0.0.{index + 1}",
                    "--nproc-per-node", "2", os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers",
                                                          "ft_stock.py"), "5"]
            procs.append(subprocess.Popen(args, env=base_env(), cwd=tmp.name, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            try:
                outs.append(p.communicate(timeout=120))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                self.fail("a group did not finish within 120 s")
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        logged = [re.findall(r"^stock step (\d+) quorum (\d+) replicas (\d+)$", out, re.M) for out, _ in outs]
        self.assertEqual(logged[0], [(str(s), "1", "2") for s in range(5)])
        self.assertEqual(logged[1], logged[0])


class GptFaultTolerance(FtCase):
    """The same under ctrun-gpt --ft (DDP within a group, Adam)."""

    @classmethod
    def setUpClass(cls):
        if not os.path.isdir("/usr/share/common-licenses"):
            raise unittest.SkipTest("/usr/share/common-licenses (ctrun-gpt's default corpus) is missing")

    def kill_one_of_three(self, run_id, trainer):
        """A rank of group 1 of 3 x 2 killed at step 3 while group 0 holds at
        step 5 until it asked again: the survivors train on as a quorum of
        two, group 1 restarts, heals and trains the last steps with them."""
        release = os.path.join(self.dir, "release")
        groups = [Group(self, self.ctrund, run_id, 0, "1:3", hold=f"5:{release}", trainer=trainer),
                  Group(self, self.ctrund, run_id, 1, "1:3", fault="1:3:train", trainer=trainer),
                  Group(self, self.ctrund, run_id, 2, "1:3", trainer=trainer)]
        groups[1].wait_for(ASKED, 2)
        self.release("release")
        self.finish(groups)
        by_step = self.check_steps(groups, GPT_STEPS)
        # The survivors trained on as a quorum of two: at least step 3, the one
        # the rank was killed in, done again without it. How many more before
        # the restarted group joins depends on how fast it starts again (under
        # load it joined at step 4 once).
        self.assertEqual(len(by_step[3]), 2, "the survivors trained step 3 again as a quorum of two")
        self.assertEqual(len(by_step[GPT_STEPS - 1]), 3, "the healed group trained the last step with the others")
        self.check_survivor(groups[0])
        self.check_survivor(groups[2])
        self.check_healed(groups[1])

    @unittest.skipIf(SANITIZED, "ASan + UBSan: the fashion-mnist kill covers the shared code (plain build only, for time)")
    def test_gpt_a_killed_rank_restarts_its_group_alone_which_heals_and_trains_on(self):
        self.kill_one_of_three("gpt", GPT)
        self.check_equal_state()

    @unittest.skipIf(SANITIZED, "ASan + UBSan: the healing state's code runs in the fashion-mnist kill (plain build "
                                "only, for time)")
    def test_gpt_hsdp_a_killed_rank_restarts_its_group_alone_which_heals_its_shards(self):
        # --strategy fsdp: FSDP shards the model over each group's two ranks,
        # and the groups are HSDP's replicate dimension: rank r of every
        # group holds the same shards, averaged across the quorum and healed
        # from rank r of a peer.
        self.kill_one_of_three("hsdp", (GPT[0], GPT[1] + ["--strategy", "fsdp"]))
        assert_equal_dumps(self, self.dir, by_rank=True)
        group = sorted(f for f in os.listdir(self.dir) if f.startswith("state."))[0].rsplit(".", 1)[0]
        shards = []
        for rank in (0, 1):
            with open(os.path.join(self.dir, f"{group}.{rank}"), "rb") as f:
                shards.append(f.read())
        self.assertNotEqual(shards[0], shards[1], "the two ranks of a group hold different shards")


if __name__ == "__main__":
    unittest.main()
