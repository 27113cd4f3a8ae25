"""--numa-binding on this machine: real ctrun, real workers that read their
own /proc/self/status. The placement rules themselves are unit-tested on
synthetic topologies (tests/launcher/numa); here: the binding is applied
before exec, inherited by the worker's children, printed, in the events file
and the failure report, and impossible ones stop ctrun with exit 2 before
anything starts. CUDA_VISIBLE_DEVICES="" makes the job CPU-only on any host."""
import json
import os
import subprocess
import unittest

import harness as h


def parse_list(text):
    """ "0-2,5" -> {0, 1, 2, 5} """
    ids = set()
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        ids.update(range(int(lo), int(hi or lo) + 1))
    return ids


def numa_nodes():
    """{node: its CPUs this process may use}, for nodes that have any."""
    allowed = os.sched_getaffinity(0)
    base = "/sys/devices/system/node"
    nodes = {}
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if name.startswith("node") and name[4:].isdigit():
            with open(os.path.join(base, name, "cpulist")) as f:
                cpus = parse_list(f.read()) & allowed
            if cpus:
                nodes[int(name[4:])] = cpus
    return nodes or {0: allowed}


class NumaBindingTest(unittest.TestCase):
    def launch(self, mode, nproc, **env):
        d = h.tempdir(self)
        events = os.path.join(d, "events.jsonl")
        r = h.run(["--nproc-per-node", str(nproc), "--numa-binding", mode, "--rdzv-id", "numa",
                   "--log-dir", os.path.join(d, "logs"), h.worker("report_cpus.py")],
                  env=h.base_env(DUMP_DIR=d, CUDA_VISIBLE_DEVICES="", CTRUN_EVENTS_FILE=events, **env),
                  timeout=120)
        reports = {}
        for rank in range(nproc):
            path = os.path.join(d, f"cpus.{rank}.json")
            if os.path.exists(path):
                with open(path) as f:
                    reports[rank] = json.load(f)
        with open(events) as f:
            started = [e for e in map(json.loads, f) if e["event"] == "worker_started"]
        return r, reports, started

    def test_exclusive_gives_disjoint_sets_that_cover_the_allowed_cpus(self):
        allowed = os.sched_getaffinity(0)
        if len(allowed) < 2:
            self.skipTest("needs 2 CPUs")
        r, reports, started = self.launch("exclusive", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        sets = [parse_list(reports[rank]["own"]) for rank in (0, 1)]
        self.assertTrue(sets[0] and sets[1], sets)
        self.assertEqual(sets[0] & sets[1], set())
        self.assertEqual(sets[0] | sets[1], allowed)
        for rank in (0, 1):
            # Inherited by what the worker starts.
            self.assertEqual(parse_list(reports[rank]["child"]), sets[rank])
            # Printed once at start, and in the events file.
            lines = [line for line in r.stderr.splitlines() if f"local rank {rank}: " in line]
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("(--numa-binding exclusive, no GPU)", lines[0])
            event = next(e for e in started if e["local_rank"] == rank)
            self.assertEqual(set(event["cpus"]), sets[rank])
            self.assertIn(event["binding"], lines[0])
            # Memory preferred on the worker's node, unless the kernel refuses policies.
            if "bound to their CPUs only" in r.stderr:
                self.assertEqual(event["memory_nodes"], [])
                self.assertEqual(reports[rank]["policy"], "default")
            else:
                self.assertEqual(len(event["memory_nodes"]), 1)
                self.assertEqual(reports[rank]["policy"], f"prefer:{event['memory_nodes'][0]}")

    def test_node_binds_each_worker_to_a_whole_numa_node(self):
        nodes = numa_nodes()
        r, reports, _ = self.launch("node", 2)
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in (0, 1):
            self.assertIn(parse_list(reports[rank]["own"]), list(nodes.values()), reports)

    def test_the_failure_report_names_the_binding(self):
        r, reports, started = self.launch("exclusive", 1, FAIL_WITH=3)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"  binding   : {started[0]['binding']}\n", r.stderr)
        self.assertEqual(parse_list(reports[0]["own"]), set(started[0]["cpus"]))

    def test_more_exclusive_workers_than_cores_is_a_usage_error(self):
        d = h.tempdir(self)
        logs = os.path.join(d, "logs")
        nproc = len(os.sched_getaffinity(0)) + 1  # more than the cores, on some node
        r = h.run(["--nproc-per-node", str(nproc), "--numa-binding", "exclusive", "--log-dir", logs,
                   h.worker("report_cpus.py")],
                  env=h.base_env(DUMP_DIR=d, CUDA_VISIBLE_DEVICES=""), timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        errors = [line for line in r.stderr.splitlines() if line.startswith("ctrun: error: ")]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertRegex(errors[0], r"--numa-binding exclusive: NUMA node \d+ has \d+ allowed physical "
                                    r"cores? for \d+ workers.*--nproc-per-node")
        self.assertFalse(os.path.exists(logs), "a directory was made before the check")
        self.assertEqual([f for f in os.listdir(d) if f.startswith("cpus.")], [])

    def test_a_topology_hwloc_cannot_read_is_a_usage_error(self):
        d = h.tempdir(self)
        bad = os.path.join(d, "topology.xml")
        with open(bad, "w") as f:
            f.write("<topology>\n")
        r = h.run(["--numa-binding", "node", "--log-dir", os.path.join(d, "logs"), "--no-python", "/bin/true"],
                  env=h.base_env(HWLOC_XMLFILE=bad), timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"ctrun: error: --numa-binding: hwloc cannot read .*drop --numa-binding")
        self.assertFalse(os.path.exists(os.path.join(d, "logs")))


class HwlocLibraryTest(unittest.TestCase):
    """ctrun opens libhwloc.so.15 only for --numa-binding. Here it is made
    unloadable for one ctrun (a private mount namespace binds /dev/null over
    the library file): a job without --numa-binding still runs, one with it
    stops with one line and exit 2 before anything starts."""

    def run_without_hwloc(self, args):
        if os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"):
            self.skipTest("needs root and unshare for a mount namespace")
        lib = None
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                  "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if os.path.exists(os.path.join(d, "libhwloc.so.15")):
                lib = os.path.realpath(os.path.join(d, "libhwloc.so.15"))
                break
        self.assertIsNotNone(lib, "libhwloc.so.15 not found (the build needs hwloc)")
        script = 'mount --bind /dev/null "$1" && shift && exec "$@"'
        return subprocess.run(["/usr/bin/unshare", "--mount", "sh", "-c", script, "sh", lib,
                               h.ctrun_bin(), *args],
                              env=h.base_env(), capture_output=True, text=True, timeout=60)

    def test_without_numa_binding_ctrun_never_loads_hwloc(self):
        d = h.tempdir(self)
        r = self.run_without_hwloc(["--log-dir", os.path.join(d, "logs"), "--no-python", "/bin/true"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_numa_binding_without_hwloc_is_one_usage_error(self):
        d = h.tempdir(self)
        logs = os.path.join(d, "logs")
        r = self.run_without_hwloc(["--numa-binding", "node", "--log-dir", logs, "--no-python", "/bin/true"])
        self.assertEqual(r.returncode, 2, r.stderr)
        errors = [line for line in r.stderr.splitlines() if line.startswith("ctrun: error: ")]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertRegex(errors[0], r"^ctrun: error: --numa-binding: hwloc's library libhwloc\.so\.15 cannot "
                                    r"be loaded, install it \(Debian/Ubuntu: apt-get install libhwloc15\): "
                                    r".*libhwloc\.so\.15.*; drop --numa-binding to run unbound$")
        self.assertFalse(os.path.exists(logs), "a directory was made before the check")


if __name__ == "__main__":
    unittest.main()
