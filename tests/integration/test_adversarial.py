"""A hostile peer on the store port (docs/security.md, "Tried against"): from a
member's address, with raw sockets speaking TCPStore's protocol, each attack
runs against the store of an agent-hosted two-node job (the hosting agent,
on its rendezvous port) and against ctrund's store of a two-node job, the
target under a 4 GiB address-space limit:

  - 4,096 pipelined GETs of a 1 MiB value, never read;
  - one MULTI_GET naming a 32 KiB value 32,768 times (a 1 GiB reply);
  - WAITs on many keys, then a disconnect or CANCEL_WAIT, four times over;
  - 200 connections that never send a byte (the sniff deadline is shortened
    with CTRUN_PORT_SNIFF_DEADLINE_MS, the knob for tests);
  - seeded random bytes.

Nothing dies; the job's workers (workers/store_pingpong.py, a store client
that checks every value it reads) go on and finish with no restart; the
target's peak RSS grows at most 256 MiB per attack and keeps at most 64 MiB
afterwards (VmHWM reset through /proc/PID/clear_refs before each attack).
Under ASan the limits on memory are not checked (its shadow memory and
quarantine are not the program's)."""
import os
import random
import resource
import socket
import struct
import subprocess
import time
import unittest

import harness as h
from test_multinode import FAST

SANITIZED = os.environ.get("CTRUN_SANITIZED") == "1"
AS_LIMIT = 4 << 30
MIB = 1 << 20
PEAK_LIMIT = 256 * MIB
KEPT_LIMIT = 64 * MIB
# The port's sniff deadline for these servers: short, so the silent
# connections' attack ends soon, but not so short that a loaded machine's
# scheduling delay closes a client that sent its first bytes at once (at 300
# ms a 500 KB WAIT once met a closed connection under load average ~10).
SNIFF_MS = 1000
PINGPONG = h.worker("store_pingpong.py")
CTRUND = os.path.join(h.build_dir(), "rendezvous", "ctrund")


def u64(n):
    return struct.pack("<Q", n)


def s(b):
    return u64(len(b)) + b


VALIDATE = struct.pack("<BI", 0, 0x3C85F7CE)


def SET(k, v):
    return b"\x01" + s(k) + s(v)


def GET(k):
    return b"\x03" + s(k)


def keys_req(t, keys):
    return bytes([t]) + u64(len(keys)) + b"".join(s(k) for k in keys)


def limit_as():
    if not SANITIZED:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def closed_by_peer(sock, timeout=10):
    sock.settimeout(timeout)
    try:
        while True:
            if sock.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def memory(pid):
    """VmRSS and VmHWM of `pid`, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) * 1024
    return out["VmRSS"], out["VmHWM"]


class Target:
    """The store under attack: its address, the process serving it, the job's
    processes beside it."""

    def __init__(self, test, host, port, pid, procs):
        self.test, self.host, self.port, self.pid, self.procs = test, host, port, pid, procs

    def connect(self, validate=True):
        c = socket.create_connection((self.host, self.port), timeout=10)
        self.test.addCleanup(c.close)
        if validate:
            c.sendall(VALIDATE)
        return c

    def alive(self):
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                h.fail_with_tails(self.test, self.procs, f"process {i} exited ({p.returncode}) under attack")

    def settle(self):
        """Pings the store until its RSS stops moving (bounded): the attack's
        work has been done, or is held."""
        probe = self.connect()
        last = None
        deadline = time.monotonic() + 20
        for n in range(1000):
            probe.sendall(b"\x0d" + struct.pack("<I", n))  # PING
            probe.settimeout(10)
            got = b""
            while len(got) < 4:
                chunk = probe.recv(4 - len(got))
                self.test.assertTrue(chunk, "the store closed a PING's connection")
                got += chunk
            self.test.assertEqual(got, struct.pack("<I", n))
            rss, _ = memory(self.pid)
            if last is not None and abs(rss - last) < MIB and n >= 3 or time.monotonic() > deadline:
                break
            last = rss
            time.sleep(0.1)  # pacing between probes; the condition is the RSS
        probe.close()

    def attack(self, name, run):
        """Runs `run(self)` (it returns the sockets it leaves open), checks the
        peak, closes them, checks what is kept."""
        self.settle()
        before, _ = memory(self.pid)
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")
        left = run(self) or []
        self.settle()
        self.alive()
        _, peak = memory(self.pid)
        for c in left:
            c.close()
        self.settle()
        self.alive()
        after, _ = memory(self.pid)
        print(f"{name}: rss {before / MIB:.1f} MiB, peak +{(peak - before) / MIB:.1f} MiB, "
              f"kept {(after - before) / MIB:+.1f} MiB", flush=True)
        if not SANITIZED:
            self.test.assertLessEqual(peak - before, PEAK_LIMIT, name)
            self.test.assertLessEqual(after - before, KEPT_LIMIT, name)


def pipelined_gets(t):
    c = t.connect()
    c.sendall(SET(b"/adv/big", b"b" * MIB))
    c.settimeout(30)
    c.sendall(GET(b"/adv/big") * 4096)  # 4 GiB of replies asked for, never read
    return [c]


def huge_multi_get(t):
    c = t.connect()
    c.sendall(SET(b"/adv/v32k", b"v" * (32 << 10)))
    c.settimeout(30)
    try:
        c.sendall(keys_req(0x0A, [b"/adv/v32k"] * 32768))  # a 1 GiB reply
    except (BrokenPipeError, ConnectionResetError):
        pass
    t.test.assertTrue(closed_by_peer(c), "a MULTI_GET over the cap was served")
    return []


def abandoned_waits(t):
    for rnd in range(4):
        clients = []
        for i in range(8):
            c = t.connect()
            c.settimeout(30)
            c.sendall(keys_req(0x06, [f"/adv/w/{rnd}/{i}/{k:06d}".encode() for k in range(25000)]))
            clients.append(c)
        for i, c in enumerate(clients):
            if i % 2:
                c.sendall(b"\x0c")  # CANCEL_WAIT
                t.test.assertEqual(c.recv(1), b"\x01")
            c.close()
    return []


def silent(t):
    conns = [t.connect(validate=False) for _ in range(200)]
    for c in conns:
        t.test.assertTrue(closed_by_peer(c), "a silent connection outlived the sniff deadline")
    return []


def random_bytes(t):
    rng = random.Random(28)
    for i in range(64):
        body = rng.randbytes(rng.randrange(1, 64 << 10))
        # Half of them start as a store request (through the sniff, into the
        # parser), half as anything at all.
        payload = (bytes([rng.randrange(14)]) + body) if i % 2 == 0 else body
        try:
            c = t.connect(validate=False)
            c.sendall(payload)
            c.close()
        except OSError:  # refused and reset while it sent: what is wanted
            pass
    return []


ATTACKS = [("pipelined GETs", pipelined_gets), ("huge MULTI_GET", huge_multi_get),
           ("abandoned WAITs", abandoned_waits), ("silent connections", silent),
           ("random bytes", random_bytes)]


class AdversarialTest(unittest.TestCase):
    def agents(self, endpoint, fifo, host_first, env):
        """The job's two agents, and the endpoint they joined. With
        host_first, agent 0 hosts: `endpoint` says port 0 (HOST:0) and agent 1
        joins the port it bound."""
        agents = []
        for i in range(2):
            conf = FAST + ((",is_host=1" if i == 0 else ",is_host=0") if host_first else "")
            args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", endpoint, "--rdzv-id", "adv", "--local-addr", f"127.0.0.{i + 1}",
                    "--rdzv-conf", conf, "--tee", "3", PINGPONG]
            if host_first and i == 0:
                p, port = h.start_host(args, env=env, preexec_fn=limit_as)
                endpoint = f"{endpoint.rsplit(':', 1)[0]}:{port}"
            else:
                p = subprocess.Popen([h.ctrun_bin()] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
            agents.append(p)
        return agents, endpoint

    def run_attacks(self, target):
        for name, run in ATTACKS:
            target.attack(name, run)
        stop = target.connect()
        stop.sendall(SET(b"/legit/stop", b"1"))

    def check_job(self, agents):
        outs = h.finish(self, agents, 60)
        for p, (out, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, err[-3000:])
        allout = "".join(o for o, _ in outs)
        for rank in range(2):
            self.assertRegex(allout, rf"legit ok rank {rank} rounds \d+ restart 0")

    def test_agent_hosted_store(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        env = h.base_env(ANNOUNCE=fifo.path, CTRUN_PORT_SNIFF_DEADLINE_MS=SNIFF_MS)
        # The hosting agent binds port 0 and says which port it got.
        agents, endpoint = self.agents("127.0.0.1:0", fifo, True, env)
        port = int(endpoint.rsplit(":", 1)[1])
        lines = h.fifo_lines(self, fifo, 2, 60, agents)
        self.assertTrue(all(line.split()[2] == str(port) for line in lines), lines)
        target = Target(self, "127.0.0.1", port, agents[0].pid, agents)
        self.run_attacks(target)
        self.check_job(agents)

    def test_ctrund_store(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        daemon = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=limit_as,
                                  env=h.base_env(CTRUN_PORT_SNIFF_DEADLINE_MS=SNIFF_MS))
        self.addCleanup(lambda: daemon.poll() is None and daemon.kill())
        line = daemon.stdout.readline()  # "ctrund: serving rendezvous on 127.0.0.1:PORT"
        self.assertIn("serving rendezvous", line)
        port = int(line.strip().rsplit(":", 1)[1])
        agents, _ = self.agents(f"127.0.0.1:{port}", fifo, False, h.base_env(ANNOUNCE=fifo.path))
        lines = h.fifo_lines(self, fifo, 2, 60, agents)
        self.assertTrue(all(line.split()[2] == str(port) for line in lines), lines)
        target = Target(self, "127.0.0.1", port, daemon.pid, [daemon] + agents)
        self.run_attacks(target)
        self.check_job(agents)
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
        self.assertEqual(daemon.returncode, 0, err[-3000:])


if __name__ == "__main__":
    unittest.main()
