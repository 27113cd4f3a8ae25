"""--share-logs and `ctrun logs` with real ctrun agents, a real ctrund and
real workers on the loopback: 3 nodes x 2 ranks print interleaved numbered
lines while `ctrun logs --follow` (started before the lines) shows each
exactly once, labelled node/rank, in order per rank and stream; without --share-logs
the server has nothing; a wrong token sees nothing; --dedup-logs collapses
6 identical console lines into one and keeps 6 different ones, while the
shared log keeps every rank's copy. Every wait is on an event with a
deadline."""
import os
import re
import select
import subprocess
import unittest

import harness as h

LINES = 40
LINE = re.compile(r"^(\S+)/(\d+): line (\d+) (\d+)$")


def logs_cmd(endpoint, run_id, *extra):
    return [h.ctrun_bin(), "logs", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, *extra]


def agent_args(endpoint, run_id, nnodes, nproc, *extra):
    return ["--nnodes", str(nnodes), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--monitor-interval", "0.05", *extra]


class ShareLogsTest(unittest.TestCase):
    def run_job(self, endpoint, run_id, nnodes, nproc, extra=(), env=None, follow_env=None):
        """Runs `nnodes` agents of print_lines.py; once every worker is
        ready, starts `ctrun logs --follow` (when follow_env is given) and
        lets the workers print; with a follower, the workers end only once
        it showed a line (it is attached, however slow its start: the run
        is forgotten a second after it closes). Returns (agents' outputs,
        follower, the follower's first line or None)."""
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        go = os.path.join(d, "go.fifo")
        os.mkfifo(go)
        go_fd = os.open(go, os.O_RDWR | os.O_NONBLOCK)  # held: the workers' opens never block
        self.addCleanup(os.close, go_fd)
        done = os.path.join(d, "done.fifo")
        os.mkfifo(done)
        done_fd = os.open(done, os.O_RDWR | os.O_NONBLOCK)
        self.addCleanup(os.close, done_fd)
        env = dict(env or h.base_env(), ANNOUNCE=fifo.path, GO=go, LINES=str(LINES))
        if follow_env is not None:
            env["DONE"] = done
        agents = [h.start(agent_args(endpoint, run_id, nnodes, nproc, *extra, h.worker("print_lines.py")), env=env)
                  for _ in range(nnodes)]
        self.addCleanup(lambda: [p.kill() for p in agents if p.poll() is None])
        ready = h.fifo_lines(self, fifo, nnodes * nproc, 90, agents)
        self.assertEqual(sorted(ready), sorted(f"ready {r}" for r in range(nnodes * nproc)))
        follower = None
        if follow_env is not None:
            follower = subprocess.Popen(logs_cmd(endpoint, run_id, "--follow"), env=follow_env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.addCleanup(lambda: follower.poll() is None and follower.kill())
        os.write(go_fd, b"g" * (nnodes * nproc))
        first = None
        if follower is not None:
            # Raw reads (not the pipe's buffered reader, which communicate() bypasses).
            fd, got = follower.stdout.fileno(), b""
            while b"\n" not in got:
                ready_to_read, _, _ = select.select([fd], [], [], 60)
                chunk = os.read(fd, 4096) if ready_to_read else b""
                self.assertTrue(chunk, f"ctrun logs --follow showed no whole line within 60 s (got {got!r})")
                got += chunk
            first = got.decode()
            os.write(done_fd, b"d" * (nnodes * nproc))
        outs = h.finish(self, agents, 90)
        for p, (_, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, err)
        return outs, follower, first

    def check_every_line_once(self, text, ranks):
        per_rank = {r: [] for r in range(ranks)}
        labels = set()
        for line in text.splitlines():
            m = LINE.match(line)
            self.assertIsNotNone(m, f"unexpected line {line!r}")
            node, rank, printed_rank, i = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
            self.assertEqual(rank, printed_rank, line)
            labels.add(node)
            per_rank[rank].append(i)
        for r in range(ranks):
            # Each of a rank's streams is read from its own pipe: stdout's
            # lines keep their order, stderr's (every fifth) theirs.
            self.assertEqual(sorted(per_rank[r]), list(range(LINES)), f"rank {r}: each line exactly once")
            for on_stderr in (False, True):
                mine = [i for i in per_rank[r] if (i % 5 == 4) == on_stderr]
                self.assertEqual(mine, sorted(mine), f"rank {r}'s {'stderr' if on_stderr else 'stdout'} in order")
        return labels

    def test_follow_shows_every_line_of_three_nodes_once_in_order(self):
        d = h.Ctrund(self, "--closed-run-ttl", "1")
        env = h.base_env(CTRUN_RDZV_TOKEN=None)
        outs, follower, first = self.run_job(d.endpoint, "shared", 3, 2, ["--share-logs"], env=env,
                                             follow_env=env)
        # The run closed with the job; ctrund forgets it a second later and
        # the follower's stream ends then.
        try:
            out, err = follower.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            follower.kill()
            out, err = follower.communicate()
            self.fail(f"ctrun logs --follow did not end after the run was forgotten; stderr: {err}")
        self.assertEqual(follower.returncode, 0, err)
        self.assertNotIn("dropped", err)
        labels = self.check_every_line_once(first + out, 6)
        # Every agent is on this host: their labels differ by their pids.
        self.assertEqual(len(labels), 3, labels)
        self.assertEqual(len({label.partition("#")[0] for label in labels}), 1, labels)
        # The agents' own consoles are as without --share-logs.
        console = "".join(o + e for o, e in outs)
        for r in range(6):
            self.assertIn(f"line {r} {LINES - 1}\n", console)

    def test_rank_filter_and_no_follow(self):
        d = h.Ctrund(self)
        env = h.base_env(CTRUN_RDZV_TOKEN=None)
        self.run_job(d.endpoint, "filtered", 1, 2, ["--share-logs"], env=env)
        r = subprocess.run(logs_cmd(d.endpoint, "filtered", "--rank", "1"), env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([LINE.match(x).group(2) for x in r.stdout.splitlines()], ["1"] * LINES)
        # No --rdzv-id: the server's only run.
        only = subprocess.run([h.ctrun_bin(), "logs", "--rdzv-endpoint", d.endpoint, "--rank", "1"],
                              env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(only.returncode, 0, only.stderr)
        self.assertEqual(only.stdout, r.stdout)

    def test_without_share_logs_nothing_leaves_the_node(self):
        d = h.Ctrund(self)
        env = h.base_env(CTRUN_RDZV_TOKEN=None)
        self.run_job(d.endpoint, "private", 3, 2, env=env)
        r = subprocess.run(logs_cmd(d.endpoint, "private"), env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)  # the run is there ...
        self.assertEqual(r.stdout, "")               # ... and no line of it

    def test_a_wrong_token_sees_nothing(self):
        d = h.tempdir(self)
        token_file = os.path.join(d, "token")
        with open(token_file, "w") as f:
            f.write("right-token\n")
        daemon = h.Ctrund(self, "--token-file", token_file)
        right = h.base_env(CTRUN_RDZV_TOKEN="right-token")
        self.run_job(daemon.endpoint, "secret", 1, 2, ["--share-logs"], env=right)
        wrong = subprocess.run(logs_cmd(daemon.endpoint, "secret"), env=h.base_env(CTRUN_RDZV_TOKEN="wrong"),
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(wrong.returncode, 1, wrong.stderr)
        self.assertEqual(wrong.stdout, "")
        self.assertIn("token", wrong.stderr)
        self.assertEqual(len(wrong.stderr.strip().splitlines()), 1, wrong.stderr)
        ok = subprocess.run(logs_cmd(daemon.endpoint, "secret"), env=right, capture_output=True, text=True,
                            timeout=30)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.check_every_line_once(ok.stdout, 2)

    def test_unknown_run_and_unreachable_server_exit_1_bad_flag_2(self):
        d = h.Ctrund(self)
        env = h.base_env(CTRUN_RDZV_TOKEN=None)
        r = subprocess.run(logs_cmd(d.endpoint, "nosuch"), env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("nosuch", r.stderr)
        r = subprocess.run(logs_cmd(d.endpoint, "x", "--rank", "-1"), env=env, capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--rank", r.stderr)
        d.stop()
        r = subprocess.run(logs_cmd(d.endpoint, "x"), env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("unreachable", r.stderr)

    def test_dedup_logs_collapses_six_identical_lines_and_keeps_six_different(self):
        daemon = h.Ctrund(self)
        d = h.tempdir(self)
        env = h.base_env(CTRUN_RDZV_TOKEN=None, CTRUN_DEDUP_WINDOW_MS=600000)
        script = 'echo same line; echo "rank $RANK"'
        r = h.run(agent_args(daemon.endpoint, "dedup", 1, 6, "--dedup-logs", "--share-logs", "--tee", "1",
                             "--log-dir", os.path.join(d, "logs"), "--no-python", "/bin/sh", "-c", script), env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines.count("[ranks 0-5]: same line"), 1, r.stdout)
        for rank in range(6):
            self.assertEqual(lines.count(f"[default{rank}]:rank {rank}"), 1, r.stdout)
        # The shared log keeps every rank's copy.
        shared = subprocess.run(logs_cmd(daemon.endpoint, "dedup"), env=env, capture_output=True, text=True,
                                timeout=30)
        self.assertEqual(shared.returncode, 0, shared.stderr)
        texts = [line.split(": ", 1)[1] for line in shared.stdout.splitlines()]
        self.assertEqual(texts.count("same line"), 6, shared.stdout)
        self.assertEqual(sorted(t for t in texts if t.startswith("rank")), [f"rank {r}" for r in range(6)])


if __name__ == "__main__":
    unittest.main()
