"""The verdict (`ctrun status --why`'s class of the root cause): one real
fault per case, made by a real worker (workers/fault.py: a signal it raises
itself, a real ENOSPC on /dev/full, a Python exception written to its error
file as @record writes it, a hang, an allocation a memory cgroup's limit
ends), a real ctrun agent and ctrund. Each case checks the class and the
rank three ways: `ctrun status --why --json`, the agent's last line on
stderr, and its `finished` event. The multi-node cases: a node killed is
node_lost; a segfault on one node of two ends both within 2 s with the same
verdict line (--kill-on-bad-exit). Waits on process exits and on the
server's answers, never sleeps."""
import json
import os
import signal
import subprocess
import time
import unittest

import harness as h

CONF = "is_host=0,last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60"


def why_json(daemon, run_id):
    r = subprocess.run([h.ctrun_bin(), "status", "--why", "--json", "--rdzv-endpoint", daemon.endpoint,
                        "--rdzv-id", run_id], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def finished_event(path):
    with open(path) as f:
        events = [json.loads(line) for line in f]
    assert events[-1]["event"] == "finished", events[-1]
    return events[-1]


class MemoryCgroup:
    """A child of this process's cgroup v1 memory controller with a limit;
    None where cgroups are not ours to make (the OOM case is then skipped)."""

    @staticmethod
    def make(limit_bytes):
        try:
            with open("/proc/self/cgroup") as f:
                line = [x for x in f.read().splitlines() if x.split(":")[1] == "memory"][0]
            path = f"/sys/fs/cgroup/memory{line.split(':', 2)[2]}/ctrun-verdict-{os.getpid()}"
            os.mkdir(path)
            with open(f"{path}/memory.limit_in_bytes", "w") as f:
                f.write(str(limit_bytes))
            if os.path.exists(f"{path}/memory.memsw.limit_in_bytes"):
                with open(f"{path}/memory.memsw.limit_in_bytes", "w") as f:
                    f.write(str(limit_bytes))
            return path
        except (OSError, IndexError):
            return None


class VerdictTest(unittest.TestCase):
    def setUp(self):
        self.dir = h.tempdir(self)
        self.daemon = h.Ctrund(self)

    def run_fault(self, run_id, fault, *extra, delay="0.3", rank="1", wrap=(), expect_code=1):
        """One node of 2 workers; global rank `rank` makes `fault` after
        `delay` s. Returns (status --why --json's verdict, the agent's
        stderr, its finished event)."""
        events = os.path.join(self.dir, f"{run_id}.jsonl")
        argv = [h.ctrun_bin(), "--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", self.daemon.endpoint, "--rdzv-id", run_id, "--rdzv-conf", CONF,
                "--max-restarts", "0", "--events-file", events, *extra,
                h.worker("fault.py"), fault, delay, rank]
        r = subprocess.run([*wrap, *argv], capture_output=True, text=True, timeout=60, env=h.base_env())
        self.assertEqual(r.returncode, expect_code, r.stderr[-3000:])
        verdict = why_json(self.daemon, run_id)["verdict"]
        last = r.stderr.strip().splitlines()[-1]
        self.assertEqual(last, "[ctrun] error: " + verdict["line"], r.stderr[-3000:])
        ev = finished_event(events)
        self.assertEqual((ev["cause_class"], ev["cause_rank"], ev["verdict"]),
                         (verdict["cause_class"], verdict["cause_rank"], verdict["line"]))
        return verdict, r.stderr, ev

    def check(self, run_id, fault, cls, *extra, rank=1, **kw):
        verdict, stderr, _ = self.run_fault(run_id, fault, *extra, rank=str(rank), **kw)
        self.assertEqual(verdict["cause_class"], cls, verdict)
        self.assertEqual(verdict["cause_rank"], rank, verdict)
        self.assertRegex(verdict["line"], rf"^verdict: rank {rank} on \S+ ")
        return verdict, stderr

    def test_signals(self):
        for fault, cls, text in [("segfault", "segfault", "crashed with a segmentation fault (SIGSEGV)"),
                                 ("abort", "abort", "aborted (SIGABRT)"),
                                 ("bus_error", "bus_error", "crashed with a bus error (SIGBUS)"),
                                 ("illegal_instruction", "illegal_instruction", "crashed on an illegal instruction"),
                                 ("arithmetic_error", "arithmetic_error", "crashed on an arithmetic error"),
                                 ("killed", "killed_by_signal", "was killed by SIGKILL")]:
            with self.subTest(fault=fault):
                verdict, _ = self.check(f"sig-{fault}", fault, cls)
                self.assertIn(text, verdict["evidence"])
                # Rank 0 was stopped by its agent: a consequence.
                self.assertTrue(verdict["line"].endswith("; 1 other rank failed after it (stopped by its agent)"),
                                verdict["line"])

    def test_python_exceptions_by_their_most_specific_class(self):
        for fault, cls in [("exception", "python_exception"), ("cuda_oom", "cuda_oom"),
                           ("nccl_error", "nccl_error"), ("disk_full", "disk_full"),
                           ("file_not_found", "file_not_found"), ("import_error", "import_error"),
                           ("nan", "nan_or_inf")]:
            with self.subTest(fault=fault):
                self.check(f"py-{fault}", fault, cls)

    def test_no_error_file_and_no_text_is_unknown_with_what_was_seen(self):
        verdict, _ = self.check("unknown", "exit", "unknown")
        self.assertIn("exited with code 3; no error file and no stderr line", verdict["evidence"])
        # The same exception with no error file: its stderr, kept under --tee 2.
        self.check("stock", "exception", "python_exception", "--tee", "2", "--redirects", "0")

    def test_a_hung_worker_is_named_with_its_frame(self):
        verdict, _ = self.check("hang", "hang", "hang", "--heartbeat-timeout", "1")
        self.assertIn("hung (no heartbeat or step in time)", verdict["evidence"])

    def test_an_oom_kill_is_told_from_another_sigkill(self):
        cgroup = MemoryCgroup.make(256 << 20)
        if cgroup is None:
            self.skipTest("no memory cgroup of ours to limit here (cgroup v1 memory controller not writable)")
        self.addCleanup(lambda: os.path.isdir(cgroup) and os.rmdir(cgroup))
        wrap = ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh"]
        verdict, _ = self.check("oom", "oom", "oom_killed", wrap=wrap)
        self.assertRegex(verdict["evidence"], r"^was killed by the kernel's OOM killer \(oom_kill \d+->\d+ in its "
                                              r"cgroup, peak RSS \d+ MiB\)$")

    def test_an_unhealthy_node(self):
        # The check passes before the join and once while the workers run,
        # then fails: the node leaves the running job as unhealthy.
        check = os.path.join(self.dir, "check.sh")
        with open(check, "w") as f:
            f.write(f"#!/bin/sh\nn=$(cat {self.dir}/count 2>/dev/null || echo 0)\necho $((n + 1)) > {self.dir}/count\n"
                    f"[ $n -lt 2 ] || {{ echo 'GPU 3: Xid 79'; exit 1; }}\n")
        os.chmod(check, 0o755)
        r = subprocess.run([h.ctrun_bin(), "--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                            "--rdzv-endpoint", self.daemon.endpoint, "--rdzv-id", "unhealthy", "--rdzv-conf", CONF,
                            "--health-check", check, "--health-check-interval", "0.2",
                            h.worker("fault.py"), "hang", "3600", "9"],
                           capture_output=True, text=True, timeout=60, env=h.base_env())
        self.assertEqual(r.returncode, 4, r.stderr)
        verdict = why_json(self.daemon, "unhealthy")["verdict"]
        self.assertEqual((verdict["cause_class"], verdict["cause_rank"]), ("unhealthy_node", None), verdict)
        self.assertRegex(verdict["line"], r"^verdict: node \S+ failed its health check")

    def test_a_node_killed_is_lost(self):
        procs = []
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for addr in ("127.0.0.1", "127.0.0.2"):
            procs.append(h.start(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                                  "--rdzv-endpoint", self.daemon.endpoint, "--rdzv-id", "lost",
                                  "--local-addr", addr, "--rdzv-conf", CONF, "--max-restarts", "0",
                                  h.worker("fault.py"), "hang", "3600", "9"]))
        self.wait_for(lambda: json.loads(self.status_json("lost"))["runs"][0]["state"] == "running")
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait(timeout=20)
        verdict = self.wait_for(lambda: (why_json(self.daemon, "lost") or {}).get("verdict"))
        self.assertEqual((verdict["cause_class"], verdict["cause_rank"]), ("node_lost", None), verdict)
        self.assertRegex(verdict["line"], r"^verdict: node 127\.0\.0\.2 was lost: ")
        procs[0].send_signal(signal.SIGTERM)
        procs[0].communicate(timeout=60)

    def status_json(self, run_id):
        r = subprocess.run([h.ctrun_bin(), "status", "--json", "--rdzv-endpoint", self.daemon.endpoint,
                            "--rdzv-id", run_id], capture_output=True, text=True, timeout=20)
        return r.stdout if r.returncode == 0 else '{"runs": [{"state": "none"}]}'

    def wait_for(self, condition, timeout=30):
        """Asks the server until `condition` holds (bounded): what it says,
        not a sleep, decides."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.1)
        self.fail("the server never said so")


class KillOnBadExitTest(unittest.TestCase):
    def test_a_segfault_on_one_node_ends_both_within_2_s_with_the_same_verdict(self):
        daemon = h.Ctrund(self)
        d = h.tempdir(self)
        procs = []
        self.addCleanup(lambda: [p.kill() for p in procs if p.poll() is None])
        for addr in ("127.0.0.1", "127.0.0.2"):
            # Rank 3 (node 2's local rank 1) segfaults 1.5 s in; the other
            # ranks would run for an hour.
            procs.append(h.start(["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                  "--rdzv-endpoint", daemon.endpoint, "--rdzv-id", "kill", "--local-addr", addr,
                                  "--node-rank", str(len(procs)), "--rdzv-conf", CONF, "--max-restarts", "0",
                                  "--events-file", f"{d}/events-{len(procs)}.jsonl",
                                  h.worker("fault.py"), "segfault", "1.5", "3"]))
        outs = h.finish(self, procs, 60)
        for p, (_, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 1, err[-3000:])
        lines = [err.strip().splitlines()[-1] for _, err in outs]
        self.assertEqual(lines[0], lines[1], "\n\n".join(err[-3000:] for _, err in outs))
        self.assertRegex(lines[0], r"^\[ctrun\] error: verdict: rank 3 on \S+ crashed with a segmentation fault "
                                   r"\(SIGSEGV\)")
        self.assertIn("another node failed for good and closed the run", outs[0][1])
        # Both nodes ended within 2 s of the segfault: the events' times
        # (one host, one clock).
        with open(f"{d}/events-1.jsonl") as f:
            segv = [json.loads(x) for x in f if '"SIGSEGV"' in x][0]["ts"]
        for i in range(2):
            self.assertLessEqual(finished_event(f"{d}/events-{i}.jsonl")["ts"] - segv, 2.0)


if __name__ == "__main__":
    unittest.main()
