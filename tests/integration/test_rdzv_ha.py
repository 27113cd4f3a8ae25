"""A rendezvous that survives its host: ctrund --state-dir killed with SIGKILL
and restarted mid-run, and (EtcdTest) the etcd-v3 backend on a 3-member etcd
cluster that loses a member. Real agents, real PyTorch workers (Gloo).

Waits on pipes, FIFOs and process exits with deadlines; the workers' gate is
a file polled with a deadline."""
import os
import selectors
import signal
import subprocess
import time
import unittest

import harness as h

FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60,is_host=0"
DEADLINE_S = 60

# Announces "<pid> <WORLD_SIZE> <RESTART_COUNT> <GROUP_RANK>" on $ANNOUNCE,
# waits for the file $GATE, then all-reduces (rank + 1) and checks the sum.
GATED_WORKER = r'''
import os, sys, time
fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
os.write(fd, "{} {} {} {}\n".format(os.getpid(), os.environ["WORLD_SIZE"],
         os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["GROUP_RANK"]).encode())
os.close(fd)
deadline = time.monotonic() + 120
while not os.path.exists(os.environ["GATE"]):
    if time.monotonic() > deadline:
        sys.exit(7)
    time.sleep(0.05)
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} world {world} sum {int(t.item())}", flush=True)
dist.destroy_process_group()
sys.exit(0 if t.item() == world * (world + 1) / 2 else 3)
'''


class LineReader:
    """Lines of a child's pipe, read as they come, with a deadline."""

    def __init__(self, stream):
        self.stream = stream
        self.buf = b""
        self.seen = []

    def wait_for(self, text, count=1, timeout=DEADLINE_S):
        """Reads until `count` lines containing `text` were seen; returns them."""
        sel = selectors.DefaultSelector()
        sel.register(self.stream, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        try:
            while sum(text in line for line in self.seen) < count:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError(f"no {count} x '{text}' within {timeout} s; got {self.seen}")
                chunk = os.read(self.stream.fileno(), 65536)
                if not chunk:
                    raise EOFError(f"pipe closed before {count} x '{text}'; got {self.seen}")
                self.buf += chunk
                *lines, self.buf = self.buf.split(b"\n")
                self.seen += [line.decode(errors="replace") for line in lines]
        finally:
            sel.close()
        return [line for line in self.seen if text in line]


class Daemon:
    """ctrund on a fixed port, so a restart is found at the same endpoint;
    run through `net` (h.private_net's prefix), where no other test can take
    that port between a kill and the restart."""

    def __init__(self, test, port, state_dir, net):
        self.test, self.port, self.state_dir, self.net = test, port, state_dir, net
        self.proc = None

    def start(self):
        ctrund = os.path.join(h.build_dir(), "rendezvous", "ctrund")
        args = [*self.net, ctrund, "--listen", f"127.0.0.1:{self.port}", "--log-level", "debug"]
        if self.state_dir:
            args += ["--state-dir", self.state_dir]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.test.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.test.addCleanup(p.stdout.close)
        self.test.addCleanup(p.stderr.close)
        self.proc = p
        self.log = LineReader(p.stderr)
        LineReader(p.stdout).wait_for("serving rendezvous on", timeout=10)
        return self

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


class DaemonRestartTest(unittest.TestCase):
    def setUp(self):
        self.dir = h.tempdir(self)
        self.fifo = h.Fifo(self.dir)
        self.addCleanup(self.fifo.close)
        self.gate = os.path.join(self.dir, "gate")
        self.script = os.path.join(self.dir, "gated_worker.py")
        with open(self.script, "w") as f:
            f.write(GATED_WORKER)
        # ctrund and the agents share a network namespace of their own: the
        # daemon comes back on the same fixed port, which no other test has.
        self.net = h.private_net(self)
        self.port = 29400
        self.env = h.base_env(ANNOUNCE=self.fifo.path, GATE=self.gate)

    def agent(self, index):
        p = h.start(["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                     "--rdzv-endpoint", f"127.0.0.1:{self.port}", "--rdzv-id", "ha-job",
                     "--local-addr", f"127.0.0.{index + 1}", "--rdzv-conf", FAST,
                     "--max-restarts", "0", "--tee", "1", self.script], env=self.env, prefix=self.net)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def finish(self, agents):
        outs = []
        for p in agents:
            out, err = p.communicate(timeout=DEADLINE_S)
            self.assertEqual(p.returncode, 0, err)
            outs.append((out, err))
        return outs

    def no_more_announcements(self):
        try:
            extra = os.read(self.fifo.rfd, 65536)
        except BlockingIOError:
            extra = b""
        self.assertEqual(self.fifo.buf + extra, b"", "workers were started again")

    def test_kill9_mid_run_resumes_the_round_without_restarting_workers(self):
        state = os.path.join(self.dir, "state")
        daemon = Daemon(self, self.port, state, self.net).start()
        agents = [self.agent(i) for i in range(2)]
        first = self.fifo.lines(4, timeout=DEADLINE_S)
        self.assertEqual(sorted(line.split()[1:3] for line in first), [["4", "0"]] * 4)
        daemon.kill9()
        daemon = Daemon(self, self.port, state, self.net).start()
        daemon.log.wait_for("resumed from", timeout=10)
        daemon.log.wait_for("reconnected to running round 0", count=2)
        with open(self.gate, "w"):
            pass
        outs = self.finish(agents)
        allout = "".join(out for out, _ in outs)
        self.assertEqual(allout.count("world 4 sum 10"), 4)
        self.no_more_announcements()
        for _, err in outs:
            self.assertIn("lost the rendezvous", err)
            self.assertIn("reconnected to the rendezvous", err)
            self.assertNotIn("restarting the worker group", err)

    def test_kill9_while_forming_keeps_the_joined_node(self):
        state = os.path.join(self.dir, "state")
        daemon = Daemon(self, self.port, state, self.net).start()
        agents = [self.agent(0)]
        run_file = os.path.join(state, "ha-job.run")
        deadline = time.monotonic() + DEADLINE_S
        while not os.path.exists(run_file):  # written after the Join, before its answer
            self.assertLess(time.monotonic(), deadline, f"{run_file} never appeared")
            time.sleep(0.02)
        daemon.kill9()
        daemon = Daemon(self, self.port, state, self.net).start()
        daemon.log.wait_for("resumed from", timeout=10)
        agents.append(self.agent(1))
        lines = self.fifo.lines(4, timeout=DEADLINE_S)
        self.assertEqual(sorted(line.split()[1:3] for line in lines), [["4", "0"]] * 4)
        with open(self.gate, "w"):
            pass
        outs = self.finish(agents)
        self.assertEqual("".join(out for out, _ in outs).count("world 4 sum 10"), 4)

    def test_without_state_dir_a_restart_re_forms_the_round_free_of_charge(self):
        daemon = Daemon(self, self.port, None, self.net).start()
        agents = [self.agent(i) for i in range(2)]
        self.fifo.lines(4, timeout=DEADLINE_S)
        daemon.kill9()
        Daemon(self, self.port, None, self.net).start()
        again = self.fifo.lines(4, timeout=DEADLINE_S)  # the workers were restarted...
        self.assertEqual(sorted(line.split()[1:3] for line in again), [["4", "0"]] * 4)  # ...not charged
        with open(self.gate, "w"):
            pass
        outs = self.finish(agents)
        for _, err in outs:
            self.assertIn("not charged to --max-restarts", err)


class EtcdCluster:
    """Three etcd members on loopback, each with its own data dir, in a
    network namespace of their own (h.private_net): their fixed ports are
    free there. The agents must run in it too (`net`, the prefix)."""

    def __init__(self, test, directory):
        self.test = test
        self.net = h.private_net(test)
        names = ["m1", "m2", "m3"]
        self.client = {n: 2379 + 10 * i for i, n in enumerate(names)}
        peer = {n: 2380 + 10 * i for i, n in enumerate(names)}
        cluster = ",".join(f"{n}=http://127.0.0.1:{peer[n]}" for n in names)
        self.procs = {}
        for n in names:
            p = subprocess.Popen([
                *self.net, ETCD, "--name", n, "--data-dir", os.path.join(directory, n),
                "--listen-client-urls", f"http://127.0.0.1:{self.client[n]}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.client[n]}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer[n]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer[n]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", "ctrun-test"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            test.addCleanup(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
            test.addCleanup(p.stderr.close)
            self.procs[n] = p
        for n in names:
            LineReader(self.procs[n].stderr).wait_for("ready to serve client requests", timeout=30)

    def endpoint(self, name):
        return f"127.0.0.1:{self.client[name]}"

    def kill9(self, name):
        self.procs[name].kill()
        self.procs[name].wait(timeout=10)


ETCD = "/usr/bin/etcd"


@unittest.skipUnless(os.access(ETCD, os.X_OK), "etcd not installed (scripts/install-deps.sh installs etcd-server)")
class EtcdTest(unittest.TestCase):
    def test_job_finishes_after_losing_the_etcd_member_it_was_pointed_at(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        gate = os.path.join(d, "gate")
        script = os.path.join(d, "gated_worker.py")
        with open(script, "w") as f:
            f.write(GATED_WORKER)
        etcd = EtcdCluster(self, d)
        env = h.base_env(ANNOUNCE=fifo.path, GATE=gate)
        agents = []
        for i in range(3):
            p = h.start(["--nnodes", "2:3", "--nproc-per-node", "2", "--rdzv-backend", "etcd-v3",
                         "--rdzv-endpoint", etcd.endpoint("m1"), "--rdzv-id", f"etcd-job-{os.getpid()}",
                         "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", FAST, "--max-restarts", "0",
                         "--tee", "1", script], env=env, prefix=etcd.net)
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
            agents.append(p)
        first = fifo.lines(6, timeout=DEADLINE_S)
        self.assertEqual(sorted(line.split()[1:3] for line in first), [["6", "0"]] * 6)
        etcd.kill9("m1")  # the member every agent was given
        with open(gate, "w"):
            pass
        outs = []
        for p in agents:
            out, err = p.communicate(timeout=DEADLINE_S)
            self.assertEqual(p.returncode, 0, err)
            outs.append((out, err))
        self.assertEqual("".join(out for out, _ in outs).count("world 6 sum 21"), 6)
        for _, err in outs:
            self.assertIn("etcd-v3 rendezvous for run", err)
            self.assertNotIn("restarting the worker group", err)
        try:
            extra = os.read(fifo.rfd, 65536)
        except BlockingIOError:
            extra = b""
        self.assertEqual(fifo.buf + extra, b"", "workers were started again")

    def test_survivors_go_on_at_a_smaller_world_after_an_agent_is_killed(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        etcd = EtcdCluster(self, d)
        env = h.base_env(ANNOUNCE=fifo.path, TARGET_WORLD="4")
        agents = []
        for i in range(3):
            p = h.start(["--nnodes", "2:3", "--nproc-per-node", "2", "--rdzv-backend", "etcd-v3",
                         "--rdzv-endpoint", etcd.endpoint("m2"), "--rdzv-id", f"etcd-shrink-{os.getpid()}",
                         "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", FAST, "--tee", "1",
                         h.worker("elastic_allreduce.py")], env=env, prefix=etcd.net)
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
            agents.append(p)
        lines = fifo.lines(6, timeout=DEADLINE_S)
        self.assertTrue(all(line.split()[1] == "6" for line in lines), lines)
        agents[2].kill()  # its etcd lease runs out: the others restart without it
        agents[2].communicate(timeout=10)
        lines = fifo.lines(4, timeout=DEADLINE_S)
        self.assertTrue(all(line.split()[1] == "4" for line in lines), lines)
        for p in agents[:2]:
            out, err = p.communicate(timeout=DEADLINE_S)
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("not charged to --max-restarts", err)
            self.assertEqual(out.count("world 4 sum 10"), 2)


if __name__ == "__main__":
    unittest.main()
