"""ctrund as a process: its start line, SIGTERM/SIGINT shutdown, bad flags;
--closed-run-ttl 0 with real ctrun agents: a finished run is forgotten (state
file, metrics series), a late query is told the id is unknown, the id runs again.

Run by CTest (CTRUN_BUILD_DIR set); waits on pipes with deadlines, never sleeps.
"""
import os
import re
import selectors
import signal
import subprocess
import tempfile
import unittest
import urllib.request

BUILD_DIR = os.environ.get("CTRUN_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CTRUND = os.path.join(BUILD_DIR, "rendezvous", "ctrund")
CTRUN = os.path.join(BUILD_DIR, "launcher", "ctrun")
DEADLINE_S = 10
JOB_DEADLINE_S = 60
# Agents of a ctrund: none hosts a server; quick keep-alives.
CONF = "is_host=0,last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60"


def read_line(stream, timeout=DEADLINE_S):
    """One line from `stream` within `timeout` seconds, or '' at EOF/timeout."""
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


class CtrundTest(unittest.TestCase):
    def start(self, *args, env=None):
        proc = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        return proc

    def test_prints_its_address_and_exits_0_on_sigterm(self):
        proc = self.start()
        line = read_line(proc.stdout)
        self.assertRegex(line, r"^ctrund: serving rendezvous on 127\.0\.0\.1:\d+\n$")
        self.assertNotEqual(re.search(r":(\d+)$", line.strip()).group(1), "0")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=DEADLINE_S), 0)

    def test_help_has_examples(self):
        done = subprocess.run([CTRUND, "--help"], capture_output=True, text=True, timeout=DEADLINE_S)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("Examples:\n  ctrund --listen 127.0.0.1:29400", done.stdout)
        self.assertIn("ctrund warns once at start", done.stdout)

    def test_warns_once_when_it_listens_beyond_loopback_with_no_credentials(self):
        # Every interface, in a network namespace of its own (only its own
        # loopback there): nothing outside the test can reach the port.
        warning = "with no token and no TLS: anyone who can reach this port can join or end a run"
        for listen, token, warned in (("0.0.0.0:0", None, True), ("0.0.0.0:0", "s3cret", False),
                                      ("127.0.0.1:0", None, False)):
            with self.subTest(listen=listen, token=token):
                env = dict(os.environ)
                env.pop("CTRUN_RDZV_TOKEN", None)
                if token:
                    env["CTRUN_RDZV_TOKEN"] = token
                proc = subprocess.Popen(["unshare", "--net", CTRUND, "--listen", listen], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=env)
                self.addCleanup(lambda: proc.poll() is None and proc.kill())
                self.assertIn("serving rendezvous", read_line(proc.stdout))
                proc.send_signal(signal.SIGTERM)
                out, err = proc.communicate(timeout=DEADLINE_S)
                self.assertEqual(proc.returncode, 0, err)
                self.assertEqual(err.decode().count(warning), 1 if warned else 0, err)
                if warned:
                    self.assertIn(f"listening on {listen} {warning}", err.decode())

    def test_exits_0_on_sigint(self):
        proc = self.start("--log-level", "warn")
        self.assertIn("serving rendezvous", read_line(proc.stdout))
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=DEADLINE_S), 0)

    def test_reads_the_token_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            f.write("s3cret\n")
            f.flush()
            proc = self.start("--token-file", f.name)
            self.assertIn("serving rendezvous", read_line(proc.stdout))
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=DEADLINE_S), 0)

    def test_bad_flags_print_one_line_and_exit_2(self):
        for args in (["--bogus"], ["--listen", "nohost"], ["--log-level", "loud"],
                     ["--token-file", "/nonexistent/token"], ["--closed-run-ttl", "-1"],
                     ["--closed-run-ttl", "soon"], ["--closed-run-ttl", "nan"], ["--closed-run-ttl", "1e12"]):
            with self.subTest(args=args):
                done = subprocess.run([CTRUND, *args], capture_output=True, text=True, timeout=DEADLINE_S)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
                self.assertTrue(done.stderr.startswith("ctrund: "), done.stderr)
                if args[0] == "--closed-run-ttl":
                    self.assertIn("--closed-run-ttl '%s'" % args[1], done.stderr)

    def test_port_in_use_exits_1(self):
        proc = self.start()
        port = read_line(proc.stdout).strip().rsplit(":", 1)[1]
        done = subprocess.run([CTRUND, "--listen", "127.0.0.1:" + port], capture_output=True, text=True,
                              timeout=DEADLINE_S)
        self.assertEqual(done.returncode, 1)
        self.assertIn("cannot listen on 127.0.0.1:%s: address in use" % port, done.stderr)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=DEADLINE_S), 0)


class ClosedRunTtlTest(unittest.TestCase):
    """ctrund --closed-run-ttl 0 --state-dir D --metrics-port 0 under real
    two-node ctrun jobs (workers: /bin/true)."""

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="ctrund-ttl-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.state]))
        self.daemon = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0", "--closed-run-ttl", "0", "--state-dir",
                                        self.state, "--metrics-port", "0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(self.daemon.stderr.close)
        self.addCleanup(self.daemon.stdout.close)
        self.addCleanup(lambda: self.daemon.poll() is None and self.daemon.kill())
        self.endpoint = re.search(r"serving rendezvous on (\S+)", read_line(self.daemon.stdout)).group(1)
        read_line(self.daemon.stdout)  # the status page
        self.metrics_url = re.search(r"serving metrics on (\S+)", read_line(self.daemon.stdout)).group(1)

    def job(self, run_id):
        """One two-node job of `run_id` to its end; both agents must exit 0."""
        agents = [subprocess.Popen([CTRUN, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                                    "--rdzv-endpoint", self.endpoint, "--rdzv-id", run_id,
                                    "--local-addr", "127.0.0.%d" % (i + 1), "--rdzv-conf", CONF,
                                    "--no-python", "/bin/true"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        for p in agents:
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        for p in agents:
            _, err = p.communicate(timeout=JOB_DEADLINE_S)
            self.assertEqual(p.returncode, 0, err)

    def metrics(self):
        with urllib.request.urlopen(self.metrics_url, timeout=DEADLINE_S) as r:
            return r.read().decode()

    def status(self, run_id):
        return subprocess.run([CTRUN, "status", "--rdzv-endpoint", self.endpoint, "--rdzv-id", run_id],
                              capture_output=True, text=True, timeout=DEADLINE_S)

    def test_a_finished_run_is_forgotten_and_its_id_runs_again(self):
        self.job("reuse")
        # Forgotten with everything kept of it: the late query hears the id
        # is unknown (not that it is closed), no state file, no series.
        late = self.status("reuse")
        self.assertNotEqual(late.returncode, 0, late.stdout)
        self.assertIn("run 'reuse' is not served here", late.stderr)
        self.assertNotIn("closed", late.stdout)
        self.assertEqual(os.listdir(self.state), [])
        text = self.metrics()
        self.assertNotIn('run_id="reuse"', text)
        self.assertRegex(text, r"(?m)^ctrun_runs 0$")
        # The id is free: a second job with it runs (from round 0) to its end.
        self.job("reuse")
        self.assertEqual(os.listdir(self.state), [])
        self.assertNotIn('run_id="reuse"', self.metrics())
        self.daemon.send_signal(signal.SIGTERM)
        self.assertEqual(self.daemon.wait(timeout=DEADLINE_S), 0)


if __name__ == "__main__":
    unittest.main()
