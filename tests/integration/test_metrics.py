"""ctrund --metrics-port scraped with curl, and `ctrun status`, through a
two-node run with one failure and restart (issue 13, part 2); the Grafana
dashboard in docs/grafana/ queries only series of that real scrape (issue 21)."""
import json
import os
import re
import shutil
import subprocess
import unittest

import harness as h

FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60,is_host=0"


def sample(text, series):
    """The value of one sample line `series` (name{labels}) in Prometheus text."""
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    if not m:
        raise AssertionError(f"no sample {series} in:\n{text}")
    return float(m.group(1))


def samples(text):
    """{series name: set of label names} of every sample line in Prometheus text."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$", line)
        if m:
            out.setdefault(m.group(1), set()).update(re.findall(r'([a-zA-Z_]\w*)="', m.group(2) or ""))
    return out


def dashboard_queries():
    """Every PromQL expression of docs/grafana/ctrun.json (panel targets and template queries)."""
    path = os.path.join(os.environ.get("CTRUN_SOURCE_DIR", os.path.join(h.HERE, "..", "..")),
                        "docs", "grafana", "ctrun.json")
    with open(path) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dash["templating"]["list"] if v.get("definition")]
    return exprs


class MetricsTest(unittest.TestCase):
    def check_dashboard(self, text):
        """Every ctrun_* series the dashboard queries, with every label it
        matches or groups by, is in the scrape `text`."""
        have = samples(text)
        exprs = dashboard_queries()
        self.assertGreater(len(exprs), 5)
        for expr in exprs:
            for name, matchers in re.findall(r"\b(ctrun_\w+)(\{[^}]*\})?", expr):
                self.assertIn(name, have, f"dashboard query {expr!r}: no series {name} in the scrape")
                for label in re.findall(r"(\w+)\s*=~?", matchers):
                    self.assertIn(label, have[name], f"dashboard query {expr!r}: {name} has no label {label}")
            for group in re.findall(r"by \(([^)]*)\)", expr):
                series = re.findall(r"\b(ctrun_\w+)", expr)
                for label in (x.strip() for x in group.split(",")):
                    self.assertTrue(all(label in have[n] for n in series),
                                    f"dashboard query {expr!r}: not every series has label {label}")
            if "label_values(" in expr:
                name, label = re.search(r"label_values\((\w+),\s*(\w+)\)", expr).groups()
                self.assertIn(label, have[name], expr)

    def setUp(self):
        if shutil.which("curl") is None:
            self.skipTest("needs curl")
        self.ctrund = h.Ctrund(self)
        self.daemon = self.ctrund.proc
        self.endpoint, self.metrics_url = self.ctrund.endpoint, self.ctrund.metrics

    def scrape(self):
        r = subprocess.run(["curl", "-sS", "--fail", "--max-time", "10", "-D", "-", self.metrics_url],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Content-Type: text/plain; version=0.0.4", r.stdout)
        return r.stdout

    def status(self, run_id="m1"):
        """`ctrun status` of `run_id` (None: no --rdzv-id, the server's only run)."""
        named = [] if run_id is None else ["--rdzv-id", run_id]
        return h.run(["status", "--rdzv-endpoint", self.endpoint, *named], timeout=30,
                     env=h.base_env(PET_RDZV_ID=None))

    def test_scrape_and_status_through_a_restart(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        env = h.base_env(ANNOUNCE=fifo.path, GATES=d)
        agents = [h.start(["--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1",
                           "--rdzv-backend", "c10d", "--rdzv-endpoint", self.endpoint, "--rdzv-id", "m1",
                           "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", FAST,
                           "--no-python", h.worker("gated.sh")], env=env) for i in range(2)]
        for p in agents:
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())

        # Round 0 runs: both workers announced.
        first = h.fifo_lines(self, fifo, 2, 60, agents)
        self.assertEqual(sorted(line.split()[1] for line in first), ["0", "1"])
        text = self.scrape()
        self.assertEqual(sample(text, 'ctrun_runs'), 1)
        self.assertEqual(sample(text, 'ctrun_rounds_total{run_id="m1"}'), 1)
        self.assertEqual(sample(text, 'ctrun_nodes{run_id="m1",state="member"}'), 2)
        self.assertEqual(sample(text, 'ctrun_world_size{run_id="m1"}'), 2)
        self.assertEqual(sample(text, 'ctrun_join_latency_seconds_count{run_id="m1"}'), 2)
        self.assertEqual(sample(text, 'ctrun_join_latency_seconds_bucket{run_id="m1",le="+Inf"}'), 2)
        self.assertEqual(sample(text, 'ctrun_restarts_total{run_id="m1",cause="node_left"}'), 0)
        r = self.status()
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^run 'm1' on 127\.0\.0\.1:\d+: round 0, running, world size 2; nodes 2\.\.2, 2 live$")
        self.assertEqual(lines[1].split(), ["RANK", "STATE", "NODE", "WORKERS", "ADDR", "LAST", "KEEP-ALIVE"])
        for rank, line in enumerate(lines[2:]):
            self.assertRegex(line, rf"^{rank}\s+member\s+127\.0\.0\.{rank + 1}#\d+\s+1\s+127\.0\.0\.{rank + 1}\s+\d+\.\d s ago$")
        self.assertEqual(len(lines), 4, r.stdout)
        # No --rdzv-id: the server serves one run, and that is the run shown.
        only = self.status(None)
        self.assertEqual(only.returncode, 0, only.stderr)
        self.assertEqual(only.stdout.splitlines()[0], lines[0])

        # Group rank 1's worker fails: its node restarts, the round breaks (workers_failed), round 1 runs.
        open(os.path.join(d, "fail"), "w").close()
        second = h.fifo_lines(self, fifo, 2, 60, agents)
        self.assertEqual(sorted(line.split()[1] for line in second), ["0", "1"])
        text = self.scrape()
        self.assertEqual(sample(text, 'ctrun_rounds_total{run_id="m1"}'), 2)
        self.assertEqual(sample(text, 'ctrun_round{run_id="m1"}'), 1)
        self.assertEqual(sample(text, 'ctrun_restarts_total{run_id="m1",cause="workers_failed"}'), 1)
        self.assertEqual(sample(text, 'ctrun_restarts_total{run_id="m1",cause="node_left"}'), 0)
        self.assertEqual(sample(text, 'ctrun_restarts_total{run_id="m1",cause="node_lost"}'), 0)
        self.assertEqual(sample(text, 'ctrun_join_latency_seconds_count{run_id="m1"}'), 4)
        self.assertIn("round 1, running", self.status().stdout)
        self.check_dashboard(text)

        open(os.path.join(d, "done"), "w").close()
        errs = []
        for p, (_, err) in zip(agents, h.finish(self, agents, 60)):
            self.assertEqual(p.returncode, 0, err)
            errs.append(err)
        # The other node names the failed one, and says it did not leave.
        self.assertRegex("".join(errs), r"workers failed on node 127\.0\.0\.\d#\d+; restarting the worker group")
        self.assertNotIn("left the round", "".join(errs))
        self.assertEqual(sample(self.scrape(), 'ctrun_closed{run_id="m1"}'), 1)
        r = self.status()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("round 1, closed", r.stdout)

    def test_unknown_run_and_bad_requests(self):
        r = self.status("nope")
        self.assertEqual(r.returncode, 1)
        # A query gets no launch advice ("give every node the same --rdzv-id").
        self.assertRegex(r.stderr, r"^ctrun status: rendezvous at 127\.0\.0\.1:\d+: run 'nope' is not served here "
                                   r"\(serving no run yet; [^)]*\)\n$")
        r = self.status(None)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^ctrun status: rendezvous at 127\.0\.0\.1:\d+: this server serves no run yet\n$")
        r = h.run(["status", "--nnodes", "2"], timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("it takes only --rdzv-endpoint, --rdzv-id, --rdzv-conf, --why and --json", r.stderr)
        base = self.metrics_url.rsplit("/", 1)[0]
        for args, code in ((["-X", "POST", self.metrics_url], "405"), ([base + "/other"], "404")):
            r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", *args],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.stdout, code, r.stderr)
        self.assertEqual(sample(self.scrape(), "ctrun_runs"), 0)
        self.assertIsNone(self.daemon.poll())


if __name__ == "__main__":
    unittest.main()
