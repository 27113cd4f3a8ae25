"""Rendezvous authentication end to end: ctrund and ctrun agents with a shared
token, a wrong or missing token, a wrong run id, TLS with a CA and
certificates made here by `openssl`, a wrong CA, plaintext against TLS,
mutual TLS; every refusal is one clear line on the agent and a warning on the
server. And ctrund listens only where --listen says.

Waits are on process exits and pipe lines with deadlines; nothing sleeps.
"""
import os
import re
import selectors
import signal
import socket
import subprocess
import unittest

import harness as h

CTRUND = os.path.join(h.build_dir(), "rendezvous", "ctrund")
# Small timeouts so a refusal that is not fast shows up as a slow failure,
# never as a hang.
# keep_alive_max_attempt=10: a node may be silent 5 s (a TLS handshake beside the
# trainer tests on 2 busy cores) before eviction; liveness is not what these tests check.
CONF = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=10,join_timeout=20"
DEADLINE_S = 60


def read_line(stream, timeout=10):
    """One line of `stream` within `timeout` s ('' at EOF or on time-out)."""
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    line = b""
    while not line.endswith(b"\n"):
        if not sel.select(timeout):
            break
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            break
        line += chunk
    sel.close()
    return line.decode()


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_pki(d):
    """CA `ca`, a server and a client certificate it signed (for 127.0.0.1 and
    localhost), and an unrelated CA `other`. Returns {name: path}."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN=ctrun {ca} test CA", cwd=d)
    with open(os.path.join(d, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "san.cnf", cwd=d)
    return {n: os.path.join(d, n) for n in os.listdir(d)}


class Daemon:
    """ctrund on 127.0.0.1 with a free port; stderr (its log) read at stop()."""

    def __init__(self, test, *args, env=None):
        self.proc = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env or h.base_env(CTRUN_RDZV_TOKEN=None))
        test.addCleanup(lambda: self.proc.poll() is None and self.proc.kill())
        test.addCleanup(self.proc.stdout.close)
        test.addCleanup(self.proc.stderr.close)
        self.line = read_line(self.proc.stdout)
        m = re.search(r"serving rendezvous on 127\.0\.0\.1:(\d+)", self.line)
        test.assertTrue(m, self.line + self.proc.stderr.read().decode() if self.proc.poll() is not None else "")
        self.port = int(m.group(1))
        self.endpoint = f"127.0.0.1:{self.port}"

    def stop(self):
        """SIGTERM, then its whole log."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=DEADLINE_S)
        return self.proc.stderr.read().decode()


def agent_args(endpoint, run_id, conf=CONF, nnodes="2"):
    return ["--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--rdzv-conf", conf,
            "--no-python", "/bin/true"]


def run_agents(endpoints_confs, run_id="job", token=None, env=None, host_conf=None):
    """Starts one agent per (endpoint, conf) and waits for all; returns the
    CompletedProcess-like (returncode, stderr) list. With `host_conf`, an
    agent that hosts on 127.0.0.1:0 (with that conf) comes first, and an
    endpoint of None means the port it bound."""
    env = env or h.base_env(CTRUN_RDZV_TOKEN=token)
    procs = []
    if host_conf is not None:
        host, port = h.start_host(agent_args("127.0.0.1:0", run_id, host_conf), env=env)
        procs.append(host)
        endpoints_confs = [(e or f"127.0.0.1:{port}", c) for e, c in endpoints_confs]
    procs += [h.start(agent_args(e, run_id, c), env=env) for e, c in endpoints_confs]
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        out.append((p.returncode, err))
    return out


def assert_all_ok(test, results, daemon=None):
    """Every agent of run_agents exited 0; else fails with every agent's
    stderr (the one that did not join is often not the first) and, given
    the Daemon, its log."""
    if any(rc != 0 for rc, _ in results):
        logs = [f"--- agent {i} (exit {rc}):\n{err}" for i, (rc, err) in enumerate(results)]
        if daemon is not None:
            logs.append("--- ctrund:\n" + daemon.stop())
        test.fail("\n".join(logs))


def error_lines(stderr):
    return [l for l in stderr.splitlines() if "error" in l.lower()]


class TokenTest(unittest.TestCase):
    def setUp(self):
        self.dir = h.tempdir(self)
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write("right-token\n")

    def test_right_token_from_env_or_file_forms_the_job(self):
        d = Daemon(self, "--token-file", self.token_file)
        results = run_agents([(d.endpoint, CONF), (d.endpoint, CONF + ",token_file=" + self.token_file)],
                             token="right-token")
        assert_all_ok(self, results, d)
        self.assertNotIn("refused", d.stop())

    def test_wrong_or_missing_token_is_refused_on_both_sides(self):
        d = Daemon(self, "--token-file", self.token_file)
        for token, what in (("wrong-token", "a wrong token"), (None, "no token")):
            with self.subTest(token=token):
                p = h.start(agent_args(d.endpoint, "job"), env=h.base_env(CTRUN_RDZV_TOKEN=token))
                _, err = p.communicate(timeout=DEADLINE_S)
                self.assertEqual(p.returncode, 1, err)
                self.assertIn("rendezvous token mismatch", err)
                self.assertEqual(len([l for l in err.splitlines() if "token mismatch" in l]), 1, err)
        log = d.stop()
        self.assertRegex(log, r"refused a call from ipv4:127\.0\.0\.1:\d+ for run 'job': it sent a wrong token")

    def test_hosting_agent_checks_the_token_too(self):
        host, port = h.start_host(agent_args("127.0.0.1:0", "job", CONF + ",is_host=1"),
                                  env=h.base_env(CTRUN_RDZV_TOKEN="right"))
        endpoint = f"127.0.0.1:{port}"
        self.addCleanup(lambda: host.poll() is None and host.kill())
        stranger = h.start(agent_args(endpoint, "job", CONF + ",is_host=0"),
                           env=h.base_env(CTRUN_RDZV_TOKEN="wrong"))
        _, err = stranger.communicate(timeout=DEADLINE_S)
        self.assertEqual(stranger.returncode, 1, err)
        self.assertIn("rendezvous token mismatch", err)
        host.send_signal(signal.SIGTERM)
        _, host_err = host.communicate(timeout=DEADLINE_S)
        self.assertIn("refused a call from", host_err)

    def test_wrong_run_id_on_a_hosting_agent_is_refused_on_both_sides(self):
        host, port = h.start_host(agent_args("127.0.0.1:0", "job-a", CONF + ",is_host=1"))
        endpoint = f"127.0.0.1:{port}"
        self.addCleanup(lambda: host.poll() is None and host.kill())
        other = h.start(agent_args(endpoint, "job-b", CONF + ",is_host=0"))
        _, err = other.communicate(timeout=DEADLINE_S)
        self.assertEqual(other.returncode, 1, err)
        self.assertIn("job-b", err)
        self.assertIn("job-a", err)  # names the run the server has
        host.send_signal(signal.SIGTERM)
        _, host_err = host.communicate(timeout=DEADLINE_S)
        self.assertRegex(host_err, r"refused node .*job-b|run 'job-b'.*refused|refused node")



class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls._dir = tempfile.TemporaryDirectory(prefix="ctrun_tls_")
        cls.pki = make_pki(cls._dir.name)

    @classmethod
    def tearDownClass(cls):
        cls._dir.cleanup()

    def tls_daemon(self, *extra):
        p = self.pki
        return Daemon(self, "--tls-cert", p["server.pem"], "--tls-key", p["server.key"], *extra)

    def test_agents_with_the_ca_form_the_job_over_tls(self):
        d = self.tls_daemon()
        self.assertIn("(TLS)", d.line)
        conf = CONF + ",tls_ca=" + self.pki["ca.pem"]
        assert_all_ok(self, run_agents([(d.endpoint, conf), (d.endpoint, conf)]), d)
        d.stop()

    def test_a_wrong_ca_fails_fast_with_a_clear_message_on_both_sides(self):
        d = self.tls_daemon()
        conf = CONF + ",tls_ca=" + self.pki["other.pem"]
        p = h.start(agent_args(d.endpoint, "job", conf))
        _, err = p.communicate(timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("TLS handshake with the rendezvous at " + d.endpoint + " failed", err)
        self.assertIn("certificate verify failed", err)
        self.assertNotIn("within join_timeout", err)  # told at once, not after the join timeout
        self.assertRegex(d.stop(), r"TLS handshake with ipv4:127\.0\.0\.1:\d+ failed")

    def test_plaintext_agent_against_a_tls_daemon_fails(self):
        d = self.tls_daemon()
        conf = CONF.replace("join_timeout=20", "join_timeout=3,close_timeout=2")
        p = h.start(agent_args(d.endpoint, "job", conf))
        _, err = p.communicate(timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 1, err)
        self.assertTrue(error_lines(err), err)
        d.stop()

    def test_tls_agent_against_a_plaintext_daemon_fails_fast(self):
        d = Daemon(self)
        p = h.start(agent_args(d.endpoint, "job", CONF + ",tls_ca=" + self.pki["ca.pem"]))
        _, err = p.communicate(timeout=DEADLINE_S)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("TLS handshake with the rendezvous", err)
        d.stop()

    def test_mutual_tls_needs_a_client_certificate(self):
        p = self.pki
        d = self.tls_daemon("--tls-client-ca", p["ca.pem"])
        self.assertIn("client certificates required", d.line)
        with_cert = CONF + f",tls_ca={p['ca.pem']},tls_cert={p['client.pem']},tls_key={p['client.key']}"
        assert_all_ok(self, run_agents([(d.endpoint, with_cert), (d.endpoint, with_cert)]), d)
        # TLS 1.3: the client finishes its half of the handshake before the
        # server refuses it, so the agent sees a dropped connection only and
        # gives up at join_timeout; the server says why.
        conf = CONF.replace("join_timeout=20", "join_timeout=3,close_timeout=2") + ",tls_ca=" + p["ca.pem"]
        without = h.start(agent_args(d.endpoint, "job2", conf))
        _, err = without.communicate(timeout=DEADLINE_S)
        self.assertEqual(without.returncode, 1, err)
        self.assertIn("no rendezvous round formed", err)
        self.assertIn("peer did not return a certificate", d.stop())

    def test_hosting_agent_serves_tls(self):
        p = self.pki
        host_conf = CONF + f",is_host=1,tls_ca={p['ca.pem']},tls_cert={p['server.pem']},tls_key={p['server.key']}"
        guest_conf = CONF + f",is_host=0,tls_ca={p['ca.pem']}"
        assert_all_ok(self, run_agents([(None, guest_conf)], host_conf=host_conf))


def listening_sockets(pid):
    """(address, port) of every TCP socket in LISTEN that `pid` holds."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state != "0A" or inode not in inodes:  # 0A = LISTEN
                    continue
                addr_hex, port_hex = local.split(":")
                if width == 8:
                    addr = socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr_hex)[::-1])
                else:
                    raw = bytes.fromhex(addr_hex)
                    addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
                if addr.startswith("::ffff:") and "." in addr:  # v4-mapped: gRPC's dual-stack socket
                    addr = addr[len("::ffff:"):]
                found.append((addr, int(port_hex, 16)))
    return found


class BindTest(unittest.TestCase):
    def test_ctrund_listens_only_where_told(self):
        d = Daemon(self)
        self.assertEqual(listening_sockets(d.proc.pid), [("127.0.0.1", d.port)])
        d.stop()

    def test_hosting_agent_listens_only_on_the_endpoint_address(self):
        # --local-addr: the workers' store (which the agent hosts too) binds the
        # address the workers are given; without it, every interface, as
        # torch's TCPStore does. The agent logs that it hosts, and on which
        # port, once the listener is up (start_host waits for that line).
        host, port = h.start_host(["--local-addr", "127.0.0.1"] +
                                  agent_args("127.0.0.1:0", "job", CONF + ",is_host=1"), timeout=DEADLINE_S)
        self.addCleanup(lambda: host.poll() is None and host.kill())
        sockets = listening_sockets(host.pid)
        self.assertIn(("127.0.0.1", port), sockets)
        self.assertEqual(len(sockets), 2, sockets)  # the rendezvous and the workers' store
        self.assertEqual({addr for addr, _ in sockets}, {"127.0.0.1"})
        host.send_signal(signal.SIGTERM)
        host.communicate(timeout=DEADLINE_S)


if __name__ == "__main__":
    unittest.main()
