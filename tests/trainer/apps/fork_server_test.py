"""The tests' fork server (trainer/apps/fork_server.h, tests/trainer/fork_server.py):
a forked rank behaves as the exec'd one (argv, environment, streams, exit
status, error file); a malformed request is answered and changes nothing; the
server's children die with it; a bad CTRUN_FORK_SERVER_FD is refused."""
import array
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
import fork_server
from trainer_test_util import binary, rank_env


class ForkServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gpt = binary("trainer/apps/ctrun-gpt")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def both(self, argv, env):
        """(returncode, stdout, stderr) of argv exec'd, then forked."""
        execd = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        forked = fork_server.run(argv, env=env, capture_output=True, timeout=60)
        return ((execd.returncode, execd.stdout, execd.stderr), (forked.returncode, forked.stdout, forked.stderr))

    def test_a_forked_rank_answers_as_the_execd_one(self):
        # argv and streams: the usage text, and a flag error's one line and exit 2.
        env = dict(os.environ, OMP_NUM_THREADS="1")
        execd, forked = self.both([self.gpt, "--help"], env)
        self.assertEqual(execd[0], 0)
        self.assertEqual(forked, execd)
        execd, forked = self.both([self.gpt, "--mesh", "tp=two"], env)
        self.assertEqual(execd[0], 2)
        self.assertEqual(forked, execd)
        # The environment: the rank's own, not the server's (WORLD_SIZE differs).
        for world in ("4", "8"):
            error_file = os.path.join(self.tmp.name, f"error_{world}.json")
            env = dict(rank_env(0, int(world), 1), TORCHELASTIC_ERROR_FILE=error_file)
            p = fork_server.run([self.gpt, "--mesh", "pp=2,dp=2,tp=4"], env=env, capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            with open(error_file) as f:
                self.assertIn(f"but WORLD_SIZE is {world}", json.load(f)["message"])

    def waiting_rank_env(self, listener):
        """A rank 1 whose store (the listener, which accepts and never
        answers) keeps it waiting."""
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        return dict(os.environ, OMP_NUM_THREADS="1", RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(listener.getsockname()[1]), TORCHELASTIC_USE_AGENT_STORE="True")

    def test_a_signal_is_the_returncode_popen_gives(self):
        with socket.socket() as listener:
            env = self.waiting_rank_env(listener)
            p = fork_server.spawn([self.gpt, "--mesh", "dp=2"], env, subprocess.PIPE, subprocess.PIPE)
            conn, _ = listener.accept()  # running, and waiting on its store
            self.assertIsNone(p.poll())
            p.kill()
            self.assertEqual(p.wait(timeout=30), -signal.SIGKILL)
            p.communicate(timeout=30)
            conn.close()

    def test_a_malformed_request_is_answered_and_the_server_goes_on(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = subprocess.Popen([self.gpt], env=dict(os.environ, CTRUN_FORK_SERVER_FD=str(theirs.fileno())),
                                  pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        null = os.open(os.devnull, os.O_RDWR)
        try:
            fds = array.array("i", [null, null, null])
            bad = [
                (b"leak-check=0\x001\x00--help\x000\x00", array.array("i", [null])),  # one descriptor
                (b"leak-check=2\x001\x00--help\x000\x00", fds),              # unknown option
                (b"leak-check=0\x003\x00a\x00", fds),                        # argc past the end
                (b"leak-check=0\x000\x000\x00", fds),                        # no argv[0]
                (b"leak-check=0\x001\x00a\x001\x00NOEQUALS\x00", fds),       # env without '='
                (b"leak-check=0\x001\x00a\x000", fds),                       # not NUL-ended
                (b"leak-check=0\x0099999999999999999999\x00", fds),         # a count too large
            ]
            for payload, attached in bad:
                ours.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, attached)])
                ours.settimeout(30)
                reply = ours.recv(4096).decode()
                self.assertTrue(reply.startswith("error malformed request"), (payload, reply))
            # Still serving: a good request forks.
            ours.sendmsg([b"leak-check=0\x002\x00ctrun-gpt\x00--help\x000\x00"],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            self.assertRegex(ours.recv(4096).decode(), r"^pid \d+$")
            self.assertRegex(ours.recv(4096).decode(), r"^exit \d+ 0$")
        finally:
            os.close(null)
            ours.close()
        self.assertEqual(server.wait(timeout=30), 0)

    def test_children_die_with_the_server(self):
        with socket.socket() as listener:
            env = self.waiting_rank_env(listener)
            server = fork_server._Server(self.gpt, env)
            rank = fork_server.Rank(server, [self.gpt, "--mesh", "dp=2"], env, subprocess.DEVNULL,
                                    subprocess.DEVNULL, False)
            conn, _ = listener.accept()  # running, and waiting on its store
            self.assertTrue(os.path.exists(f"/proc/{rank.pid}"))
            server.sock.close()  # the client is gone: the server kills and reaps its children, exits 0
            self.assertEqual(server.proc.wait(timeout=30), 0)
            self.assertFalse(os.path.exists(f"/proc/{rank.pid}"), "a rank outlived its fork server")
            conn.close()

    def test_a_bad_descriptor_is_refused_in_one_line(self):
        for value in ("x", "1", "99"):
            p = subprocess.run([self.gpt], env=dict(os.environ, CTRUN_FORK_SERVER_FD=value),
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
            self.assertIn(f"CTRUN_FORK_SERVER_FD='{value}' is not a SOCK_SEQPACKET socket's descriptor", p.stderr)


if __name__ == "__main__":
    unittest.main()
