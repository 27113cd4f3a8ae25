"""Bad input, table driven: malformed flags, environment values (PET_*,
TORCH_ELASTIC_*, CTRUN_*) and files (token, certificates, error files), for
ctrun and ctrund. Each row: the arguments and environment, the exit code
(docs/exit-codes.md: 2 for usage errors, nothing started) and a substring of
the one line on stderr that names the input and the fix.

Every case ends on its own (usage errors exit before starting anything); the
few multi-node rows fail while setting up the rendezvous, before any network
wait.
"""
import concurrent.futures
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import harness as h

SRC = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(h.HERE)))
TLS = os.path.join(SRC, "tests", "rendezvous", "grpc", "data", "tls")
CTRUND = os.path.join(h.build_dir(), "rendezvous", "ctrund")
TRUE = "/bin/true"


def multinode(*conf):
    """Arguments of a 2-node c10d job on a local port, with --rdzv-conf `conf`."""
    args = ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{port}"]
    if conf:
        args += ["--rdzv-conf", ",".join(conf)]
    return args + ["--no-python", TRUE]


def tls(name):
    return os.path.join(TLS, name)


# (name, argv, env, exit code, substring of the single stderr line)
# argv/env may use {dir} (a temp dir with files: empty, token, binary_token,
# not_executable, garbage), {port} (a port this test holds bound, never
# listening, while the row runs: every row fails before it would bind it).
# A byte that is not UTF-8 is written as Python's surrogate escape
# (os.fsdecode), which subprocess turns back into that byte.
CTRUN_ROWS = [
    # --- flags: sizes
    ("nnodes zero", ["--nnodes", "0", TRUE], {}, 2, "--nnodes"),
    ("nnodes min above max", ["--nnodes", "3:2", TRUE], {}, 2, "--nnodes '3:2'"),
    ("nnodes not a number", ["--nnodes", "abc", TRUE], {}, 2, "--nnodes 'abc'"),
    ("nnodes three parts", ["--nnodes", "1:2:3", TRUE], {}, 2, "--nnodes"),
    ("nproc negative", ["--nproc-per-node", "-1", TRUE], {}, 2, "--nproc-per-node"),
    ("nproc zero", ["--nproc-per-node", "0", TRUE], {}, 2, "--nproc-per-node"),
    ("nproc word", ["--nproc-per-node", "many", TRUE], {}, 2, "--nproc-per-node"),
    ("flag without value", ["--nnodes"], {}, 2, "--nnodes"),
    ("unknown flag", ["--bogus-flag", "1", TRUE], {}, 2, "--bogus-flag"),
    ("no script", [], {}, 2, "missing the training script"),
    # --- flags: rendezvous
    ("unknown backend", ["--rdzv-backend", "zookeeper", TRUE], {}, 2, "--rdzv-backend"),
    ("endpoint port out of range", ["--rdzv-endpoint", "localhost:99999", TRUE], {}, 2, "--rdzv-endpoint"),
    ("endpoint port not a number", ["--rdzv-endpoint", "localhost:http", TRUE], {}, 2, "--rdzv-endpoint"),
    ("endpoint port 0 on a joining node", ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
     "127.0.0.1:0", "--rdzv-conf", "is_host=0", "--no-python", TRUE], {}, 2,
     "--rdzv-endpoint '127.0.0.1:0': port 0 is only for the node that hosts the rendezvous"),
    ("endpoint port 0 for etcd", ["--nnodes", "2", "--rdzv-backend", "etcd-v3", "--rdzv-endpoint",
     "127.0.0.1:0", "--no-python", TRUE], {}, 2, "port 0 is only for the node that hosts the rendezvous"),
    ("rdzv-conf unknown key", ["--rdzv-conf", "bogus_key=1", TRUE], {}, 2, "bogus_key"),
    ("rdzv-conf negative timeout", ["--rdzv-conf", "join_timeout=-5", TRUE], {}, 2, "join_timeout"),
    ("rdzv-conf timeout word", ["--rdzv-conf", "join_timeout=soon", TRUE], {}, 2, "join_timeout"),
    ("rdzv-conf bad bool", ["--rdzv-conf", "is_host=maybe", TRUE], {}, 2, "is_host"),
    ("rdzv-conf zero attempts", ["--rdzv-conf", "keep_alive_max_attempt=0", TRUE], {}, 2, "keep_alive_max_attempt"),
    ("rdzv-conf store type", ["--rdzv-conf", "store_type=redis", TRUE], {}, 2, "store_type"),
    ("rdzv-conf metrics port too big", ["--rdzv-conf", "metrics_port=70000", TRUE], {}, 2,
     "metrics_port: must be a port 0..65535"),
    ("rdzv-conf empty key", ["--rdzv-conf", "=1", TRUE], {}, 2, "empty key"),
    ("rdzv-conf key without value", ["--rdzv-conf", "join_timeout", TRUE], {}, 2, "join_timeout"),
    ("node rank negative", ["--node-rank", "-1", TRUE], {}, 2, "--node-rank"),
    ("node rank word", ["--node-rank", "first", TRUE], {}, 2, "--node-rank"),
    ("master port too big", ["--master-port", "70000", TRUE], {}, 2, "--master-port"),
    ("master port word", ["--master-port", "http", TRUE], {}, 2, "--master-port"),
    ("c10d multinode without endpoint", ["--nnodes", "2", "--rdzv-backend", "c10d", "--no-python", TRUE], {}, 2,
     "needs --rdzv-endpoint"),
    ("static backend elastic", ["--nnodes", "1:2", "--rdzv-backend", "static", "--no-python", TRUE], {}, 2,
     "fixed membership"),
    # --- flags: supervision and logs
    ("max restarts negative", ["--max-restarts", "-1", TRUE], {}, 2, "--max-restarts"),
    ("monitor interval negative", ["--monitor-interval", "-1", TRUE], {}, 2, "--monitor-interval"),
    ("start method", ["--start-method", "thread", TRUE], {}, 2, "--start-method"),
    ("redirects out of range", ["--redirects", "9", TRUE], {}, 2, "--redirects"),
    ("tee out of range", ["--tee", "5", TRUE], {}, 2, "--tee"),
    ("redirects map bad value", ["--redirects", "0:9", TRUE], {}, 2, "--redirects"),
    ("local ranks filter words", ["--local-ranks-filter", "a,b", TRUE], {}, 2, "--local-ranks-filter"),
    ("unknown signal", ["--signals-to-handle", "SIGFOO", TRUE], {}, 2, "SIGFOO"),
    ("heartbeat timeout negative", ["--heartbeat-timeout", "-1", TRUE], {}, 2, "--heartbeat-timeout"),
    # --- crash-loop policy and bounded kill (issue 19)
    ("restart backoff negative", ["--restart-backoff", "-1", TRUE], {}, 2, "--restart-backoff '-1'"),
    ("min healthy uptime zero", ["--min-healthy-uptime", "0", TRUE], {}, 2, "--min-healthy-uptime '0'"),
    ("fail fast with a value", ["--fail-fast-on-startup=1", TRUE], {}, 2, "--fail-fast-on-startup takes no value"),
    ("kill timeout zero", ["--kill-timeout", "0", TRUE], {}, 2, "--kill-timeout '0'"),
    ("PET_RESTART_BACKOFF word", [TRUE], {"PET_RESTART_BACKOFF": "soon"}, 2, "PET_RESTART_BACKOFF 'soon'"),
    ("PET_FAIL_FAST_ON_STARTUP not a switch", [TRUE], {"PET_FAIL_FAST_ON_STARTUP": "maybe"}, 2,
     "PET_FAIL_FAST_ON_STARTUP 'maybe'"),
    ("PET_KILL_TIMEOUT negative", [TRUE], {"PET_KILL_TIMEOUT": "-5"}, 2, "PET_KILL_TIMEOUT '-5'"),
    ("hang stacks timeout negative", ["--hang-stacks-timeout", "-1", TRUE], {}, 2,
     "--hang-stacks-timeout '-1'"),
    ("PET_HANG_STACKS_TIMEOUT word", [TRUE], {"PET_HANG_STACKS_TIMEOUT": "long"}, 2,
     "PET_HANG_STACKS_TIMEOUT 'long'"),
    # --- node health (issue 19)
    ("health check empty", ["--health-check=", TRUE], {}, 2, "--health-check '': must not be empty"),
    ("health check timeout zero", ["--health-check-timeout", "0", TRUE], {}, 2, "--health-check-timeout '0'"),
    ("health check interval negative", ["--health-check-interval", "-5", TRUE], {}, 2,
     "--health-check-interval '-5'"),
    ("max unhealthy nodes negative", ["--max-unhealthy-nodes", "-1", TRUE], {}, 2, "--max-unhealthy-nodes '-1'"),
    ("PET_MAX_UNHEALTHY_NODES word", [TRUE], {"PET_MAX_UNHEALTHY_NODES": "few"}, 2,
     "PET_MAX_UNHEALTHY_NODES 'few'"),
    # --- straggler detection (issue 19, item 6)
    ("straggler factor not above 1", ["--straggler-factor", "0.5", TRUE], {}, 2,
     "--straggler-factor '0.5': must be a number > 1, or 0 to never flag (e.g. 1.5)"),
    ("straggler intervals zero", ["--straggler-intervals", "0", TRUE], {}, 2,
     "--straggler-intervals '0': must be a whole number of reports >= 1 (e.g. 5)"),
    ("PET_STRAGGLER_FACTOR word", [TRUE], {"PET_STRAGGLER_FACTOR": "big"}, 2, "PET_STRAGGLER_FACTOR 'big'"),
    # --- fault tolerance without restarts (--ft-replicas)
    ("ft replicas not a range", ["--ft-replicas", "3", TRUE], {}, 2,
     "--ft-replicas '3': not a range of replica groups (use MIN:MAX replica groups with 1 <= MIN <= MAX, "
     "e.g. 2:3)"),
    ("ft replicas reversed", ["--ft-replicas", "3:2", TRUE], {}, 2, "--ft-replicas '3:2': out of range"),
    ("ft replicas without a quorum server", ["--ft-replicas", "1:2", TRUE], {}, 2,
     "--ft-replicas needs a quorum server: give --rdzv-backend c10d --rdzv-endpoint HOST:PORT"),
    ("ft replicas with several nodes", ["--ft-replicas", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                        "127.0.0.1:0", "--nnodes", "2", TRUE], {}, 2,
     "--nnodes '2' with --ft-replicas: under --ft-replicas each replica group has a rendezvous of its own, so "
     "--nnodes counts one group's nodes (give --nnodes 1 or drop it"),
    ("ft group size without a node rank", ["--ft-replicas", "1:2", "--ft-group-size", "2", "--rdzv-backend", "c10d",
                                           "--rdzv-endpoint", "127.0.0.1:0", TRUE], {}, 2,
     "--ft-group-size 2 needs this node's --node-rank (or PET_NODE_RANK, SLURM_NODEID)"),
    ("PET_FT_GROUP_SIZE zero", [TRUE], {"PET_FT_GROUP_SIZE": "0"}, 2,
     "PET_FT_GROUP_SIZE '0': must be a node count from 1 to 64"),
    ("PET_FT_JOIN_TIMEOUT zero", [TRUE], {"PET_FT_JOIN_TIMEOUT": "0"}, 2, "PET_FT_JOIN_TIMEOUT '0'"),
    # --- torchrun 2.x's newer flags (issue 18)
    ("shutdown timeout fraction", ["--shutdown-timeout", "1.5", TRUE], {}, 2,
     "--shutdown-timeout '1.5': must be a whole number of seconds >= 0"),
    ("shutdown timeout negative", ["--shutdown_timeout=-1", TRUE], {}, 2, "--shutdown_timeout '-1'"),
    ("virtual local rank with a value", ["--virtual-local-rank=1", TRUE], {}, 2,
     "--virtual-local-rank takes no value"),
    ("virtual local rank short device list", ["--nproc-per-node", "3", "--virtual-local-rank", "--no-python", TRUE],
     {"CUDA_VISIBLE_DEVICES": "0,1"}, 2, "CUDA_VISIBLE_DEVICES='0,1' lists 2 device(s) for 3 workers"),
    ("duplicate stdout filters without value", ["--duplicate-stdout-filters"], {}, 2,
     "--duplicate-stdout-filters expects a value"),
    ("duplicate stderr filters without value", ["--duplicate_stderr_filters"], {}, 2,
     "--duplicate_stderr_filters expects a value"),
    ("event log handler unknown", ["--event-log-handler", "syslog", TRUE], {}, 2,
     "--event-log-handler 'syslog': not a valid choice (use one of: null, console, dynamic_rendezvous)"),
    ("logs specs", ["--logs-specs", "custom", TRUE], {}, 2, "--logs-specs 'custom': ctrun has no logs-specs plugins"),
    # --- the script
    ("script missing", ["/nonexistent/train.py"], {}, 2, "/nonexistent/train.py"),
    ("binary not executable", ["--no-python", "{dir}/not_executable"], {}, 2, "{dir}/not_executable"),
    # --- environment
    ("PET_NNODES word", [TRUE], {"PET_NNODES": "abc"}, 2, "PET_NNODES"),
    ("PET_NPROC_PER_NODE word", [TRUE], {"PET_NPROC_PER_NODE": "many"}, 2, "PET_NPROC_PER_NODE"),
    ("PET_MAX_RESTARTS negative", [TRUE], {"PET_MAX_RESTARTS": "-3"}, 2, "PET_MAX_RESTARTS"),
    ("PET_RDZV_BACKEND unknown", [TRUE], {"PET_RDZV_BACKEND": "bogus"}, 2, "PET_RDZV_BACKEND"),
    ("PET_MASTER_PORT word", [TRUE], {"PET_MASTER_PORT": "http"}, 2, "PET_MASTER_PORT"),
    ("PET_RDZV_CONF unknown key", [TRUE], {"PET_RDZV_CONF": "nope=1"}, 2, "nope"),
    ("PET_TEE out of range", [TRUE], {"PET_TEE": "7"}, 2, "PET_TEE"),
    ("LOGLEVEL unknown", [TRUE], {"LOGLEVEL": "verbose"}, 2, "LOGLEVEL='verbose'"),
    ("PET_STANDALONE not a switch", [TRUE], {"PET_STANDALONE": "maybe"}, 2, "PET_STANDALONE 'maybe'"),
    ("PET_VIRTUAL_LOCAL_RANK not an integer", [TRUE], {"PET_VIRTUAL_LOCAL_RANK": "1.0"}, 2,
     "PET_VIRTUAL_LOCAL_RANK '1.0': must be an integer"),
    ("PET_SHUTDOWN_TIMEOUT word", [TRUE], {"PET_SHUTDOWN_TIMEOUT": "soon"}, 2, "PET_SHUTDOWN_TIMEOUT 'soon'"),
    ("PET_EVENT_LOG_HANDLER unknown", [TRUE], {"PET_EVENT_LOG_HANDLER": "file"}, 2, "PET_EVENT_LOG_HANDLER 'file'"),
    ("PET_NODE_RANK negative", [TRUE], {"PET_NODE_RANK": "-2"}, 2, "PET_NODE_RANK '-2'"),
    ("PET_LOCAL_RANKS_FILTER word", [TRUE], {"PET_LOCAL_RANKS_FILTER": "x"}, 2, "PET_LOCAL_RANKS_FILTER 'x'"),
    ("PET_MONITOR_INTERVAL nan", [TRUE], {"PET_MONITOR_INTERVAL": "nan"}, 2, "PET_MONITOR_INTERVAL 'nan'"),
    ("PET_RDZV_ID empty", [TRUE], {"PET_RDZV_ID": ""}, 2, "run id must not be empty"),
    # --- run ids and node names: checked where they enter, quoted at most ~200 bytes
    ("run id not UTF-8", ["--rdzv-id", os.fsdecode(b"adv\xff"), TRUE], {}, 2,
     "--rdzv-id 'adv\\xff': a run id must be UTF-8 text, byte 3 is not"),
    ("run id of 100,000 bytes", ["--rdzv-id", "j" * 100000, TRUE], {}, 2,
     "\u2026(100000 bytes)': a run id is at most 128 bytes, this one has 100000"),
    ("PET_RDZV_ID control character", [TRUE], {"PET_RDZV_ID": "job\x1b[2J"}, 2,
     "PET_RDZV_ID 'job\\x1b[2J': a run id must not hold control characters, byte 3 is one"),
    ("c10d run id not UTF-8", multinode(), {"PET_RDZV_ID": os.fsdecode(b"\xc0\xafjob")}, 2,
     "PET_RDZV_ID '\\xc0\\xafjob': a run id must be UTF-8 text, byte 0 is not"),
    ("local addr too long", ["--local-addr", "n" * 300, TRUE], {}, 2,
     "a node name is at most 253 bytes, this one has 300"),
    ("PET_LOCAL_ADDR not UTF-8", [TRUE], {"PET_LOCAL_ADDR": os.fsdecode(b"node\xfe")}, 2,
     "PET_LOCAL_ADDR 'node\\xfe': a node name must be UTF-8 text"),
    ("local addr newline", ["--local-addr", "n1\nn2", TRUE], {}, 2,
     "--local-addr 'n1\\x0an2': a node name must not hold control characters"),
    ("unknown flag of 100,000 bytes", ["--" + "x" * 100000, TRUE], {}, 2, "\u2026(100002 bytes)'"),
    ("PYTHON_EXEC missing", [os.path.join(h.WORKERS, "allreduce.py")], {"PYTHON_EXEC": "/nonexistent/python"}, 2,
     "PYTHON_EXEC '/nonexistent/python'"),
    ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT word", [TRUE], {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "soon"}, 2,
     "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"),
    ("CTRUN_RDZV_TOKEN two lines", multinode(), {"CTRUN_RDZV_TOKEN": "a\nb"}, 2,
     "CTRUN_RDZV_TOKEN: the token must be one line of printable ASCII"),
    # --- files: token and TLS
    ("token file missing", multinode("token_file=/nonexistent/token"), {}, 2,
     "--rdzv-conf token_file '/nonexistent/token': cannot read it"),
    ("token file empty", multinode("token_file={dir}/empty"), {}, 2, "the file is empty"),
    ("token file binary", multinode("token_file={dir}/binary_token"), {}, 2, "one line of printable ASCII"),
    ("token file is a directory", multinode("token_file={dir}"), {}, 2, "--rdzv-conf token_file '{dir}'"),
    ("tls cert without key", multinode("tls_ca=" + tls("ca.pem"), "tls_cert=" + tls("server.pem")), {}, 2,
     "--rdzv-conf tls_cert given without --rdzv-conf tls_key"),
    ("tls cert without ca", multinode("tls_cert=" + tls("server.pem"), "tls_key=" + tls("server.key")), {}, 2,
     "without tls_ca"),
    ("tls ca not PEM", multinode("tls_ca={dir}/garbage"), {}, 2, "--rdzv-conf tls_ca '{dir}/garbage': no PEM certificate"),
    ("tls ca missing", multinode("tls_ca=/nonexistent/ca.pem"), {}, 2, "cannot read it"),
    ("tls key of another cert",
     multinode("tls_ca=" + tls("ca.pem"), "tls_cert=" + tls("server.pem"), "tls_key=" + tls("client.key")), {}, 2,
     "is not the key of --rdzv-conf tls_cert"),
    ("tls cert expired",
     multinode("tls_ca=" + tls("ca.pem"), "tls_cert=" + tls("expired.pem"), "tls_key=" + tls("expired.key")), {}, 2,
     "the certificate has expired"),
    ("tls host without cert", multinode("tls_ca=" + tls("ca.pem"), "is_host=1"), {}, 2,
     "needs its certificate and key to serve TLS"),
    ("tls server name without ca", multinode("tls_server_name=rdzv.example"), {}, 2, "tls_server_name without tls_ca"),
]

CTRUND_ROWS = [
    ("ctrund unknown flag", ["--bogus"], {}, 2, "--bogus"),
    ("ctrund listen without port", ["--listen", "nohost"], {}, 2, "listen address 'nohost'"),
    ("ctrund listen port too big", ["--listen", "127.0.0.1:99999"], {}, 2, "listen address '127.0.0.1:99999'"),
    ("ctrund listen foreign address", ["--listen", "192.0.2.1:0"], {}, 1,
     "cannot listen on 192.0.2.1:0: Cannot assign requested address (give an address of this host"),
    ("ctrund log level", ["--log-level", "loud"], {}, 2, "--log-level"),
    ("ctrund closed-run-ttl negative", ["--closed-run-ttl", "-1"], {}, 2, "--closed-run-ttl '-1': give the seconds"),
    ("ctrund closed-run-ttl not a number", ["--closed-run-ttl", "1h"], {}, 2, "--closed-run-ttl '1h'"),
    ("ctrund closed-run-ttl past a year", ["--closed-run-ttl", "1e9"], {}, 2, "to 31536000"),
    ("ctrund token file missing", ["--token-file", "/nonexistent/token"], {}, 2,
     "--token-file '/nonexistent/token': cannot read it"),
    ("ctrund token file empty", ["--token-file", "{dir}/empty"], {}, 2, "the file is empty"),
    ("ctrund token env control char", [], {"CTRUN_RDZV_TOKEN": "tok\x01en"}, 2, "CTRUN_RDZV_TOKEN"),
    ("ctrund tls cert without key", ["--tls-cert", tls("server.pem")], {}, 2, "--tls-cert given without --tls-key"),
    ("ctrund tls key mismatch", ["--tls-cert", tls("server.pem"), "--tls-key", tls("client.key")], {}, 2,
     "is not the key of --tls-cert"),
    ("ctrund tls cert not PEM", ["--tls-cert", "{dir}/garbage", "--tls-key", tls("server.key")], {}, 2,
     "--tls-cert '{dir}/garbage': no PEM certificate"),
    ("ctrund client ca without cert", ["--tls-client-ca", tls("ca.pem")], {}, 2, "--tls-client-ca needs --tls-cert"),
]


def make_files(d):
    open(os.path.join(d, "empty"), "w").close()
    with open(os.path.join(d, "binary_token"), "wb") as f:
        f.write(b"\x00\xff\x10token")
    with open(os.path.join(d, "garbage"), "w") as f:
        f.write("this is not PEM\n")
    p = os.path.join(d, "not_executable")
    with open(p, "w") as f:
        f.write("echo hi\n")
    os.chmod(p, 0o644)


class BadInputTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = h.tempdir(self)
        make_files(self.dir)

    def fill(self, s, port):
        return s.replace("{dir}", self.dir).replace("{port}", str(port))

    def run_row(self, program, argv, env):
        """Runs one row with {port} held bound (never listening) until it
        exits; returns (args, completed process, port)."""
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            port = held.getsockname()[1]
            args = [self.fill(a, port) for a in argv]
            e = h.base_env(**{"CTRUN_RDZV_TOKEN": None, **{k: self.fill(v, port) for k, v in env.items()}})
            try:
                r = subprocess.run([program] + args, env=e, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired as timeout:  # failed in its own subTest below
                r = timeout
            return args, r, port

    def check(self, program, rows):
        # Four rows at a time: each is a process start (~0.3 s under ASan)
        # that ends by itself; the checks then go row by row.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(lambda row: self.run_row(program, row[1], row[2]), rows))
        for (name, _, env, code, needle), (args, r, port) in zip(rows, runs):
            with self.subTest(name):
                self.assertNotIsInstance(r, subprocess.TimeoutExpired, f"{name}: {args} did not exit in 60 s")
                lines = r.stderr.strip().splitlines()
                # An error line quotes at most ~200 bytes of any input.
                self.assertLess(len(r.stderr.encode()), 1000, f"{name}: {r.stderr[:2000]}")
                self.assertEqual(r.returncode, code, f"{name}: {args} {env}\n{r.stderr}")
                self.assertEqual(len(lines), 1, f"{name}: {args}: not one line:\n{r.stderr}")
                self.assertIn(self.fill(needle, port), lines[0], name)
                if program == CTRUND and code == 2:  # every ctrund usage error ends the same way
                    self.assertTrue(lines[0].endswith(" (see ctrund --help)"), f"{name}: {lines[0]}")

    def test_ctrun_rows(self):
        self.assertGreaterEqual(len(CTRUN_ROWS) + len(CTRUND_ROWS) + len(FILE_ROWS), 40)
        self.check(h.ctrun_bin(), CTRUN_ROWS)

    def test_ctrund_rows(self):
        self.check(CTRUND, CTRUND_ROWS)


# Files a job produces or reads at run time, where the job itself is the
# input: (name, worker body, exit code, substring of stderr).
FILE_ROWS = [
    ("error file that is not JSON",
     "import os,sys\nopen(os.environ['TORCHELASTIC_ERROR_FILE'],'w').write('not json {')\nsys.exit(3)\n",
     1, "exitcode  : 3"),
    ("error file that is JSON but not an object",
     "import os,sys\nopen(os.environ['TORCHELASTIC_ERROR_FILE'],'w').write('[1,2]')\nsys.exit(4)\n",
     1, "exitcode  : 4"),
]


class BadFilesTest(unittest.TestCase):
    def test_a_broken_error_file_still_gives_a_report(self):
        d = h.tempdir(self)
        for name, body, code, needle in FILE_ROWS:
            with self.subTest(name):
                script = os.path.join(d, "worker.py")
                with open(script, "w") as f:
                    f.write(body)
                r = h.run([script], timeout=60)
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertIn(needle, r.stderr)


if __name__ == "__main__":
    unittest.main()
