"""What the load generators' tests share: where the build is, and a ctrund
of the test's own on 127.0.0.1 port 0, stopped when the test ends."""
import os
import re
import subprocess

BUILD_DIR = os.environ.get("CTRUN_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CTRUND = os.path.join(BUILD_DIR, "rendezvous", "ctrund")


def start_ctrund(test, *args, log=None):
    """Starts ctrund with `args`, its log to `log` (default: dropped), and
    returns (process, "host:port") from its start line; `test` (a
    unittest.TestCase) kills and reaps it at cleanup."""
    proc = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=log or subprocess.DEVNULL, text=True)
    test.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait()))
    test.addCleanup(proc.stdout.close)
    line = proc.stdout.readline()
    m = re.search(r"serving rendezvous on (\S+:\d+)$", line.strip())
    test.assertIsNotNone(m, f"ctrund's start line: {line!r}")
    return proc, m.group(1)
