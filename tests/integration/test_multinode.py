"""Several ctrun agents on one host (distinct --local-addr 127.0.0.x) forming
a job through ctrun's gRPC rendezvous, with real PyTorch workers (Gloo)."""
import json
import os
import signal
import socket
import subprocess
import unittest

import harness as h
import netns

FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=2,join_timeout=60"


class Job:
    """Agents of one run, started and cleaned up by the test."""

    def __init__(self, test, nnodes, nproc, conf=FAST, extra_env=None, backend="c10d"):
        self.test = test
        self.port = None  # bound by agent 0, which hosts (start(0) first)
        self.nnodes = nnodes
        self.nproc = nproc
        self.conf = conf
        self.backend = backend
        self.env = h.base_env(**(extra_env or {}))
        self.agents = []

    def start(self, index, *extra):
        # Every agent here could bind the endpoint (they share one host): the
        # first one hosts, so a test that kills agent 2 never kills the host.
        # It binds port 0 and says which port it got; the others join that.
        conf = self.conf + (",is_host=1" if index == 0 else ",is_host=0")
        if index != 0 and self.port is None:
            raise AssertionError("start agent 0 (the host) first")
        args = ["--nnodes", self.nnodes, "--nproc-per-node", str(self.nproc),
                "--rdzv-backend", self.backend, "--rdzv-endpoint", f"127.0.0.1:{self.port if index else 0}",
                "--rdzv-id", "job", "--local-addr", f"127.0.0.{index + 1}",
                "--rdzv-conf", conf, "--tee", "3", *extra]
        if index == 0:
            p, self.port = h.start_host(args, env=self.env)
        else:
            p = h.start(args, env=self.env)
        self.agents.append(p)
        self.test.addCleanup(lambda: p.poll() is None and p.kill())
        return p


class MultiNodeTest(unittest.TestCase):
    def test_four_agents_two_workers_each_all_reduce(self):
        job = Job(self, "4", 2)
        for i in range(4):
            job.start(i, h.worker("allreduce.py"))
        outs = h.finish(self, job.agents, 120)
        for p, (out, err) in zip(job.agents, outs):
            self.assertEqual(p.returncode, 0, err)
        allout = "".join(o for o, _ in outs)
        for rank in range(8):
            self.assertIn(f"rank {rank} world 8 sum 36", allout)
        # The joining nodes say so plainly; the host does not join.
        joining = f"joining the rendezvous at 127.0.0.1:{job.port} (served by another agent or ctrund)"
        self.assertNotIn(joining, outs[0][1])
        for _, err in outs[1:]:
            self.assertIn(joining, err)
            self.assertNotIn("hosted by another agent", err)

    def test_a_node_waiting_for_others_says_for_how_many_and_until_when(self):
        job = Job(self, "2", 1)
        host = job.start(0, h.worker("allreduce.py"))
        # Every 5 s while the round forms; join_timeout is 60 s in FAST.
        err = h.read_until(host.stderr,
                           f"waiting for 1 more node (1/2) at 127.0.0.1:{job.port}, run 'job'; giving up in ", 20)
        self.assertNotIn("waiting for nodes:", err)
        job.start(1, h.worker("allreduce.py"))
        for p, (_, err) in zip(job.agents, h.finish(self, job.agents, 120)):
            self.assertEqual(p.returncode, 0, err)

    def test_scale_up_restart_is_not_charged(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        job = Job(self, "2:4", 1, extra_env={"ANNOUNCE": fifo.path, "TARGET_WORLD": "3"})
        script = h.worker("elastic_allreduce.py")
        job.start(0, script)
        job.start(1, script)
        first = h.fifo_lines(self, fifo, 2, 60, job.agents)
        self.assertEqual(sorted(line.split()[1] for line in first), ["2", "2"])
        job.start(2, script)
        second = h.fifo_lines(self, fifo, 3, 60, job.agents)
        for line in second:
            pid, world, restarts, _ = line.split()
            self.assertEqual(world, "3")
            self.assertEqual(restarts, "0")  # the restart budget (0) was not spent
        for p, (_, err) in zip(job.agents, h.finish(self, job.agents, 60)):
            self.assertEqual(p.returncode, 0, err)

    def test_survivors_restart_after_kill9_of_an_agent(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        job = Job(self, "2:3", 2, extra_env={"ANNOUNCE": fifo.path, "TARGET_WORLD": "4"})
        script = h.worker("elastic_allreduce.py")
        for i in range(3):
            job.start(i, script)
        lines = h.fifo_lines(self, fifo, 6, 60, job.agents)
        self.assertTrue(all(line.split()[1] == "6" for line in lines), lines)
        victim = job.agents[2]
        victim.kill()
        victim.communicate(timeout=10)
        lines = h.fifo_lines(self, fifo, 4, 60, job.agents[:2])
        self.assertTrue(all(line.split()[1] == "4" for line in lines), lines)
        for p, (out, err) in zip(job.agents[:2], h.finish(self, job.agents[:2], 60)):
            self.assertEqual(p.returncode, 0, err)
            self.assertRegex(err, r"node 127\.0\.0\.3#\d+ (was lost|left the round)[^;]*; restarting")
        self.assertEqual(out.count("world 4 sum 10"), 2)

    def test_daemon_serves_two_runs_at_once(self):
        ctrund = os.path.join(h.build_dir(), "rendezvous", "ctrund")
        daemon = subprocess.Popen([ctrund, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: daemon.poll() is None and daemon.kill())
        line = daemon.stdout.readline()  # "ctrund: serving rendezvous on 127.0.0.1:PORT"
        self.assertIn("serving rendezvous on", line)
        endpoint = line.split()[-1]
        agents = []
        for run in ("alpha", "beta"):
            for i in range(2):
                agents.append(h.start([
                    "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", endpoint, "--rdzv-id", run,
                    "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", FAST + ",is_host=0",
                    "--tee", "1", h.worker("allreduce.py")]))
        for p in agents:
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        outs = []
        for p in agents:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            self.assertIn(f"joining the rendezvous at {endpoint} (served by another agent or ctrund)", err)
            outs.append(out)
        self.assertEqual("".join(outs[:2]).count("world 4 sum 10"), 4)
        self.assertEqual("".join(outs[2:]).count("world 4 sum 10"), 4)
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=30)
        self.assertEqual(daemon.returncode, 0)

    def test_static_backend_uses_master_addr_and_node_ranks(self):
        # The workers get exactly --master-port, fixed before any agent
        # starts: the agents run in a network namespace of their own, where
        # no other test can take it (nor the rendezvous's, port + 1).
        net = h.private_net(self)
        port = 29500
        dirs = {rank: h.tempdir(self) for rank in (0, 1)}
        # Node rank 1 starts first and has the lower address: ranks still follow --node-rank.
        agents = {rank: h.start(["--nnodes", "2", "--nproc-per-node", "2", "--node-rank", str(rank),
                                 "--master-addr", "127.0.0.1", "--master-port", str(port),
                                 "--local-addr", f"127.0.0.{2 - rank}", h.worker("dump_env.py")],
                                env=h.base_env(DUMP_DIR=dirs[rank]), prefix=net)
                  for rank in (1, 0)}
        for p in agents.values():
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        for p in agents.values():
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
        for node_rank, d in dirs.items():
            for lr in range(2):
                with open(os.path.join(d, f"env_0_{lr}.json")) as f:
                    e = json.load(f)["env"]
                self.assertEqual(e["GROUP_RANK"], str(node_rank))
                self.assertEqual(e["RANK"], str(node_rank * 2 + lr))
                self.assertEqual(e["WORLD_SIZE"], "4")
                self.assertEqual(e["MASTER_ADDR"], "127.0.0.1")
                self.assertEqual(e["MASTER_PORT"], str(port))

    def test_unreachable_endpoint_fails_within_join_timeout(self):
        # A port bound here and never listened on: connecting is refused, and
        # no other test can take it while this one runs.
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            port = held.getsockname()[1]
            r = h.run(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "lonely",
                       "--rdzv-conf", "join_timeout=2,is_host=0", "--no-python", "/bin/true"],
                      timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("join_timeout", r.stderr)

    def test_signal_to_an_agent_stops_its_workers(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        job = Job(self, "2", 1, extra_env={"ANNOUNCE": fifo.path, "TARGET_WORLD": "99"})
        script = h.worker("elastic_allreduce.py")
        job.start(0, script)
        job.start(1, script)
        pids = [int(line.split()[0]) for line in h.fifo_lines(self, fifo, 2, 60, job.agents)]
        for p in job.agents:
            p.send_signal(signal.SIGTERM)
        for p in job.agents:
            p.communicate(timeout=60)
            self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        self.assertEqual(h.wait_gone(pids, timeout=5), [])


class PartitionTest(unittest.TestCase):
    """Three hosts in network namespaces; one is cut off by iptables."""

    def test_partitioned_host_is_handled_like_a_node_loss(self):
        if not netns.available():
            self.skipTest("needs root, ip and iptables for network namespaces")
        hosts = netns.Hosts(3, "10.213.57", f"ct{os.getpid() % 100000}")
        self.addCleanup(hosts.down)
        hosts.up()
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        env = h.base_env(ANNOUNCE=fifo.path, TARGET_WORLD="2", GLOO_SOCKET_IFNAME="eth0")
        agents = []
        for i in range(3):
            argv = [h.ctrun_bin(), "--nnodes", "2:3", "--nproc-per-node", "1",
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts.ip(0)}:29400",
                    "--rdzv-id", "part", "--local-addr", hosts.ip(i), "--rdzv-conf", FAST,
                    "--tee", "3", h.worker("elastic_allreduce.py")]
            p = subprocess.Popen(hosts.command(i, argv), env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
            agents.append(p)
        lines = h.fifo_lines(self, fifo, 3, 60, agents)
        self.assertTrue(all(line.split()[1] == "3" for line in lines), lines)
        hosts.partition(2)
        lines = h.fifo_lines(self, fifo, 2, 60, agents)
        self.assertEqual(sorted(line.split()[3] for line in lines), ["0", "1"])
        self.assertTrue(all(line.split()[1] == "2" for line in lines), lines)
        for p in agents[:2]:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertRegex(err, r"node 10\.213\.57\.3#\d+ (was lost|left the round)[^;]*; restarting")
            self.assertIn("world 2 sum 3", out)
        agents[2].send_signal(signal.SIGTERM)
        h.finish(self, agents[2:], 60)


if __name__ == "__main__":
    unittest.main()
