"""The agent-hosted c10d store (rendezvous/store/store_server.h): stock torch 1.13
workers use every store call against it on one and two nodes; 1,000 restarts
never rebind it; malformed requests from a raw socket are refused, logged
once, and the agent goes on serving."""
import os
import socket
import struct
import time
import unittest

import harness as h
from test_multinode import FAST

STORE_CALLS = h.worker("store_calls.py")


def u64(n):
    return struct.pack("<Q", n)


def s(b):
    return u64(len(b)) + b


def recv_exact(sock, n, timeout=10):
    sock.settimeout(timeout)
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def closed_by_peer(sock, timeout=10):
    """True when the server closes the connection within `timeout` s."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class StoreTest(unittest.TestCase):
    def test_every_call_one_node(self):
        r = h.run(["--nproc-per-node", "2", "--tee", "3", STORE_CALLS], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("store ok world 2"), 2, r.stdout)

    def test_every_call_two_nodes(self):
        port = 0  # agent 0 hosts: it binds a free port, which agent 1 joins
        agents = []
        for i in range(2):
            conf = FAST + (",is_host=1" if i == 0 else ",is_host=0")
            args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "store",
                    "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", conf, "--tee", "3", STORE_CALLS]
            if i == 0:
                p, port = h.start_host(args)
            else:
                p = h.start(args)
            agents.append(p)
            self.addCleanup(lambda p=agents[-1]: p.poll() is None and p.kill())
        outs = h.finish(self, agents, 120)
        for p, (out, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, out + err)
        self.assertEqual("".join(o for o, _ in outs).count("store ok world 4"), 4)

    def test_no_agent_store_keeps_worker_rank0_hosting(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--no-agent-store", "--no-python", "/bin/sh", "-c",
                   f'echo "$TORCHELASTIC_USE_AGENT_STORE" > {d}/use.$LOCAL_RANK'], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for lr in (0, 1):
            with open(f"{d}/use.{lr}") as f:
                self.assertEqual(f.read().strip(), "False")

    def test_malformed_requests_are_refused_and_logged_once(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        p = h.start(["--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
                     'echo "$MASTER_PORT" > "$ANNOUNCE"; exec sleep 120'],
                    env=h.base_env(ANNOUNCE=fifo.path))
        self.addCleanup(lambda: p.poll() is None and p.kill())
        port = int(h.fifo_lines(self, fifo, 1, 30, [p])[0])

        def connect():
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            self.addCleanup(c.close)
            return c

        bad = {
            "unknown request type 200": b"\xc8",
            "unknown request type 7": b"\x07" + s(b"/k"),  # 1.13 WATCH_KEY: not served
            "a key of 1099511627776 bytes": b"\x00" + u64(1 << 40),
            "VALIDATE after the first request": struct.pack("<BI", 0, 0x3C85F7CE) * 2,
        }
        for message, payload in bad.items():
            c = connect()
            c.sendall(payload)
            self.assertTrue(closed_by_peer(c), message)
        # Truncated: half a SET, then the client hangs up.
        c = connect()
        c.sendall(b"\x00" + s(b"/key") + u64(100) + b"abc")
        c.shutdown(socket.SHUT_WR)
        self.assertTrue(closed_by_peer(c))
        # A 2.x client (VALIDATE, then its numbering) still gets served.
        c = connect()
        c.sendall(struct.pack("<BI", 0, 0x3C85F7CE))
        c.sendall(b"\x01" + s(b"a") + s(b"x"))              # SET a=x
        c.sendall(b"\x09" + s(b"a") + s(b"y"))              # APPEND a+=y
        c.sendall(b"\x0b" + struct.pack("<q", 1) + s(b"b") + s(b"2"))  # MULTI_SET b=2
        c.sendall(b"\x0a" + u64(2) + s(b"a") + s(b"b"))     # MULTI_GET a b
        self.assertEqual(recv_exact(c, 8 + 2 + 8 + 1), s(b"xy") + s(b"2"))
        c.sendall(b"\x05" + u64(2) + s(b"a") + s(b"zz"))    # CHECK a zz
        self.assertEqual(recv_exact(c, 1), b"\x01")
        c.sendall(b"\x06" + u64(1) + s(b"zz"))              # WAIT zz ...
        c.sendall(b"\x0c")                                  # ... CANCEL_WAIT
        self.assertEqual(recv_exact(c, 1), b"\x01")
        c.sendall(b"\x0d" + struct.pack("<I", 4242))        # PING
        self.assertEqual(recv_exact(c, 4), struct.pack("<I", 4242))
        w = connect()                                       # a 1.13 client waits on "go" ...
        w.sendall(b"\x05" + u64(1) + s(b"go"))
        c.sendall(b"\x04" + s(b"go") + struct.pack("<q", 3))  # ... a 2.x ADD writes it
        self.assertEqual(recv_exact(c, 8), struct.pack("<q", 3))
        self.assertEqual(recv_exact(w, 1), b"\x00")
        w.sendall(b"\x06")                                  # 1.13 GETNUMKEYS
        self.assertEqual(recv_exact(w, 8), struct.pack("<q", 3))
        self.assertIsNone(p.poll())
        p.terminate()
        out, err = p.communicate(timeout=60)
        for message in list(bad) + ["the connection closed inside a request"]:
            self.assertEqual(err.count(message), 1, f"{message!r} in:\n{err}")
        self.assertEqual(err.count("store: refused a request"), len(bad) + 1, err)



class RestartsTest(unittest.TestCase):
    """Its own CTest entry (store.restarts): 1,001 worker groups take ctrun
    ~35 ms each on a loaded 2-core host, the store none of it."""

    def test_thousand_restarts_reuse_one_store(self):
        # 100 under ASan + UBSan: the same path, instrumented, at a tenth of the count.
        restarts = 100 if os.environ.get("CTRUN_SANITIZED") == "1" else 1000
        # Each worker connects to MASTER_PORT (bash's /dev/tcp), logs it and
        # fails: 1,001 groups of 4. The first worker to exit stops the rest,
        # so each group logs at least one line (its first to exit) and every
        # line must be a connect to the same port.
        d = h.tempdir(self)
        log = os.path.join(d, "connects")
        script = ('exec 3<>/dev/tcp/127.0.0.1/$MASTER_PORT && '
                  'echo "$TORCHELASTIC_RESTART_COUNT ok $MASTER_PORT" >> "$LOG" '
                  '|| echo "$TORCHELASTIC_RESTART_COUNT fail" >> "$LOG"; exit 1')
        start = time.monotonic()
        # --restart-on-any-failure: every rank fails at once, the same way: a
        # bad launch, which ctrun would otherwise not restart.
        r = h.run(["--nproc-per-node", "4", "--max-restarts", str(restarts), "--restart-on-any-failure",
                   "--no-python", "/bin/bash", "-c",
                   script], env=h.base_env(LOG=log, LOGLEVEL="ERROR"), timeout=280)
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertNotIn("cannot host", r.stderr)
        with open(log) as f:
            lines = [line.split(" ", 1) for line in f.read().split("\n")[:-1]]
        self.assertEqual({int(attempt) for attempt, _ in lines}, set(range(restarts + 1)),
                         f"{len(lines)} connects in {took:.1f} s")
        outcomes = {what for _, what in lines}
        self.assertEqual(len(outcomes), 1, outcomes)
        self.assertTrue(outcomes.pop().startswith("ok "))


if __name__ == "__main__":
    unittest.main()
