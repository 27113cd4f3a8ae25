"""ctrund's status page in a real browser (issue 21, part 3): Debian's
headless chromium loads http://HOST:PORT/ during a two-node run with one
restart; the rendered DOM must show both nodes and the restart. Also
GET /api/runs as a script reads it, and 404/405 on the page's port.

CTRUN_STATUS_DOCS=DIR also copies the screenshot (status-page.png) and the
JSON the page showed (api-runs.json) there: how docs/img/status-page.png and
the example in docs/metrics.md are made. Otherwise they stay in a temp dir."""
import html.parser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import unittest
import urllib.error
import urllib.request

import harness as h

FAST = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60,is_host=0"
BROWSER_TIMEOUT = 90  # seconds for one chromium run; it takes a few


def chromium(test, url, *args):
    """Runs headless chromium on `url` with a throwaway profile; returns its
    stdout. The whole process group is killed if it outlives BROWSER_TIMEOUT."""
    profile = h.tempdir(test)
    # --no-sandbox: chromium refuses to run as root with its sandbox (CI runs as root).
    cmd = [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
           "--virtual-time-budget=5000", *args, url]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        test.fail(f"chromium did not finish within {BROWSER_TIMEOUT} s: {' '.join(cmd)}")
    test.assertEqual(p.returncode, 0, err[-2000:])
    return out


class Rows(html.parser.HTMLParser):
    """Every <tr> of the DOM: its attributes and the text of its cells."""

    def __init__(self):
        super().__init__()
        self.rows, self.row, self.cell = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.row = {"attrs": dict(attrs), "cells": []}
        elif tag == "td" and self.row is not None:
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self.row is not None and self.cell is not None:
            self.row["cells"].append(self.cell.strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.rows.append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def of_class(self, cls):
        return [r for r in self.rows if r["attrs"].get("class") == cls]


def http(url, method="GET"):
    """(status, headers, body) of one request; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


class StatusPageTest(unittest.TestCase):
    def setUp(self):
        if shutil.which("chromium") is None:
            self.fail("needs Debian's chromium (scripts/install-deps.sh installs it)")
        ctrund = h.Ctrund(self)
        self.daemon = ctrund.proc
        self.endpoint, self.page = ctrund.endpoint, ctrund.page

    def test_page_in_a_browser_through_a_restart(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        env = h.base_env(ANNOUNCE=fifo.path, GATES=d)
        agents = [h.start(["--nnodes", "2", "--nproc-per-node", "1", "--max-restarts", "1",
                           "--rdzv-backend", "c10d", "--rdzv-endpoint", self.endpoint, "--rdzv-id", "web",
                           "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", FAST,
                           "--no-python", h.worker("gated.sh")], env=env) for i in range(2)]
        for p in agents:
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        h.fifo_lines(self, fifo, 2, 60, agents)  # round 0 runs
        # Group rank 1's worker fails once: the round breaks (workers_failed), round 1 runs.
        open(os.path.join(d, "fail"), "w").close()
        h.fifo_lines(self, fifo, 2, 60, agents)

        # The JSON, as a script reads it.
        status, headers, body = http(self.page + "api/runs")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "application/json; charset=utf-8")
        doc = json.loads(body)
        self.assertEqual(doc["version"], 1)
        [run] = doc["runs"]
        self.assertEqual((run["run_id"], run["state"], run["round"], run["world_size"]), ("web", "running", 1, 2))
        self.assertEqual([(n["state"], n["group_rank"], n["workers"], n["addr"]) for n in run["nodes"]],
                         [("member", 0, 1, "127.0.0.1"), ("member", 1, 1, "127.0.0.2")])
        for n in run["nodes"]:
            self.assertGreaterEqual(n["last_keep_alive_s"], 0)
            self.assertIsNone(n["health"])
        self.assertEqual([(r["round"], r["end"]) for r in run["rounds"]], [(0, "restarted"), (1, "running")])
        self.assertEqual(run["restarts_total"], 1)
        [restart] = run["restarts"]
        self.assertEqual((restart["round"], restart["cause"]), (0, "workers_failed"))
        rank1 = run["nodes"][1]["node"]
        self.assertTrue(restart["node"].startswith("127.0.0.2#"), restart)
        self.assertEqual(restart["nodes"], [run["nodes"][0]["node"]])

        # The page, rendered by a real browser after its first poll.
        rows = Rows()
        rows.feed(chromium(self, self.page, "--dump-dom"))
        nodes = rows.of_class("node")
        self.assertEqual([(r["attrs"]["data-state"], r["cells"][0], r["cells"][2], r["cells"][4]) for r in nodes],
                         [("member", "0", run["nodes"][0]["node"], "127.0.0.1"),
                          ("member", "1", rank1, "127.0.0.2")], rows.rows)
        for r in nodes:
            self.assertRegex(r["cells"][5], r"^\d+\.\d s ago$")
            self.assertEqual(r["cells"][6:], ["—", "—"])  # health, step time: not measured yet
        restarts = rows.of_class("restart")
        self.assertEqual([(r["attrs"]["data-cause"], r["cells"][0], r["cells"][1], r["cells"][2]) for r in restarts],
                         [("workers_failed", "0", "workers_failed", restart["node"])])
        self.assertEqual([r["attrs"]["data-round"] for r in rows.of_class("round")], ["1", "0"])

        shots = h.tempdir(self)
        shot = os.path.join(shots, "status-page.png")
        chromium(self, self.page, f"--screenshot={shot}", "--window-size=1100,520", "--hide-scrollbars")
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        docs = os.environ.get("CTRUN_STATUS_DOCS")
        if docs:
            shutil.copyfile(shot, os.path.join(docs, "status-page.png"))
            with open(os.path.join(docs, "api-runs.json"), "w") as f:
                f.write(body)

        open(os.path.join(d, "done"), "w").close()
        for p, (_, err) in zip(agents, h.finish(self, agents, 60)):
            self.assertEqual(p.returncode, 0, err)
        run = json.loads(http(self.page + "api/runs")[2])["runs"][0]
        self.assertEqual(run["state"], "closed")
        self.assertEqual(run["rounds"][-1]["end"], "closed")

    def test_bad_path_and_method(self):
        for path in ("", "api/runs", "metrics"):
            self.assertEqual(http(self.page + path, "POST")[0], 405, path)
            self.assertEqual(http(self.page + path, "DELETE")[0], 405, path)
        for path in ("index.html", "api/run", "api/runs/x", "status"):
            status, _, body = http(self.page + path)
            self.assertEqual(status, 404, path)
            self.assertIn("the status page is at /", body)
        status, headers, body = http(self.page)
        self.assertEqual(status, 200)
        self.assertIn("default-src 'none'", headers["Content-Security-Policy"])
        self.assertTrue(body.startswith("<!DOCTYPE html>"))
        self.assertEqual(json.loads(http(self.page + "api/runs")[2]), {"version": 1, "runs": []})
        # A request head over 8 KiB is dropped without an answer, and the server keeps serving.
        host, port = re.match(r"http://([^:/]+):(\d+)/", self.page).groups()
        with socket.create_connection((host, int(port)), timeout=10) as c:
            answer = b""
            try:
                c.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"x" * 9000 + b"\r\n\r\n")
                while chunk := c.recv(4096):
                    answer += chunk
            except (ConnectionResetError, BrokenPipeError):  # closed while we still sent
                pass
            self.assertEqual(answer, b"")
        self.assertEqual(http(self.page + "api/runs")[0], 200)
        self.assertIsNone(self.daemon.poll())


class AgentHostedPageTest(unittest.TestCase):
    """--rdzv-conf metrics_port=0 on the agent that hosts the rendezvous: the
    same page and JSON, served by ctrun itself (no ctrund, no browser)."""

    def test_hosting_agent_serves_the_page(self):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        env = h.base_env(ANNOUNCE=fifo.path, GATES=d)
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        fast = FAST.replace(",is_host=0", "")
        confs = [fast + ",is_host=1,metrics_port=0", fast + ",is_host=0,metrics_port=0"]
        agents = [h.start(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                           "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "agentweb",
                           "--local-addr", f"127.0.0.{i + 1}", "--rdzv-conf", confs[i],
                           "--no-python", h.worker("gated.sh")], env=env) for i in range(2)]
        for p in agents:
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        line = re.compile(r"serving the status page on (http://127\.0\.0\.1:\d+/)\n")
        err0 = ""
        try:
            while not line.search(err0):
                err0 += h.read_until(agents[0].stderr, "\n", 60)
        except TimeoutError as e:
            h.fail_with_tails(self, agents, str(e))
        page = line.search(err0).group(1)
        h.fifo_lines(self, fifo, 2, 60, agents)  # both workers run, waiting on the gate

        status, headers, body = http(page + "api/runs")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "application/json; charset=utf-8")
        [run] = json.loads(body)["runs"]
        self.assertEqual((run["run_id"], run["state"], run["world_size"]), ("agentweb", "running", 2))
        self.assertEqual([(n["state"], n["group_rank"], n["addr"]) for n in run["nodes"]],
                         [("member", 0, "127.0.0.1"), ("member", 1, "127.0.0.2")])
        status, headers, body = http(page)
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"), headers["Content-Type"])
        self.assertTrue(body.startswith("<!DOCTYPE html>"))
        status, _, body = http(page + "metrics")
        self.assertEqual(status, 200)
        self.assertIn("ctrun_", body)
        status, _, body = http(page + "nope")
        self.assertEqual(status, 404)
        self.assertIn("the status page is at /", body)

        open(os.path.join(d, "done"), "w").close()
        outs = h.finish(self, agents, 60)
        for p, (_, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, err)
        # Only the hosting agent serves it: the joining one ignores the key.
        self.assertNotIn("serving the status page", outs[1][1])


if __name__ == "__main__":
    unittest.main()
