"""Replica groups of several nodes (ctrun --ft-replicas --ft-group-size 2;
docs/fault-tolerance.md), end to end: real ctrun agents on four loopback
addresses (127.0.0.1..4), two per replica group, each node one rank of
ctrun-fashion-mnist --ft, and ctrund serving both the groups' own
rendezvous (run ids ftg.group-0 and ftg.group-1) and the quorum.

Node rank R is in group R / 2. Each node's agent calls for its part of its
group's step; the server joins the parts, so a group is one member of the
quorum and rank r of one group rings to rank r of the other. The rank on
node 3 (group 1) kills itself with SIGKILL at step 3: both nodes of group 1
restart their workers (the group's rendezvous forms again), which heal from
group 0 and train on with it; group 0's two nodes keep their workers. Group
0 holds before step HOLD_STEP until both nodes of group 1 asked to join
again, so the run cannot end before they are back. At the end the four
ranks hold bitwise equal state, and every committed step was taken once by
the quorum of its time."""
import os
import subprocess
import unittest

from harness import base_env, build_dir, ctrun_bin
from test_ft import ASKED, STEPS, TRAIN, AgentFiles, FtCase, assert_equal_dumps

HOLD_STEP = 7


class Node(AgentFiles):
    """One node's ctrun agent (one worker) of node rank `rank`, its output
    in files."""

    def __init__(self, test, rank, fault=None, hold=None):
        self.index = rank
        self.events = os.path.join(test.dir, f"events{rank}.jsonl")
        self.out_path = os.path.join(test.dir, f"out{rank}.log")
        self.err_path = os.path.join(test.dir, f"err{rank}.log")
        env = base_env(CTRUN_FT_FAULT=fault, CTRUN_FT_HOLD=hold, CTRUN_FT_FIXED_STALL=1)
        args = [ctrun_bin(), "--ft-replicas", "1:2", "--ft-group-size", "2", "--node-rank", str(rank),
                "--max-restarts", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint", test.ctrund.endpoint,
                "--rdzv-id", "ftg", "--local-addr", f"127.0.0.{rank + 1}", "--nproc-per-node", "1",
                "--events-file", self.events, "--no-python",
                os.path.join(build_dir(), "trainer", "apps", "ctrun-fashion-mnist"), *TRAIN,
                "--dump-state", os.path.join(test.dir, "state")]
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, cwd=test.dir)
        test.addCleanup(self.kill)


class Group:
    """A replica group as FtCase.check_steps reads it: its nodes' output
    together (the group's rank 0, on either node, logs its steps)."""

    def __init__(self, index, nodes):
        self.index = index
        self.nodes = nodes

    def stdout(self):
        return "".join(n.stdout() for n in self.nodes)

    def stderr(self):
        return "".join(n.stderr() for n in self.nodes)


class GroupsOfNodes(FtCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
            raise unittest.SkipTest("dataset-fashion-mnist is not installed")

    def test_a_killed_rank_restarts_its_two_node_group_alone_which_heals_and_trains_on(self):
        hold = f"{HOLD_STEP}:{os.path.join(self.dir, 'release')}"
        nodes = [Node(self, 0, hold=hold), Node(self, 1, hold=hold), Node(self, 2), Node(self, 3, fault="0:3:train")]
        for n in nodes[2:]:
            n.wait_for(ASKED, 2)
        self.release("release")
        self.finish(nodes)
        assert_equal_dumps(self, self.dir, count=4)
        groups = [Group(0, nodes[:2]), Group(1, nodes[2:])]
        by_step = self.check_steps(groups)
        self.assertEqual(len(by_step[4]), 1, "group 0 trained step 4 alone")
        self.assertEqual(len(by_step[STEPS - 1]), 2, "the healed group trained the last step with group 0")
        for n in nodes[:2]:
            events = n.event_list()
            kinds = [e["event"] for e in events]
            self.assertNotIn("restart", kinds, f"node {n.index} of the surviving group restarted")
            self.assertEqual(kinds.count("worker_started"), 1, kinds)
            members = [[m["group"] for m in e["members"]] for e in events if e["event"] == "quorum_changed"]
            self.assertEqual(members[0], ["group-0", "group-1"], members)
            self.assertIn(["group-0"], members, "group 0 trained alone while group 1 restarted")
            self.assertEqual(members[-1], ["group-0", "group-1"], members)
        for n in nodes[2:]:
            kinds = [e["event"] for e in n.event_list()]
            self.assertEqual(kinds.count("restart"), 1, f"node {n.index}: {kinds}")
            self.assertIn("replica_healed", kinds)
        self.assertIn("ft healed step", groups[1].stdout())


if __name__ == "__main__":
    unittest.main()
