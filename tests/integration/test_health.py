"""Node health (issue 19, items 1 and 2) with real agents on loopback: a node
whose --health-check fails leaves the job and a hot spare takes its group
rank; more unhealthy nodes than --max-unhealthy-nodes end the job (exit 5);
a worker's CTRUN_EXCLUDE_NODE_FILE request removes its node. The workers are
a few lines of shell (--no-python); each waits on a condition, never a time."""
import json
import os
import signal
import socket
import stat
import subprocess
import unittest

import harness as h

FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=2,join_timeout=30"


def script(d, name, body):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, stat.S_IRWXU)
    return path


class HealthTest(unittest.TestCase):
    def setUp(self):
        self.dir = h.tempdir(self)
        self.port = None  # bound by agent 0, which hosts (started first)
        self.fifo = h.Fifo(self.dir)
        self.addCleanup(self.fifo.close)
        self.agents = []

    def start(self, index, node, nnodes, worker, *extra, conf=FAST):
        """Agent `index` (index 0 hosts the rendezvous), its workers see NODE."""
        conf += ",is_host=1" if index == 0 else ",is_host=0"
        env = h.base_env(NODE=node, DIR=self.dir, FIFO=self.fifo.path)
        if index != 0 and self.port is None:
            raise AssertionError("start agent 0 (the host) first")
        args = ["--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{self.port if index else 0}", "--rdzv-id", "job",
                "--local-addr", f"127.0.0.{index + 1}", "--rdzv-conf", conf,
                "--events-file", os.path.join(self.dir, f"events_{node}.jsonl"),
                *extra, "--no-python", worker]
        if index == 0:  # it binds port 0 and says which port it got; the others join that
            p, self.port = h.start_host(args, env=env)
        else:
            p = h.start(args, env=env)
        self.agents.append(p)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def events(self, node, name):
        with open(os.path.join(self.dir, f"events_{node}.jsonl")) as f:
            return [e for e in map(json.loads, f) if e["event"] == name]

    def test_a_node_failing_its_check_is_replaced_by_the_spare_at_its_rank(self):
        # Each worker announces "NODE GROUP_RANK"; A's first worker and B's
        # run until stopped, A's second and the spare C's finish at once.
        worker = script(self.dir, "worker.sh", """
echo "$NODE $GROUP_RANK" > "$FIFO"
n=$(cat "$DIR/runs.$NODE" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$DIR/runs.$NODE"
if [ "$NODE" = C ] || [ $n -ge 2 ]; then exit 0; fi
exec sleep 60
""")
        fail = os.path.join(self.dir, "fail")
        check = ["--health-check", f"echo checking; test ! -e {fail} || {{ echo 'GPU 1: XID 79'; exit 1; }}",
                 "--health-check-interval", "0.2"]
        budget = ["--max-unhealthy-nodes", "1"]  # the default for 2:2 is 0
        a = self.start(0, "A", "2", worker, "--health-check", "true", *budget)
        b = self.start(1, "B", "2", worker, *check, *budget)
        first = dict(line.split() for line in h.fifo_lines(self, self.fifo, 2, 30, self.agents))
        c = self.start(2, "C", "2", worker, "--health-check", "true", *budget)
        try:
            h.read_until(c.stderr, "hot spare", 30)
        except TimeoutError as e:
            h.fail_with_tails(self, self.agents, f"C is not a spare: {e}")
        open(fail, "w").close()  # B's next periodic check fails
        second = dict(line.split() for line in h.fifo_lines(self, self.fifo, 2, 30, self.agents))
        outs = h.finish(self, self.agents, 30)
        self.assertEqual(a.returncode, 0, outs[0][1])
        self.assertEqual(b.returncode, 4, outs[1][1])
        self.assertEqual(c.returncode, 0, outs[2][1])
        self.assertEqual(second, {"A": first["A"], "C": first["B"]})  # C took B's group rank
        self.assertIn("node unhealthy", outs[1][1])
        self.assertIn("GPU 1: XID 79", outs[1][1])  # the check's last lines in B's report
        [ev] = self.events("B", "node_unhealthy")
        self.assertEqual((ev["source"], ev["during"]), ("health_check", "running"))
        self.assertEqual(ev["last_lines"], ["checking", "GPU 1: XID 79"])
        # Not a failure of A's: its restart was a membership change.
        self.assertTrue(all(not r["charged"] for r in self.events("A", "restart")))

    def test_exceeding_the_unhealthy_budget_ends_the_job_with_exit_5(self):
        # nnodes 2:2: the default budget is 0. B's worker marks B broken;
        # B's next periodic check fails.
        worker = script(self.dir, "worker.sh", """
echo "$NODE" > "$FIFO"
[ "$NODE" = B ] && touch "$DIR/fail"
exec sleep 60
""")
        fail = os.path.join(self.dir, "fail")
        a = self.start(0, "A", "2", worker, "--health-check", "true")
        b = self.start(1, "B", "2", worker, "--health-check", f"test ! -e {fail}",
                       "--health-check-interval", "0.2")
        outs = h.finish(self, self.agents, 30)
        self.assertEqual(b.returncode, 4, outs[1][1])
        self.assertEqual(a.returncode, 5, outs[0][1])
        self.assertIn("more than --max-unhealthy-nodes 0 allows", outs[0][1])
        self.assertEqual(len(self.events("A", "unhealthy_budget_exceeded")), 1)

    def test_a_workers_exclusion_request_removes_its_node(self):
        # nnodes 1:2 (budget 1): B's worker asks to exclude B; A's workers
        # run until the job has shrunk to A alone, then finish.
        worker = script(self.dir, "worker.sh", """
if [ "$NODE" = B ]; then echo "NIC eth1 down" > "$CTRUN_EXCLUDE_NODE_FILE"; exec sleep 60; fi
[ "$WORLD_SIZE" = 1 ] && exit 0
exec sleep 60
""")
        conf = FAST.replace("last_call_timeout=1", "last_call_timeout=30")  # both nodes in round 0
        a = self.start(0, "A", "1:2", worker, conf=conf)
        b = self.start(1, "B", "1:2", worker, conf=conf)
        outs = h.finish(self, self.agents, 30)
        self.assertEqual(b.returncode, 4, outs[1][1])
        self.assertEqual(a.returncode, 0, outs[0][1])
        self.assertIn("a worker asked to exclude this node (CTRUN_EXCLUDE_NODE_FILE): NIC eth1 down", outs[1][1])
        [ev] = self.events("B", "node_unhealthy")
        self.assertEqual(ev["source"], "exclusion_request")


class ACheckThatLeavesAWriterTest(unittest.TestCase):
    """A check whose descendant leaves its process group (setsid) and writes
    to the check's output for ever, into a pipe it grew to 1 MiB: the
    group's SIGKILL misses it, and the pipe never runs dry. ctrun reads a
    bounded amount, decides, goes on, and closing the pipe ends the writer
    (EPIPE)."""

    WRITER = f"""#!{h.PYTHON}
import fcntl, os, sys
os.setsid()
try:
    fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 1 << 20)
except OSError:
    pass
with open(sys.argv[1], "w") as f:
    f.write(f"{{os.getpid()}}\\n")
chunk = b"y\\n" * 32768
while True:
    os.write(1, chunk)
"""

    def run_check(self, check_tail, expect_code):
        d = h.tempdir(self)
        pidfile = os.path.join(d, "writer.pid")
        ready = os.path.join(d, "ready")
        writer = os.path.join(d, "writer.py")
        with open(writer, "w") as f:
            f.write(self.WRITER)
        os.chmod(writer, stat.S_IRWXU)
        # The writer says its pid once it has its own session, and the check
        # ends only once it has written 4 MiB: the group's SIGKILL cannot
        # reach it, and it is writing when ctrun reads what is left.
        check = (f"mkfifo {ready}; {writer} {ready} & read pid < {ready}; echo $pid > {pidfile}; "
                 f"while [ $(sed -n 's/^wchar: //p' /proc/$pid/io) -lt 4194304 ]; do :; done; "
                 f"{check_tail}")
        worker = script(d, "worker.sh", "exit 0\n")
        p = h.start(["--standalone", "--nproc-per-node", "1", "--health-check", check,
                     "--no-python", worker])
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.addCleanup(self.kill_writer, pidfile)
        out, err = h.finish(self, [p], 60)[0]
        self.assertEqual(p.returncode, expect_code, err)
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertEqual(h.wait_gone([pid], 30), [], "the writer outlived its closed pipe")
        return err

    def kill_writer(self, pidfile):
        """Only the test's own writer (its command line is checked first)."""
        try:
            with open(pidfile) as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/cmdline") as f:
                if "writer.py" in f.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass

    def test_a_passing_check_still_lets_the_node_join(self):
        self.run_check("echo checking", 0)

    def test_a_failing_check_still_makes_the_node_leave(self):
        err = self.run_check("echo 'GPU 0: XID 79'; exit 1", 4)
        self.assertIn("node unhealthy", err)
        self.assertIn("exited with 1", err)


SMI_OUTPUT = """==============NVSMI LOG==============

GPU 00000000:07:00.0
    ECC Errors
        Volatile
            SRAM Correctable              : 4
            DRAM Uncorrectable            : 0
        Aggregate
            DRAM Uncorrectable            : 7
    Retired Pages
        Pending Page Blacklist            : No

GPU 00000000:08:00.0
    ECC Errors
        Volatile
            DRAM Uncorrectable            : {ecc}
    Remapped Rows
        Pending                           : {pending}
"""


class DefaultCheckScriptTest(unittest.TestCase):
    """scripts/health-check.sh, with a fake nvidia-smi first on PATH."""

    def run_check(self, ecc=0, pending="No", smi_output=None, **env):
        d = h.tempdir(self)
        if smi_output is None:
            smi_output = SMI_OUTPUT.format(ecc=ecc, pending=pending)
        script(d, "nvidia-smi", "cat <<'EOF'\n" + smi_output + "EOF\n")
        path = os.path.join(os.environ.get("CTRUN_SOURCE_DIR", os.path.join(h.HERE, "..", "..")),
                            "scripts", "health-check.sh")
        full = dict(os.environ, PATH=d + ":" + os.environ["PATH"], CTRUN_LOG_DIR=d)
        full.update(env)
        return subprocess.run(["/bin/sh", path], env=full, capture_output=True, text=True, timeout=30)

    def test_a_healthy_node_passes(self):
        r = self.run_check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("healthy", r.stdout)

    def test_volatile_uncorrectable_ecc_and_pending_remaps_fail_naming_the_gpu(self):
        r = self.run_check(ecc=2, pending="Yes")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("00000000:08:00.0: uncorrectable ECC errors since boot: DRAM Uncorrectable : 2", r.stdout)
        self.assertIn("00000000:08:00.0: Pending : Yes", r.stdout)
        self.assertNotIn("00000000:07:00.0", r.stdout)  # aggregate counts are history, not a fault

    # nvidia-smi -q as an H100 (driver 580.159.04) printed it, serial numbers
    # removed: the exact format the awk above must read.
    H100 = os.path.join(h.HERE, "fixtures", "nvidia-smi-q-h100.txt")

    def run_h100(self, *edits):
        with open(self.H100) as f:
            text = f.read()
        for old, new in edits:
            self.assertEqual(text.count(old), 1, old)
            text = text.replace(old, new)
        return self.run_check(smi_output=text)

    def test_a_real_h100_s_report_is_healthy(self):
        r = self.run_h100()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("healthy", r.stdout)

    def test_a_real_h100_s_report_with_faults_is_unhealthy(self):
        cases = [
            (("            DRAM Uncorrectable                         : 0\n        Aggregate",
              "            DRAM Uncorrectable                         : 3\n        Aggregate"),
             "00000000:00:06.0: uncorrectable ECC errors since boot: DRAM Uncorrectable : 3"),
            (("        Unrepairable Memory                            : No",
              "        Unrepairable Memory                            : Yes"),
             "00000000:00:06.0: Unrepairable Memory : Yes"),
            (("        Channel Repair Pending                         : No",
              "        Channel Repair Pending                         : Yes"),
             "00000000:00:06.0: Channel Repair Pending : Yes"),
            (("        Remapping Failure Occurred                     : No",
              "        Remapping Failure Occurred                     : Yes"),
             "00000000:00:06.0: Remapping Failure Occurred : Yes"),
        ]
        for edit, line in cases:
            with self.subTest(line=line):
                r = self.run_h100(edit)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(line, r.stdout)
                self.assertIn("nvidia-smi -q reports a GPU in an error state", r.stdout)
        # History is not a fault: aggregate counts since the GPU was made.
        r = self.run_h100(("            DRAM Uncorrectable                         : 0\n            SRAM Threshold",
                           "            DRAM Uncorrectable                         : 9\n            SRAM Threshold"))
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_the_free_space_floor_and_the_log_dir(self):
        r = self.run_check(CTRUN_HEALTH_MIN_FREE_MB="999999999999")
        self.assertEqual(r.returncode, 1)
        self.assertIn("below CTRUN_HEALTH_MIN_FREE_MB=999999999999", r.stdout)
        r = self.run_check(CTRUN_LOG_DIR="/nonexistent/ctrun")
        self.assertEqual(r.returncode, 1)
        self.assertIn("the log directory /nonexistent/ctrun is not writable", r.stdout)


if __name__ == "__main__":
    unittest.main()
