"""ctrund as a process: its start line, SIGTERM/SIGINT shutdown, bad flags.

Run by CTest (CTRUN_BUILD_DIR set); waits on pipes with deadlines, never sleeps.
"""
import os
import re
import selectors
import signal
import subprocess
import tempfile
import unittest

BUILD_DIR = os.environ.get("CTRUN_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CTRUND = os.path.join(BUILD_DIR, "rendezvous", "ctrund")
DEADLINE_S = 10


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
                     ["--token-file", "/nonexistent/token"]):
            with self.subTest(args=args):
                done = subprocess.run([CTRUND, *args], capture_output=True, text=True, timeout=DEADLINE_S)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
                self.assertTrue(done.stderr.startswith("ctrund: "), done.stderr)

    def test_port_in_use_exits_1(self):
        proc = self.start()
        port = read_line(proc.stdout).strip().rsplit(":", 1)[1]
        done = subprocess.run([CTRUND, "--listen", "127.0.0.1:" + port], capture_output=True, text=True,
                              timeout=DEADLINE_S)
        self.assertEqual(done.returncode, 1)
        self.assertIn("cannot listen on 127.0.0.1:%s: address in use" % port, done.stderr)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=DEADLINE_S), 0)


if __name__ == "__main__":
    unittest.main()
