"""ctrun as the entrypoint of its container image, run by podman: two
containers on one podman network form a 2 x 2 job from Kubeflow's PET_*
variables alone and train ctrun-fashion-mnist at world size 4; `podman stop`
ends the job within the grace (exit 143, every worker gone, the checkpoint
there); `podman kill -s KILL` of one node restarts the other's workers, which
resume from the shared checkpoint when a replacement node joins; a zombie made
inside the container is reaped by ctrun as PID 1.

The image is built once per test run by scripts/container/image.sh --from
host (the base from this host's installed packages: no download; cached by
content, so the ASan suite reuses the base and adds only its binaries). The
network is --internal (no route out) and its subnet is blackholed in the root
namespace first (../shared/notes/machine.md). Under the ASan build only the
PID-1 cases run (stop, zombie): the two-node training cases run in the
ordinary suite. Skipped only without root or podman."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import harness as h

import containers as c
from containers import podman, ulimits

SOURCE = c.SOURCE
TRAIN = ["--no-python", "ctrun-fashion-mnist", "--train-limit", "1024", "--test-limit", "64",
         "--checkpoint-dir", "/ckpt", "--log-every", "1"]
SANITIZER_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")


class Output:
    """Everything a `podman run` prints (stdout and stderr together), read by
    a thread; wait_for() blocks on it with a deadline."""

    def __init__(self, proc):
        self.text = ""
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.cond:
                self.text += line
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    closed = False

    def wait_for(self, pattern, timeout, start=0):
        """The first match of regex `pattern` at or after offset `start`;
        TimeoutError with the last lines when none within `timeout` s."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                m = re.compile(pattern).search(self.text, start)
                if m:
                    return m
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    tail = "\n".join(self.text.splitlines()[-20:])
                    raise TimeoutError(f"no {pattern!r} within {timeout} s; last lines:\n{tail}")
                self.cond.wait(left)


class Node:
    """One container: `podman run` attached, so its exit status is the
    container's (ctrun's) and its output streams into `out`."""

    def __init__(self, test, name, argv):
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.out = Output(self.proc)
        test.addCleanup(self.remove)

    def remove(self):
        podman("rm", "-f", "-t", "0", self.name, check=False)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {timeout} s:\n{self.out.text[-3000:]}")
        self.out.thread.join(timeout=10)
        return code

    def pid1(self):
        """ctrun's pid as seen here (the container's PID 1)."""
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.name).stdout)


def descendants(pid, workers_only=False):
    """Every descendant of `pid`; with workers_only, not ctrun's orphan guard
    (named ctrun-guard; it lives as long as ctrun)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                out += kids
                todo += kids
        except FileNotFoundError:
            pass
    if workers_only:
        out = [p for p in out if comm(p) != "ctrun-guard"]
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class ContainerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("podman"):
            raise unittest.SkipTest("needs root and podman (scripts/install-deps.sh installs it)")
        c.sweep_stale("ctrun-test-")
        cls.asan = "libasan" in subprocess.run(["ldd", h.ctrun_bin()], capture_output=True, text=True).stdout
        start = time.monotonic()
        cls.image = c.build_image()
        print(f"\n{cls.image} ready in {time.monotonic() - start:.0f} s", flush=True)
        # A private, internal network; its subnet blackholed first.
        cls.tag = f"ctrun-test-{os.getpid()}"
        cls.subnet = f"10.231.{100 + os.getpid() % 100}"
        c.create_network(cls.tag, cls.subnet)

    @classmethod
    def tearDownClass(cls):
        c.remove_network(cls.tag, cls.subnet)

    def setUp(self):
        self.shared = tempfile.mkdtemp(prefix="ctrun_ckpt_", dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.shared, True)

    def run_node(self, rank, args, nnodes=2, volumes=(), env=None):
        """Starts node `rank` of a job of `nnodes` containers: PET_* only, as
        Kubeflow sets them; the shared checkpoint directory at /ckpt (a
        ReadWriteMany volume in a cluster)."""
        name = f"{self.tag}-{self.id().rsplit('.', 1)[1][5:20]}-{rank}"
        hosts = [f"--add-host=node{i}:{self.subnet}.{10 + i}" for i in range(nnodes)]
        pet = {"PET_NNODES": nnodes, "PET_NPROC_PER_NODE": 2, "PET_NODE_RANK": rank,
               "PET_MASTER_ADDR": "node0", "PET_MASTER_PORT": 29400, **(env or {})}
        for k in SANITIZER_ENV:
            if k in os.environ:  # the ASan suite's options; suppressions at the same path
                pet[k] = os.environ[k]
        if "LSAN_OPTIONS" in os.environ:
            supp = os.path.join(SOURCE, "scripts", "lsan.supp")
            volumes = (*volumes, f"{supp}:{supp}:ro")
        argv = ["podman", "run", "--rm", "--name", name, "--hostname", f"node{rank}", "--network", self.tag,
                "--ip", f"{self.subnet}.{10 + rank}", *hosts, *ulimits(), "-v", f"{self.shared}:/ckpt"]
        for v in volumes:
            argv += ["-v", v]
        for k, v in pet.items():
            argv += ["-e", f"{k}={v}"]
        return Node(self, name, argv + [self.image, *args])

    def checkpoint_header(self):
        with open(os.path.join(self.shared, "checkpoint.pt"), "rb") as f:
            return f.read(20)

    def test_two_containers_train_at_world_size_4(self):
        if self.asan:
            self.skipTest("the ASan suite runs only the PID-1 cases (stop, zombie)")
        args = TRAIN + ["--max-steps", "4", "--checkpoint-every", "2"]
        nodes = [self.run_node(r, args) for r in (0, 1)]
        codes = [n.wait(120) for n in nodes]
        self.assertEqual(codes, [0, 0], "\n".join(n.out.text[-2000:] for n in nodes))
        log = nodes[0].out.text
        self.assertIn("round 0 complete: 2 nodes, world size 4, this node is group rank 0", log)
        self.assertIn("4 ranks (gloo)", log)
        self.assertIn("done: 4 steps", log)
        self.assertTrue(self.checkpoint_header().startswith(b"ctrun-checkpoint 1 "))

    def test_podman_stop_ends_the_job_within_the_grace(self):
        nnodes = 1 if self.asan else 2
        args = TRAIN + ["--epochs", "1000", "--checkpoint-every", "3"]
        nodes = [self.run_node(r, args, nnodes=nnodes) for r in range(nnodes)]
        nodes[0].out.wait_for(r"step 6:", 240)
        self.assertTrue(self.checkpoint_header().startswith(b"ctrun-checkpoint 1 "))
        workers = []
        for n in nodes:
            pid1 = n.pid1()
            # Two nodes: ctrun handed the launch to ctrun-full, which is PID 1 now.
            self.assertEqual(os.path.basename(os.readlink(f"/proc/{pid1}/exe")),
                             "ctrun-full" if nnodes > 1 else "ctrun")
            with open(f"/proc/{pid1}/status") as f:
                self.assertRegex(f.read(), r"NSpid:\t%d\t1\n" % pid1)  # PID 1, no shell before it
            workers += descendants(pid1)
        self.assertGreaterEqual(len(workers), 2 * nnodes)
        start = time.monotonic()
        podman("stop", "-t", "60", *[n.name for n in nodes], timeout=90)
        took = time.monotonic() - start
        codes = [n.wait(30) for n in nodes]
        self.assertEqual(codes, [128 + signal.SIGTERM] * nnodes, "\n".join(n.out.text[-2000:] for n in nodes))
        self.assertLess(took, 30, "not within TORCH_ELASTIC_SHUTDOWN_TIMEOUT (30 s)")
        self.assertEqual(h.wait_gone(workers, 10), [])
        for n in nodes:
            self.assertIn("Received SIGTERM death signal", n.out.text)
        self.assertTrue(self.checkpoint_header().startswith(b"ctrun-checkpoint 1 "))

    def test_kill_of_a_node_restarts_the_other_which_resumes_with_a_replacement(self):
        if self.asan:
            self.skipTest("the ASan suite runs only the PID-1 cases (stop, zombie)")
        args = TRAIN + ["--epochs", "1000", "--checkpoint-every", "3"]
        node0, node1 = self.run_node(0, args), self.run_node(1, args)
        node0.out.wait_for(r"step 6:", 240)
        old = descendants(node0.pid1(), workers_only=True)
        podman("kill", "-s", "KILL", node1.name)
        self.assertEqual(node1.wait(30), 128 + signal.SIGKILL)
        # docs/launcher.md: the survivor hears of it at once (the dead node's
        # connection drops; keep-alives would evict it within 15 s), stops its
        # workers (not charged to --max-restarts) and waits for a new round.
        lost = node0.out.wait_for(r"node node1#\d+ left the round; restarting the worker group "
                                  r"\(not charged to --max-restarts\)", 60)
        self.assertEqual(h.wait_gone(old, 60), [], node0.out.text[-2000:])
        # Kubernetes restarts the pod: the replacement joins, both resume
        # from the shared checkpoint at world size 4.
        node1b = self.run_node(1, args)
        mark = node0.out.wait_for(r"round 1 complete: 2 nodes, world size 4", 120, lost.start())
        node0.out.wait_for(r"resuming from '/ckpt/checkpoint.pt': step \d+", 120, mark.start())
        node0.out.wait_for(r"step \d+:", 120, mark.start())
        podman("stop", "-t", "60", node0.name, node1b.name, timeout=90)
        self.assertEqual([node0.wait(30), node1b.wait(30)], [143, 143])

    def test_zombie_made_inside_is_reaped_by_pid1(self):
        workers = h.WORKERS
        node = self.run_node(0, ["--nproc-per-node", "2", "--tee", "1", "/workers/orphan_maker.py"], nnodes=1,
                             volumes=[f"{workers}:/workers:ro"])
        code = node.wait(120)
        self.assertEqual(code, 0, node.out.text[-3000:])
        self.assertEqual(node.out.text.count("ppid of the orphan was 1; ctrun pid is 1"), 2, node.out.text)
        self.assertEqual(node.out.text.count("zombies left: []"), 2, node.out.text)


if __name__ == "__main__":
    unittest.main()
