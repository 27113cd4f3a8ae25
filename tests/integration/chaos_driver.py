"""bench/chaos.py's driver as the tests run it (test_chaos.py,
test_ft_exact.py): its knobs as environment variables, its JSON report."""
import json
import os
import subprocess
import sys
import tempfile

from harness import base_env, build_dir

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "chaos.py")


def run_chaos(test, timeout, **knobs):
    """Runs the driver with `knobs` (NGROUPS="2", ...); fails `test` unless
    it exits 0; returns (its report, its stdout and stderr)."""
    with tempfile.TemporaryDirectory(prefix="chaos-test-") as tmp:
        env = base_env()
        env.update({"CTRUN_BUILD_DIR": build_dir(), "JSON": os.path.join(tmp, "chaos.json"),
                    "CHART": os.path.join(tmp, "chaos.png"), "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"})
        env.update(knobs)
        run = subprocess.run([sys.executable, DRIVER], env=env, capture_output=True, text=True, timeout=timeout)
        out = run.stdout + run.stderr
        test.assertEqual(run.returncode, 0, out[-4000:])
        with open(os.path.join(tmp, "chaos.json")) as f:
            return json.load(f), out
