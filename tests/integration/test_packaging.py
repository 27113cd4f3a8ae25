"""What users install: `cmake --install` of the build into a fresh prefix (the
binaries, ctrun-full beside ctrun, man pages, bash completion, docs) and the
CPack .deb. The installed `--help` is the source of truth for
the flags the man pages and the completion must cover."""
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

import harness as h

SOURCE = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(h.HERE)))
COMPLETION = "share/bash-completion/completions"
# The one-node ctrun hands launches of several nodes to it (launcher/app/handoff.h).
FULL = "bin/ctrun-full"


def flags_in_help(text):
    """Every flag spelling on the option lines of a --help text (ctrun's and
    CLI11's layouts): the words starting with '-' before the metavar."""
    flags = []
    for line in text.splitlines():
        if not line.startswith("  -"):
            continue
        for word in line.split():
            if not word.startswith("-"):
                break
            flags += [f for f in word.rstrip(",").split(",") if f]
    return flags


def needed_libraries(elf):
    """{soname: resolved path} of the DT_NEEDED entries of `elf`."""
    dynamic = subprocess.run(["readelf", "-d", elf], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    ldd = subprocess.run(["ldd", elf], capture_output=True, text=True, check=True).stdout
    paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    return {lib: paths.get(lib, lib) for lib in needed}


def package_names(path):
    """The Debian package that installed `path` (usrmerge: /lib or /usr/lib)
    and the virtual packages it provides (libspdlog1.10 provides
    libspdlog1.10-fmt9, which is what its shlibs file tells dependants)."""
    real = os.path.realpath(path)
    for candidate in (path, real, "/usr" + real, real.removeprefix("/usr")):
        r = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        if r.returncode == 0:
            package = r.stdout.split(":", 1)[0].split(",")[0].strip()
            provides = subprocess.run(["dpkg-query", "-W", "-f=${Provides}", package], capture_output=True,
                                      text=True).stdout
            return {package} | {p.split()[0] for p in provides.split(",") if p.strip()}
    return {f"<no package owns {path}>"}


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ctrun_install_")
        cls.prefix = os.path.join(cls.tmp.name, "prefix")
        r = subprocess.run(["cmake", "--install", h.build_dir(), "--prefix", cls.prefix],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            cls.tmp.cleanup()
            raise AssertionError(f"cmake --install failed: {r.stdout}{r.stderr}")
        cls.help = {prog: cls.run_installed(prog, "--help").stdout for prog in ("ctrun", "ctrund")}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def run_installed(cls, prog, *args, **kw):
        return subprocess.run([os.path.join(cls.prefix, "bin", prog), *args],
                              capture_output=True, text=True, timeout=30, **kw)

    def path(self, rel):
        return os.path.join(self.prefix, rel)

    def test_installed_tree_has_every_file(self):
        docs = sorted(f for f in os.listdir(os.path.join(SOURCE, "docs")) if f.endswith(".md"))
        self.assertIn("quickstart.md", docs)
        for rel in ["bin/ctrun", FULL, "bin/ctrund",
                    "share/man/man1/ctrun.1", "share/man/man1/ctrund.1",
                    f"{COMPLETION}/ctrun", f"{COMPLETION}/ctrund",
                    "share/doc/ctrun/README.md", "share/doc/ctrun/LICENSE",
                    *[f"share/doc/ctrun/docs/{d}" for d in docs]]:
            self.assertTrue(os.path.isfile(self.path(rel)), f"{rel} is not installed")
        for exe in ["bin/ctrun", FULL, "bin/ctrund"]:
            self.assertTrue(os.stat(self.path(exe)).st_mode & stat.S_IXUSR, exe)

    def test_installed_programs_answer_help_and_version(self):
        self.assertTrue(self.help["ctrun"].startswith("usage: ctrun"), self.help["ctrun"][:200])
        self.assertIn("--listen", self.help["ctrund"])
        self.assertIn("--nproc-per-node", flags_in_help(self.help["ctrun"]))
        self.assertIn("--token-file", flags_in_help(self.help["ctrund"]))
        r = self.run_installed("ctrun", "--version")
        self.assertRegex(r.stdout, r"^ctrun \d+\.\d+\.\d+\n$")

    def test_two_nodes_from_the_installed_tree(self):
        # --nnodes 2: bin/ctrun hands the launch to bin/ctrun-full beside it.
        d = h.tempdir(self)
        script = os.path.join(d, "worker.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\necho "rank $RANK world $WORLD_SIZE"\n')
        os.chmod(script, 0o755)
        port = 0  # the first agent hosts: it binds a free port and says which; the second joins it
        agents = []
        for i in range(2):
            args = ["--nnodes", "2", "--nproc-per-node", "1",
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "pkg",
                    "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", "last_call_timeout=1,join_timeout=30",
                    "--no-python", script]
            if i == 0:
                p, port = h.start_host(args, program=self.path("bin/ctrun"), cwd=d, env=h.base_env())
            else:
                p = subprocess.Popen([self.path("bin/ctrun")] + args, cwd=d, env=h.base_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
            agents.append(p)
        outs = [p.communicate(timeout=60) for p in agents]
        for p, (_, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sorted("".join(o for o, _ in outs).split("\n")[:-1]),
                         ["rank 0 world 2", "rank 1 world 2"])

    def test_without_ctrun_full_multi_node_fails_naming_it(self):
        d = h.tempdir(self)
        os.mkdir(os.path.join(d, "bin"))
        lonely = os.path.join(d, "bin", "ctrun")
        shutil.copy2(self.path("bin/ctrun"), lonely)
        tmp = os.path.join(d, "tmp")  # where a launch would make its log directory
        os.mkdir(tmp)
        # The hand-off fails before anything listens or connects: no port is used.
        r = subprocess.run([lonely, "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                            "127.0.0.1:29400", "--no-python", "/bin/true"],
                           env=h.base_env(TMPDIR=tmp), capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"{d}/bin/ctrun-full cannot be run (No such file or directory)", r.stderr)
        self.assertIn("reinstall ctrun", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(os.listdir(tmp), [], "nothing may be made before the hand-off")
        r = subprocess.run([lonely, "status", "--rdzv-endpoint", "127.0.0.1:29400"],
                           env=h.base_env(), capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("ctrun status runs in ctrun-full", r.stderr)

    def test_man_pages_name_every_flag(self):
        for prog in ("ctrun", "ctrund"):
            with open(self.path(f"share/man/man1/{prog}.1")) as f:
                page = f.read()
            self.assertTrue(page.startswith(f".TH {prog.upper()} 1"), page[:80])
            text = re.sub(r"\\f[BIRP]", "", page).replace("\\-", "-")  # fonts off, \- is -
            for flag in flags_in_help(self.help[prog]):
                self.assertRegex(text, rf"(?<![\w-]){re.escape(flag)}(?![\w-])", f"{prog}.1 lacks {flag}")
            for section in (".SH SYNOPSIS", ".SH OPTIONS", ".SH EXIT STATUS", ".SH SEE ALSO"):
                self.assertIn(section, page)
            if shutil.which("groff"):
                r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", self.path(f"share/man/man1/{prog}.1")],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.stderr, "", f"{prog}.1 has roff warnings")

    def complete(self, prog, *words):
        """COMPREPLY of the installed completion for `prog words...` (the last
        word is the one being completed), with the installed bin/ first on PATH."""
        d = h.tempdir(self)
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in (prog, *words))
        script = (f"source '{self.path(COMPLETION)}/{prog}'\n"
                  f"COMP_WORDS=({quoted}); COMP_CWORD={len(words)}\n"
                  "_ctrun; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
        env = dict(os.environ, PATH=self.path("bin") + ":" + os.environ.get("PATH", ""))
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=d, env=env,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [w for w in r.stdout.split("\n") if w]

    def test_completion_offers_every_flag(self):
        for prog in ("ctrun", "ctrund"):
            offered = self.complete(prog, "-")
            self.assertEqual(sorted(set(flags_in_help(self.help[prog]))), sorted(set(offered)), prog)

    def test_completion_of_values_and_script_arguments(self):
        self.assertIn("c10d", self.complete("ctrun", "--rdzv-backend", ""))
        self.assertEqual(["c10d"], self.complete("ctrun", "--rdzv_backend", "=", "c"))
        self.assertEqual(["--nnodes"], self.complete("ctrun", "--standalone", "--nnod"))
        self.assertIn("debug", self.complete("ctrund", "--log-level", ""))
        # After the script every word is the script's: no ctrun flags.
        self.assertEqual([], self.complete("ctrun", "--nnodes", "1", "train.py", "--nnod"))


class DebTest(unittest.TestCase):
    def test_deb_holds_the_install_tree_and_its_depends(self):
        d = h.tempdir(self)
        r = subprocess.run(["cpack", "-G", "DEB", "--config", os.path.join(h.build_dir(), "CPackConfig.cmake"),
                            "-B", d], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        debs = [f for f in os.listdir(d) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(d))
        deb = os.path.join(d, debs[0])
        listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
        paths = {line.split()[-1] for line in listing.splitlines()}
        for rel in ["./usr/bin/ctrun", f"./usr/{FULL}", "./usr/bin/ctrund",
                    "./usr/share/man/man1/ctrun.1", "./usr/share/man/man1/ctrund.1",
                    f"./usr/{COMPLETION}/ctrun", "./usr/share/doc/ctrun/README.md",
                    "./usr/share/doc/ctrun/docs/quickstart.md"]:
            self.assertIn(rel, paths)
        fields = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Depends"], capture_output=True, text=True,
                                check=True).stdout
        self.assertIn("Package: ctrun", fields)
        # hwloc is opened with dlopen (--numa-binding only): recommended, not a Depends.
        recommends = subprocess.run(["dpkg-deb", "-f", deb, "Recommends"], capture_output=True, text=True,
                                    check=True).stdout
        self.assertIn("libhwloc15", {r.strip().split()[0] for r in recommends.split(",") if r.strip()})
        depends = {d.split()[0] for d in fields.split("Depends:", 1)[1].split(",")}
        root = os.path.join(d, "root")
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        # Every shared library a packaged program needs comes from a package
        # the .deb depends on.
        elves = [os.path.join(root, "usr/bin", f) for f in ("ctrun", "ctrun-full", "ctrund")]
        for elf in elves:
            for lib, path in needed_libraries(elf).items():
                names = package_names(path)
                self.assertTrue(names & depends, f"{os.path.basename(elf)} needs {lib} from {names}: not in Depends")
        # The stripped binaries still run.
        r = subprocess.run([os.path.join(root, "usr/bin/ctrun"), "--version"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
