"""The open-files limit (base/open_files.h): ctrun and ctrund serve one
connection per worker or agent, so each raises its own soft limit to the
hard one; ctrun's workers get the limit it was started with, as under
torchrun; and a rendezvous port out of descriptors waits and says so once,
instead of spinning."""
import os
import resource
import socket
import subprocess
import unittest

import harness as h

WORKER = ["--no-python", "/bin/sh", "-c", 'echo "worker soft $(ulimit -Sn)"; grep "Max open files" /proc/$PPID/limits']


def with_limit(limit, argv):
    """`argv` run by a shell that first sets the open-files limit: `limit` is
    ulimit's option and value, e.g. ["-Sn", "256"]."""
    return ["/bin/sh", "-c", f'ulimit {limit[0]} {limit[1]} && exec "$@"', "sh", *argv]


class CtrunTest(unittest.TestCase):
    def check(self, args):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard <= 256:
            self.skipTest(f"the hard open-files limit is {hard}: nothing to raise")
        r = subprocess.run(with_limit(["-Sn", "256"], [h.ctrun_bin(), *args, *WORKER]), env=h.base_env(),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("worker soft 256", r.stdout)
        ctrun_soft, ctrun_hard = r.stdout.split("Max open files", 1)[1].split()[:2]  # the worker's parent
        self.assertEqual(ctrun_soft, ctrun_hard, r.stdout)
        self.assertNotEqual(ctrun_soft, "256", r.stdout)

    def test_one_node(self):
        self.check(["--nproc-per-node", "1"])

    def test_after_the_hand_off_to_ctrun_full(self):
        self.check(["--nnodes", "1:2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", "127.0.0.1:0", "--rdzv-conf", "last_call_timeout=0.1"])


class StoreTest(unittest.TestCase):
    # Once the worker runs and the test has cut ctrun's limit to 40
    # descriptors (prlimit), the worker opens 100 connections to its store
    # (the agent hosts it) and holds them: the store's accept loop runs out
    # of descriptors and says so. Only then (the test has read the warning
    # and writes to the second FIFO) does the worker close all but the last,
    # and set and get a key on that one: it is answered once the accept loop
    # has waited out the full table.
    WORKER = r"""
import os, socket, struct, sys
with open(sys.argv[1]) as go:
    go.read(1)
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
conns = [socket.create_connection(addr, timeout=60) for _ in range(100)]
with open(sys.argv[2]) as go:
    go.read(1)
for c in conns[:-1]:
    c.close()
last = conns[-1]
key = struct.pack("<Q", 1) + b"k"
last.sendall(b"\x00" + key + struct.pack("<Q", 2) + b"ok" + b"\x02" + key)  # SET k ok, GET k
reply = b""
while len(reply) < 10:
    chunk = last.recv(64)
    if not chunk:
        break
    reply += chunk
print("store answered", reply[8:10].decode())
"""

    def test_the_workers_store_out_of_descriptors_waits_says_so_once_and_answers(self):
        d = h.tempdir(self)
        go, close = os.path.join(d, "go"), os.path.join(d, "close")
        os.mkfifo(go)
        os.mkfifo(close)
        ctrun = h.start(["--nproc-per-node", "1", "--no-python", h.PYTHON, "-c", self.WORKER, go, close])
        self.addCleanup(lambda: ctrun.poll() is None and ctrun.kill())
        with open(go, "w") as f:  # opens once the worker has: it runs, with its own limit
            resource.prlimit(ctrun.pid, resource.RLIMIT_NOFILE, (40, 40))
            f.write("g")
        said = h.read_until(ctrun.stderr, "the workers' store cannot accept a connection", 60)
        with open(close, "w") as f:
            f.write("c")
        out, err = ctrun.communicate(timeout=90)
        err = said + err
        self.assertEqual(ctrun.returncode, 0, err)
        self.assertIn("store answered ok", out)
        self.assertEqual(err.count("the workers' store cannot accept a connection"), 1, err)


class CtrundTest(unittest.TestCase):
    def test_a_port_out_of_descriptors_waits_says_so_once_and_serves_again(self):
        ctrund = os.path.join(h.build_dir(), "rendezvous", "ctrund")
        # Soft and hard 64: ctrund cannot raise past it.
        daemon = subprocess.Popen(with_limit(["-n", "64"], [ctrund, "--listen", "127.0.0.1:0"]),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: daemon.poll() is None and daemon.kill())
        serving = h.read_until(daemon.stdout, "\n", 30)  # "ctrund: serving rendezvous on 127.0.0.1:PORT"
        self.assertIn("serving rendezvous", serving)
        port = int(serving.split()[-1].rsplit(":", 1)[1])
        clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(100)]
        said = h.read_until(daemon.stderr, "the rendezvous port cannot accept a connection", 30)
        for c in clients:
            c.close()
        r = h.run(["--nnodes", "1:2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "after-emfile",
                   "--rdzv-conf", "last_call_timeout=0.1", "--no-python", "/bin/true"], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
        err = said + err
        self.assertEqual(err.count("cannot accept a connection"), 1, err)


if __name__ == "__main__":
    unittest.main()
