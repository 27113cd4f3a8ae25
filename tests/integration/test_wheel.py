"""The pip wheel (scripts/packaging/wheel.sh): its tag is true to what the
binaries need, `pip install` of it into a fresh venv puts ctrun (with
ctrun-full beside it) and ctrund on that venv's PATH, ctrun from there runs a stock DDP script with the venv's
python, and `pip uninstall` leaves the venv as it was."""
import os
import re
import subprocess
import unittest
import zipfile

import harness as h

SOURCE = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(h.HERE)))
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def tree(root):
    """Every path under root, with its size (what uninstall must restore)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for name in dirs + files:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = os.path.isdir(p)
    return out


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls._tmp = tempfile.TemporaryDirectory(prefix="ctrun_wheel_")
        cls.tmp = cls._tmp.name
        r = subprocess.run([os.path.join(SOURCE, "scripts/packaging/wheel.sh"), h.build_dir(),
                            os.path.join(cls.tmp, "dist")],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"wheel.sh failed ({r.returncode}): {r.stderr}")
        cls.wheel = r.stdout.strip().splitlines()[-1]

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_tag_is_true_to_the_binaries(self):
        m = re.fullmatch(r"ctrun-[0-9.]+-py3-none-manylinux_2_(\d+)_(x86_64|aarch64)\.whl",
                         os.path.basename(self.wheel))
        self.assertIsNotNone(m, self.wheel)
        tag_minor = int(m.group(1))
        extract = os.path.join(self.tmp, "unpacked")
        with zipfile.ZipFile(self.wheel) as z:
            names = z.namelist()
            z.extractall(extract)
        scripts = sorted(n for n in names if ".data/scripts/" in n)
        self.assertEqual([os.path.basename(n) for n in scripts], ["ctrun", "ctrun-full", "ctrun-health-check", "ctrund"])
        # The default health check ships as scripts/health-check.sh, byte for byte.
        check = next(n for n in scripts if n.endswith("/ctrun-health-check"))
        with open(os.path.join(extract, check), "rb") as f, \
                open(os.path.join(SOURCE, "scripts", "health-check.sh"), "rb") as g:
            self.assertEqual(f.read(), g.read())
        for n in (s for s in scripts if s != check):
            path = os.path.join(extract, n)
            needed = re.findall(r"\(NEEDED\).*\[(.*)\]",
                                subprocess.run(["readelf", "-d", path], capture_output=True,
                                               text=True, check=True).stdout)
            self.assertTrue(set(needed) <= ALLOWED_NEEDED, f"{n} needs {needed}")
            versions = re.findall(r"GLIBC_2\.(\d+)",
                                  subprocess.run(["objdump", "-T", path], capture_output=True,
                                                 text=True, check=True).stdout)
            # The tag names the newest glibc any imported symbol needs: no
            # older (pip would install it where it cannot run), no newer.
            self.assertEqual(max(int(v) for v in versions), tag_minor, n)

    def test_metadata_is_written_as_is(self):
        """The description reaches METADATA intact, backticks included, and
        building the wheel runs nothing it names: a `ctrun` first on PATH
        that leaves a mark when run stays unrun."""
        bait = os.path.join(self.tmp, "bait")
        os.makedirs(bait, exist_ok=True)
        mark = os.path.join(self.tmp, "ctrun_was_run")
        with open(os.path.join(bait, "ctrun"), "w") as f:
            f.write(f"#!/bin/sh\necho ran >> {mark}\necho BAIT\n")
        os.chmod(os.path.join(bait, "ctrun"), 0o755)
        out = os.path.join(self.tmp, "dist_bait")
        r = subprocess.run([os.path.join(SOURCE, "scripts/packaging/wheel.sh"), h.build_dir(), out],
                           capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PATH=bait + os.pathsep + os.environ.get("PATH", "")))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(mark), "wheel.sh ran the ctrun on PATH")
        for wheel in (self.wheel, r.stdout.strip().splitlines()[-1]):
            with zipfile.ZipFile(wheel) as z:
                name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
                metadata = z.read(name).decode()
            headers, _, body = metadata.partition("\n\n")
            self.assertIn("Name: ctrun", headers)
            self.assertRegex(headers, r"(?m)^Version: [0-9]+\.[0-9]+\.[0-9]+$")
            self.assertNotIn("BAIT", metadata)
            self.assertIn("it runs launches of several nodes and `ctrun status` in\nctrun-full, installed beside it",
                          body)
            self.assertIn("ctrund (the standalone rendezvous daemon).", body)

    def test_install_run_uninstall_in_a_venv(self):
        venv = os.path.join(self.tmp, "venv")
        subprocess.run([h.PYTHON, "-m", "venv", "--system-site-packages", venv],
                       check=True, timeout=120)
        before = tree(venv)
        pip = [os.path.join(venv, "bin", "python3"), "-m", "pip", "--disable-pip-version-check",
               "--no-input", "--no-cache-dir"]
        r = subprocess.run(pip + ["install", "--no-index", self.wheel],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for prog in ("ctrun", "ctrun-full", "ctrund", "ctrun-health-check"):
            self.assertTrue(os.access(os.path.join(venv, "bin", prog), os.X_OK), prog)

        # As a user would: the venv activated (its bin first on PATH), no
        # PYTHON_EXEC, so ctrun takes the venv's python3 (with Debian's torch
        # through --system-site-packages).
        env = h.base_env(PYTHON_EXEC=None, VIRTUAL_ENV=venv,
                         PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"])
        r = subprocess.run(["ctrun", "--nproc-per-node", "2", h.worker("ddp_tiny.py")],
                           env=env, capture_output=True, text=True, timeout=180,
                           cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = sorted(l for l in r.stdout.splitlines() if l.startswith("ddp rank"))
        self.assertEqual(len(lines), 2, r.stdout)
        # Both ranks ran under the venv's interpreter and ended with equal weights.
        self.assertTrue(all(f"python {venv}/bin/python3" in l for l in lines), lines)
        self.assertEqual(len({l.split(" checksum ")[1] for l in lines}), 1, lines)
        r = subprocess.run(["ctrund", "--help"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        # ctrun hands `ctrun status` to the wheel's ctrun-full, beside it.
        r = subprocess.run(["ctrun", "status", "--help"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--rdzv-endpoint", r.stdout)

        r = subprocess.run(pip + ["uninstall", "-y", "ctrun"], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(tree(venv), before, "pip uninstall left files behind or removed some")


if __name__ == "__main__":
    unittest.main()
