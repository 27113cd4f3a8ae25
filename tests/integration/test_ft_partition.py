"""Fault tolerance under a network partition (ctrun --ft-replicas 2:3;
docs/fault-tolerance.md, "Split brain"), end to end: three replica groups
of two ranks of ctrun-fashion-mnist --ft, each group on its own test host
(a network namespace with its own address, netns.py), and ctrund.

Group 2 is cut off (iptables DROP in its namespace) after the three groups
committed a few steps together. With MIN 2 of MAX 3 a lone group can never
form a quorum (MIN > MAX/2).

ctrund on a fourth host, reachable by the majority:
  - the majority (groups 0 and 1) is told group 2 was lost (the server's
    keepalive ends its watch within ~10 s), discards the step in flight and
    trains on as a quorum of two;
  - group 2 commits nothing while it is cut off: every step it logged before
    it healed is below the step at which it was cut;
  - group 2's agent notices within ~10 s that its connection to the server
    is gone (its own keepalive) and opens its watch again, waiting for the
    server; once the link is back its next call goes out on the new
    connection, and group 2 heals from a peer and trains the last steps
    with the others with the same workers (no restart); all six ranks end
    bitwise equal.

ctrund on group 2's host (the minority keeps the rendezvous, the majority
loses it): nobody commits while cut off, group 2 because it alone cannot
form a quorum of 2 (with 1:3 it would train on alone, and finish the run
before the others came back, which would then start it over from step 0),
groups 0 and 1 because they reach no server; after the heal their calls
arrive, each at its own time (its own reconnect backoff): the first forms
a quorum of two with group 2, the other heals from them, and all three
train the rest of the run together.

The steps are sequenced with CTRUN_FT_HOLD (trainer/ft/fault_point.h):
group 2 holds before step CUT_STEP until the test has cut it off; in the
first case the majority holds before step REJOIN_STEP until the server
has group 2's call again after the link came back; in the second groups 0
and 1 hold before step CUT_STEP + 1 until the server has every group
either in its quorum or asking (`ctrun status`), so the quorum that forms
next (when they vote on that step) is all three. Every wait has a deadline."""
import collections
import os
import re
import subprocess
import tempfile
import time
import unittest

import netns
from harness import base_env, build_dir, ctrun_bin
from test_ft import AgentFiles, assert_equal_dumps

STEPS = 12
CUT_STEP = 3      # group 2 holds before it trains this step until it is cut off
REJOIN_STEP = 7   # the majority holds before it trains this step until group 2 asked again
TRAIN = ["--train-limit", "256", "--test-limit", "64", "--batch-size", "8", "--deterministic", "--log-every", "0",
         "--max-steps", str(STEPS), "--ft"]
STEP_LINE = re.compile(r"^ft step (\d+) quorum (\d+) replicas (\d+) loss", re.M)
QUORUM_LINE = re.compile(r"^fault tolerance: .*?quorum (\d+) of", re.M)


class Group(AgentFiles):
    """One replica group: a ctrun agent with two workers on test host
    `index`, its output in files."""

    def __init__(self, test, hosts, endpoint, index, hold):
        self.index = index
        self.out_path = os.path.join(test.dir, f"out{index}.log")
        self.err_path = os.path.join(test.dir, f"err{index}.log")
        self.events = os.path.join(test.dir, f"events{index}.jsonl")
        env = base_env(CTRUN_FT_HOLD=hold, GLOO_SOCKET_IFNAME="eth0", CTRUN_FT_FIXED_STALL=1)
        argv = [ctrun_bin(), "--ft-replicas", "2:3", "--max-restarts", "3", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint, "--rdzv-id", "partition", "--local-addr", hosts.ip(index),
                "--nproc-per-node", "2", "--events-file", self.events, "--no-python",
                os.path.join(build_dir(), "trainer", "apps", "ctrun-fashion-mnist"), *TRAIN,
                "--dump-state", os.path.join(test.dir, "state")]
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(hosts.command(index, argv), env=env, stdout=out, stderr=err, cwd=test.dir)
        test.addCleanup(self.kill)

    def steps(self):
        return [(int(s), int(q), int(w)) for s, q, w in STEP_LINE.findall(self.stdout())]

    def tail(self):
        return f"--- group {self.index} (exit {self.proc.poll()}):\n" + "\n".join(
            (self.stderr() + self.stdout()).splitlines()[-25:])


class PartitionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not netns.available():
            raise unittest.SkipTest("needs root, ip and iptables for network namespaces")
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ctrun-ft-partition-")
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.hosts = netns.Hosts(4, "10.213.71", f"fp{os.getpid() % 100000}")
        self.addCleanup(self.hosts.down)
        self.hosts.up()
        # Where the kernel allows, a link that comes back is noticed within a
        # second (else within the rings' 30 s stall timeout: slower, same result).
        self.hosts.cap_tcp_retransmission()
        self.groups = []

    def start_ctrund(self, host):
        """ctrund on test host `host`, port 0, its output in a file; returns
        its endpoint."""
        self.server_host = host
        self.ctrund_log = os.path.join(self.dir, "ctrund.log")
        argv = [os.path.join(build_dir(), "rendezvous", "ctrund"), "--listen", f"{self.hosts.ip(host)}:0"]
        with open(self.ctrund_log, "w") as log:
            proc = subprocess.Popen(self.hosts.command(host, argv), stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        self.addCleanup(stop)
        deadline = time.monotonic() + 10
        while not (m := re.search(r"serving rendezvous on (\S+)\n", self.ctrund_output())):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.fail(f"ctrund did not serve within 10 s (exit {proc.poll()}): {self.ctrund_output()}")
            time.sleep(0.02)
        self.endpoint = m.group(1)
        return self.endpoint

    def ctrund_output(self):
        with open(self.ctrund_log) as f:
            return f.read()

    def server_view(self):
        """The quorum as `ctrun status` shows it on the server's host:
        (quorum id or 0, {group index: state}) for the groups it lists."""
        argv = [ctrun_bin(), "status", "--rdzv-endpoint", self.endpoint, "--rdzv-id", "partition"]
        out = subprocess.run(self.hosts.command(self.server_host, argv), env=base_env(), capture_output=True,
                             text=True, timeout=30).stdout
        quorum = QUORUM_LINE.search(out)
        states = {}
        for i in range(3):
            if m := re.search(rf"^{re.escape(self.hosts.ip(i))}#\d+\s+\S+\s+(.*)$", out, re.M):
                states[i] = m.group(1)
        return (int(quorum.group(1)) if quorum else 0), states

    def wait_for_server(self, what, predicate, timeout):
        """wait_until on the server's view, asked every 0.2 s."""
        def check():
            ok = predicate(*self.server_view())
            if not ok:
                time.sleep(0.2)
            return ok
        self.wait_until(what, check, timeout)

    def start_groups(self, endpoint, majority_hold):
        """Group 2 holds before CUT_STEP until the test cut it off; groups 0
        and 1 hold as `majority_hold` says (None: not at all)."""
        for i in range(3):
            hold = f"{CUT_STEP}:{os.path.join(self.dir, 'cut')}" if i == 2 else majority_hold
            self.groups.append(Group(self, self.hosts, endpoint, i, hold))

    def cut_group_2(self):
        """Once group 2 committed the step before CUT_STEP: cuts it off, then
        lets it train on."""
        self.wait_until(f"group 2 committed step {CUT_STEP - 1}",
                        lambda: any(s == CUT_STEP - 1 for s, _, _ in self.groups[2].steps()), 60)
        self.hosts.partition(2)
        self.release("cut")

    def wait_until(self, what, predicate, timeout):
        """Checks `predicate` every 20 ms until it holds; fails with every
        group's last lines after `timeout` s or when a group exited."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline or any(g.proc.poll() is not None for g in self.groups):
                self.fail(f"{what}: not within {timeout} s\n" + "\n".join(g.tail() for g in self.groups))
            time.sleep(0.02)

    def release(self, name):
        open(os.path.join(self.dir, name), "w").close()

    def finish(self, timeout):
        deadline = time.monotonic() + timeout
        for g in self.groups:
            try:
                g.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for g in self.groups:
            if g.proc.returncode != 0:
                self.fail(f"group {g.index} did not succeed\n" + "\n".join(h.tail() for h in self.groups))

    def check_equal_state(self):
        assert_equal_dumps(self, self.dir)

    def check_steps(self):
        """Every committed step once per member of the quorum of its time;
        returns step -> [(group, quorum, replicas)]."""
        by_step = collections.defaultdict(list)
        for g in self.groups:
            seen = set()
            for step, quorum, world in g.steps():
                self.assertNotIn(step, seen, f"group {g.index} committed step {step} twice")
                seen.add(step)
                by_step[step].append((g.index, quorum, world))
        self.assertEqual(sorted(by_step), list(range(STEPS)))
        for step, entries in by_step.items():
            quorums = {(q, w) for _, q, w in entries}
            self.assertEqual(len(quorums), 1, f"step {step} was committed under several quorums: {entries}")
            (_, world), = quorums
            self.assertEqual(len(entries), world, f"step {step}: {world} replicas, logged by {entries}")
        return by_step

    def test_a_cut_off_group_stops_committing_and_heals_after_the_partition(self):
        self.start_groups(self.start_ctrund(3), f"{REJOIN_STEP}:{os.path.join(self.dir, 'rejoin')}")
        minority, majority = self.groups[2], self.groups[:2]
        self.cut_group_2()
        self.wait_until(f"the majority committed step {REJOIN_STEP - 1} as a quorum of two",
                        lambda: all(any(s == REJOIN_STEP - 1 and w == 2 for s, _, w in g.steps()) for g in majority),
                        40)
        while_cut = minority.steps()
        self.assertTrue(all(s < CUT_STEP for s, _, _ in while_cut), f"group 2 committed while cut off: {while_cut}")
        self.hosts.heal(2)
        self.wait_for_server("group 2 asks the server again",
                             lambda _, states: "waiting" in states.get(2, ""), 60)
        # Its watch broke in the partition and is opened again a second after
        # (ft_setup.cc): the run, once released, may end sooner than that.
        self.wait_until("group 2's watch is open again",
                        lambda: "the quorum server watches replica group" in minority.stderr(), 60)
        self.release("rejoin")
        self.finish(60)
        self.check_equal_state()
        by_step = self.check_steps()
        for step in range(CUT_STEP, REJOIN_STEP):
            self.assertEqual(sorted(g for g, _, _ in by_step[step]), [0, 1], f"step {step}: {by_step[step]}")
        self.assertEqual(len(by_step[STEPS - 1]), 3, "the healed group trained the last step with the others")
        self.assertIn("ft healed step", minority.stdout())
        # Its workers were kept.
        self.assertNotIn("restart", [e["event"] for e in minority.event_list()])

    def test_a_cut_off_group_that_keeps_the_rendezvous_does_not_train_alone(self):
        self.start_groups(self.start_ctrund(2), f"{CUT_STEP + 1}:{os.path.join(self.dir, 'rejoin')}")
        minority = self.groups[2]
        self.cut_group_2()
        # Group 2 then votes no on its step; the vote's answer is held, as
        # no quorum can form (it alone is healthy to the server).
        # (Group 2 is told of the first loss only: the second, in the same
        # step, has nothing left to abort.)
        self.wait_until("the server lost groups 0 and 1 and told group 2",
                        lambda: self.ctrund_output().count(", a member of quorum 1, was lost") >= 2 and
                        minority.stderr().count("of quorum 1 was lost") >= 1, 40)
        for g in self.groups:
            steps = g.steps()
            self.assertTrue(all(s < CUT_STEP for s, _, _ in steps), f"group {g.index} committed while cut: {steps}")
        self.hosts.heal(2)
        # A group the server does not hear yet is not waited for: groups 0
        # and 1 hold before step CUT_STEP + 1 (as does group 2, which cannot
        # train without them) until the server has every group in the
        # quorum or asking; the quorum voted next is then all three.
        self.wait_for_server("every group is back at the server",
                             lambda quorum, states: quorum >= 2 and len(states) == 3 and all(
                                 ("replica" in st or "waiting" in st) and "lost" not in st
                                 for st in states.values()), 60)
        self.release("rejoin")
        self.finish(70)
        self.check_equal_state()
        by_step = self.check_steps()
        for step, entries in by_step.items():
            # A step's quorum forms when the step before it is voted: steps
            # CUT_STEP and CUT_STEP + 1 are the first group back's and group
            # 2's, or all three's if the other came back in time.
            self.assertIn(len(entries), (2, 3) if step in (CUT_STEP, CUT_STEP + 1) else (3,),
                          f"step {step}: {entries}")
        self.assertNotIn("formed with 1 replica group", self.ctrund_output())
        for g in self.groups:
            self.assertNotIn("restart", [e["event"] for e in g.event_list()])


if __name__ == "__main__":
    unittest.main()
