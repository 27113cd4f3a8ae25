"""ctrun on one node with real PyTorch workers (Debian's torch, Gloo)."""
import glob
import json
import os
import re
import signal
import subprocess
import unittest

import harness as h


class AllReduceTest(unittest.TestCase):
    def test_four_workers_all_reduce(self):
        r = h.run(["--nproc-per-node", "4", "--tee", "3", h.worker("allreduce.py")])
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in range(4):
            self.assertIn(f"rank {rank} world 4 sum 10", r.stdout)

    def test_standalone_underscored_flags(self):
        r = h.run(["--standalone", "--nproc_per_node=2", "--tee=1", h.worker("allreduce.py")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("world 2 sum 3", r.stdout)

    def test_pet_variables_configure_the_run(self):
        env = h.base_env(PET_NPROC_PER_NODE="3", PET_TEE="1")
        r = h.run([h.worker("allreduce.py")], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("world 3 sum 6", r.stdout)


class EnvironmentTest(unittest.TestCase):
    def test_worker_environment_matches_torchrun(self):
        d = h.tempdir(self)
        env = h.base_env(DUMP_DIR=d, OMP_NUM_THREADS=None, CUDA_VISIBLE_DEVICES="3,1",
                         TORCH_NCCL_ASYNC_ERROR_HANDLING=None, NCCL_ASYNC_ERROR_HANDLING=None,
                         MY_OWN_VAR="kept")
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "2", "--rdzv-id", "job7",
                   "--role", "trainer", "--log-dir", d,
                   h.worker("dump_env.py"), "--lr", "${local_rank}", "-m"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("OMP_NUM_THREADS", r.stderr)  # the torchrun banner
        for lr in range(2):
            with open(os.path.join(d, f"env_0_{lr}.json")) as f:
                dump = json.load(f)
            e = dump["env"]
            expected = {
                "LOCAL_RANK": str(lr), "RANK": str(lr), "GROUP_RANK": "0",
                "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(lr), "ROLE_NAME": "trainer",
                "ROLE_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "TORCHELASTIC_RESTART_COUNT": "0",
                "TORCHELASTIC_MAX_RESTARTS": "2", "TORCHELASTIC_RUN_ID": "job7",
                "TORCHELASTIC_USE_AGENT_STORE": "True",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "1",
                "CUDA_VISIBLE_DEVICES": "3,1", "MY_OWN_VAR": "kept",
                "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            }
            for k, v in expected.items():
                self.assertEqual(e.get(k), v, k)
            # torch 1.x's spelling, which torch 2.x warns about: not added.
            self.assertNotIn("NCCL_ASYNC_ERROR_HANDLING", e)
            port = int(e["MASTER_PORT"])
            self.assertTrue(0 < port < 65536)
            err = e["TORCHELASTIC_ERROR_FILE"]
            self.assertTrue(re.fullmatch(
                re.escape(d) + r"/job7_[^/]+/attempt_0/" + str(lr) + r"/error\.json", err), err)
            # ctrun's one addition to torchrun's set, on purpose: where a
            # worker asks for its node's exclusion (docs/reliability.md).
            self.assertEqual(e.get("CTRUN_EXCLUDE_NODE_FILE"),
                             os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(err))), "exclude_node"))
            self.assertEqual(dump["argv"][1:], ["--lr", str(lr), "-m"])
            self.assertEqual(dump["executable"], h.PYTHON)

    def test_environment_equals_this_machine_s_torchrun_but_for_the_known_differences(self):
        # The same command line under torchrun (this machine's torch, patched
        # in-process for Python 3.11: bench/torchrun_compat.py) and ctrun:
        # any variable that differs, or that only one of them sets, must be
        # one of those listed here; each is documented in docs/migration.md.
        # (On torch 2.11's torchrun, 2026-11-26, only CTRUN_EXCLUDE_NODE_FILE
        # was extra: see docs/migration.md.)
        # Both get the same fixed --master_port (the workers' MASTER_PORT is
        # compared), each in a network namespace of its own where no other
        # test can hold it.
        port = "29500"
        args = ["--nproc_per_node", "2", "--max_restarts", "2", "--rdzv_id", "job7", "--role", "trainer",
                "--master_port", port, h.worker("dump_env.py"), "--lr", "${local_rank}"]
        source = os.environ.get("CTRUN_SOURCE_DIR", os.path.join(h.HERE, "..", ".."))
        dumps = {}
        for name in ("torchrun", "ctrun"):
            d = h.tempdir(self)
            env = h.base_env(DUMP_DIR=d, OMP_NUM_THREADS=None, TORCH_NCCL_ASYNC_ERROR_HANDLING=None,
                             NCCL_ASYNC_ERROR_HANDLING=None)
            if name == "torchrun":
                r = subprocess.run([*h.private_net(self), h.PYTHON, os.path.join(source, "bench", "torchrun_compat.py"),
                                    *args], env=env, capture_output=True, text=True, timeout=120)
            else:
                r = h.run(args, env=env, prefix=h.private_net(self))
            self.assertEqual(r.returncode, 0, name + ": " + r.stderr[-2000:])
            for lr in range(2):
                with open(os.path.join(d, f"env_0_{lr}.json")) as f:
                    dumps[name, lr] = json.load(f)
        torch_major = int(subprocess.run([h.PYTHON, "-c", "import torch; print(torch.__version__.split('.')[0])"],
                                         capture_output=True, text=True, timeout=60).stdout)
        # torch 2.x's torchrun sets these too; 1.13's sets the bare NCCL one,
        # which torch 2.x warns about and ctrun leaves out.
        ctrun_only = {"CTRUN_EXCLUDE_NODE_FILE"}
        torchrun_only = set()
        if torch_major < 2:
            ctrun_only |= {"TORCHELASTIC_SIGNALS_TO_HANDLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}
            torchrun_only |= {"NCCL_ASYNC_ERROR_HANDLING"}
        for lr in range(2):
            t, c = dumps["torchrun", lr], dumps["ctrun", lr]
            te, ce = t["env"], c["env"]
            self.assertEqual(set(ce) - set(te), ctrun_only)
            self.assertEqual(set(te) - set(ce), torchrun_only)
            differ = {k for k in set(te) & set(ce) if te[k] != ce[k]}
            self.assertEqual(differ, {"DUMP_DIR", "TORCHELASTIC_ERROR_FILE"}, differ)
            for e in (te, ce):  # a fresh directory each, the same layout
                self.assertRegex(e["TORCHELASTIC_ERROR_FILE"], rf"/job7_[^/]+/attempt_0/{lr}/error\.json$")
            self.assertEqual(t["argv"], c["argv"])
            self.assertEqual(t["executable"], c["executable"])

    def test_no_agent_store_lets_worker_rank0_host_the_store(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--no-agent-store", h.worker("dump_env.py")],
                  env=h.base_env(DUMP_DIR=d))
        self.assertEqual(r.returncode, 0, r.stderr)
        for lr in range(2):
            with open(os.path.join(d, f"env_0_{lr}.json")) as f:
                self.assertEqual(json.load(f)["env"]["TORCHELASTIC_USE_AGENT_STORE"], "False")

    def test_set_omp_num_threads_is_passed_through_without_banner(self):
        d = h.tempdir(self)
        env = h.base_env(DUMP_DIR=d, OMP_NUM_THREADS="3")
        r = h.run(["--nproc-per-node", "2", h.worker("dump_env.py")], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("OMP_NUM_THREADS", r.stderr)
        with open(os.path.join(d, "env_0_1.json")) as f:
            self.assertEqual(json.load(f)["env"]["OMP_NUM_THREADS"], "3")


class RestartTest(unittest.TestCase):
    def test_crash_once_restarts_the_group(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--max-restarts", "1", h.worker("crash_once.py")],
                  env=h.base_env(DUMP_DIR=d))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "env_1_0.json")) as f:
            self.assertEqual(json.load(f)["env"]["TORCHELASTIC_RESTART_COUNT"], "1")
        with open(os.path.join(d, "env_1_1.json")) as f:
            self.assertEqual(json.load(f)["env"]["TORCHELASTIC_RESTART_COUNT"], "1")
        self.assertIn("restart 1 of 1", r.stderr)

    def test_no_restarts_left_reports_the_root_cause(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "3", "--log-dir", d, h.worker("fail_with_record.py")],
                  env=h.base_env(FAIL_RANK="1"))
        self.assertEqual(r.returncode, 1, r.stderr)
        err = r.stderr
        self.assertIn("fail_with_record.py FAILED", err)
        root = err.split("Root Cause (first observed failure):", 1)[1]
        self.assertIn("rank      : 1 (local_rank: 1)", root)
        self.assertIn("exitcode  : 1", root)
        self.assertIn("ValueError: worker says the input is bad", root)
        error_files = glob.glob(os.path.join(d, "*", "attempt_0", "1", "error.json"))
        self.assertEqual(len(error_files), 1)
        self.assertIn(error_files[0], root)
        # The two workers stopped by ctrun are listed as other failures.
        others = err.split("Root Cause", 1)[0]
        self.assertEqual(others.count("Signal 15 (SIGTERM) received by PID"), 2)

    def test_exit_code_from_root_cause(self):
        r = h.run(["--nproc-per-node", "2", "--exit-code-from-root-cause",
                   h.worker("fail_with_record.py")], env=h.base_env(FAIL_RANK="0", FAIL_EXIT="7"))
        self.assertEqual(r.returncode, 7, r.stderr)
        r = h.run(["--nproc-per-node", "2", h.worker("fail_with_record.py")],
                  env=h.base_env(FAIL_RANK="0", FAIL_EXIT="7"))
        self.assertEqual(r.returncode, 1, r.stderr)

    def test_agent_error_file_for_an_outer_scheduler(self):
        d = h.tempdir(self)
        outer = os.path.join(d, "agent_error.json")
        env = h.base_env(FAIL_RANK="0")
        env["TORCHELASTIC_ERROR_FILE"] = outer
        r = h.run(["--nproc-per-node", "2", h.worker("fail_with_record.py")], env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        with open(outer) as f:
            data = json.load(f)
        self.assertIn("ValueError: worker says the input is bad", json.dumps(data))
        self.assertEqual(data["message"]["errorCode"], 1)


class ShutdownTest(unittest.TestCase):
    """Signals and SIGKILL of ctrun: every worker, child and grandchild goes."""

    def start_and_collect(self, nproc):
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        proc = h.start(["--nproc-per-node", str(nproc), h.worker("announce_and_wait.py")],
                       env=h.base_env(ANNOUNCE=fifo.path, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="5"))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        lines = fifo.lines(3 * nproc, timeout=60)
        pids = [int(line.split()[1]) for line in lines]
        self.addCleanup(h.kill_all, pids)
        return proc, pids

    def test_sigterm_stops_every_worker_within_the_grace(self):
        proc, pids = self.start_and_collect(2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("Received SIGTERM death signal", err)
        self.assertEqual(h.wait_gone(pids, timeout=1), [])

    def test_sigint_is_forwarded_too(self):
        proc, pids = self.start_and_collect(1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 128 + signal.SIGINT, err)
        self.assertEqual(h.wait_gone(pids, timeout=1), [])

    def test_a_process_the_worker_forks_after_the_signal_gets_it_too(self):
        # A shell that forks while the stop signal is in flight (it blocks
        # signals around its fork; a blocked signal does not pass to the
        # child) leaves a child that never got it. Here the worker forks the
        # `sleep` in its SIGTERM handler, then exits: when it exits, what is
        # left of its group gets SIGTERM again, well within the 60 s grace.
        script = ("import os, signal, subprocess, sys, time\n"
                  "def stop(*_):\n"
                  "    p = subprocess.Popen(['sleep', '600'])\n"
                  "    print('forked', p.pid, flush=True)\n"
                  "    os._exit(0)\n"
                  "signal.signal(signal.SIGTERM, stop)\n"
                  "print('up', flush=True)\n"
                  "time.sleep(600)\n")
        proc = h.start(["--nproc-per-node", "1", "--no-python", h.PYTHON, "-c", script],
                       env=h.base_env(TORCH_ELASTIC_SHUTDOWN_TIMEOUT="60"))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        h.read_until(proc.stdout, "up\n", timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.assertNotIn("sending SIGKILL", err)
        pid = int(out.split("forked")[1].split()[0])
        self.addCleanup(h.kill_all, [pid])
        self.assertEqual(h.wait_gone([pid], timeout=5), [])

    def test_kill9_of_ctrun_leaves_no_orphans(self):
        proc, pids = self.start_and_collect(2)
        proc.kill()
        proc.communicate(timeout=10)
        self.assertEqual(h.wait_gone(pids, timeout=20), [])

    def test_kill9_of_ctrun_kills_a_worker_s_leftover_in_another_group(self):
        # Only the orphan guard can reach the `sleep`: it left the worker's
        # process group (killpg misses it) and has no PDEATHSIG. The guard,
        # which shares ctrun's memory, must outlive ctrun's SIGKILL and scan
        # the worker's session.
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        script = ("import os, subprocess, time\n"
                  "p = subprocess.Popen(['sleep', '300'], process_group=0)\n"
                  "with open(os.environ['ANNOUNCE'], 'w') as f:\n"
                  "    f.write(f'leftover {os.getpid()} {p.pid}\\n')\n"
                  "time.sleep(300)\n")
        proc = h.start(["--nproc-per-node", "1", "--no-python", h.PYTHON, "-c", script],
                       env=h.base_env(ANNOUNCE=fifo.path))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        line = fifo.lines(1, timeout=60)[0]
        pids = [int(p) for p in line.split()[1:]]
        self.addCleanup(h.kill_all, pids)
        proc.kill()
        proc.communicate(timeout=10)
        self.assertEqual(h.wait_gone(pids, timeout=20), [])

    def test_a_worker_s_leftover_in_another_group_dies_with_ctrun_after_success(self):
        # The worker exits 0 leaving a `sleep` in its session but in a process
        # group of its own: neither the worker's group nor PDEATHSIG reaches
        # it; the orphan guard's session scan must, after a normal exit too.
        script = ("import subprocess; p = subprocess.Popen(['sleep', '300'], process_group=0); "
                  "print('leftover', p.pid, flush=True)")
        r = h.run(["--nproc-per-node", "1", "--tee", "1", "--no-python", h.PYTHON, "-c", script])
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.stdout.split("leftover")[1].split()[0])
        self.addCleanup(h.kill_all, [pid])
        self.assertEqual(h.wait_gone([pid], timeout=10), [])


    def test_a_signal_during_a_restart_stop_lets_the_workers_finish_their_sigterm(self):
        # A worker fails, so the group is being stopped for a restart; the
        # other worker is checkpointing in its SIGTERM handler when ctrun gets
        # SIGTERM itself. That first signal must not SIGKILL it (only a
        # second one does), and ctrun exits for the signal without restarting.
        d = h.tempdir(self)
        fifo = h.Fifo(d)
        self.addCleanup(fifo.close)
        fail, go = os.path.join(d, "fail"), os.path.join(d, "go")
        os.mkfifo(fail)
        os.mkfifo(go)
        events_path = os.path.join(d, "events.jsonl")
        proc = h.start(["--nproc-per-node", "2", "--max-restarts", "1",
                        "--events-file", events_path, h.worker("checkpoint_on_term.py")],
                       env=h.base_env(ANNOUNCE=fifo.path, FAIL=fail, GO=go,
                                      TORCH_ELASTIC_SHUTDOWN_TIMEOUT="60"))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def tell(path):
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: the worker is gone
            os.write(fd, b"go\n")
            os.close(fd)

        self.assertEqual(sorted(h.fifo_lines(self, fifo, 2, 60, [proc])), ["ready 0 0", "ready 1 0"])
        tell(fail)
        self.assertEqual(h.fifo_lines(self, fifo, 1, 60, [proc]), ["term 1"])
        proc.send_signal(signal.SIGTERM)
        seen = h.read_until(proc.stderr, "Received SIGTERM death signal", 60)  # ctrun has handled it
        tell(go)
        self.assertEqual(h.fifo_lines(self, fifo, 1, 60, [proc]), ["saved 1"])
        _, rest = proc.communicate(timeout=60)
        err = seen + rest
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        with open(events_path) as f:
            events = [json.loads(line) for line in f]
        names = [e["event"] for e in events]
        self.assertIn("signal", names, events)
        self.assertNotIn("restart", names, events)  # the stop ended in the signal's exit
        exits = [e for e in events if e["event"] == "worker_exited"]
        self.assertEqual(sorted(e["local_rank"] for e in exits), [0, 1], events)
        self.assertEqual([e for e in exits if e.get("signal") == "SIGKILL"], [], events)  # no escalation
        self.assertEqual([e.get("exit_code") for e in exits if e["local_rank"] == 1], [0], events)  # saved
        self.assertEqual((events[-1]["event"], events[-1]["state"], events[-1]["exit_code"]),
                         ("finished", "failed", 128 + signal.SIGTERM), events)


class LogsTest(unittest.TestCase):
    def test_log_dir_layout_and_tee_prefixes(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--log-dir", d, "--tee", "3",
                   h.worker("allreduce.py")])
        self.assertEqual(r.returncode, 0, r.stderr)
        run_dirs = glob.glob(os.path.join(d, "none_*"))
        self.assertEqual(len(run_dirs), 1, os.listdir(d))
        for lr in range(2):
            rank_dir = os.path.join(run_dirs[0], "attempt_0", str(lr))
            with open(os.path.join(rank_dir, "stdout.log")) as f:
                self.assertIn(f"rank {lr} world 2 sum 3", f.read())
            self.assertTrue(os.path.exists(os.path.join(rank_dir, "stderr.log")))
            self.assertIn(f"[default{lr}]:rank {lr} world 2 sum 3\n", r.stdout)
        for line in r.stdout.splitlines():
            self.assertRegex(line, r"^\[default[01]\]:")

    def test_redirect_without_tee_keeps_the_console_quiet(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--log-dir", d, "-r", "1",
                   h.worker("allreduce.py")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("sum", r.stdout)
        logs = glob.glob(os.path.join(d, "none_*", "attempt_0", "*", "stdout.log"))
        self.assertEqual(len(logs), 2)

    def test_local_ranks_filter(self):
        r = h.run(["--nproc-per-node", "3", "--tee", "3", "--local-ranks-filter", "1",
                   h.worker("allreduce.py")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("[default1]:rank 1 world 3 sum 6", r.stdout)
        self.assertNotIn("[default0]", r.stdout)
        self.assertNotIn("[default2]", r.stdout)

    def test_dedup_logs_collapses_identical_lines(self):
        d = h.tempdir(self)
        # A window of 10 min (the test knob): however far apart loaded ranks
        # print, their identical line is one; what is held prints when the
        # workers' output ends, not when the window does.
        script = 'echo same line; echo "rank $LOCAL_RANK"'
        r = h.run(["--nproc-per-node", "6", "--dedup-logs", "--tee", "1", "--log-dir", os.path.join(d, "logs"),
                   "--no-python", "/bin/sh", "-c", script], env=h.base_env(CTRUN_DEDUP_WINDOW_MS=600000))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines.count("[ranks 0-5]: same line"), 1, r.stdout)
        self.assertNotIn("[default0]:same line", lines)
        for lr in range(6):
            self.assertEqual(lines.count(f"[default{lr}]:rank {lr}"), 1, r.stdout)
        # The files stay per rank.
        logs = glob.glob(os.path.join(d, "logs", "none_*", "attempt_0", "*", "stdout.log"))
        self.assertEqual(len(logs), 6)
        for log in logs:
            with open(log) as f:
                self.assertIn("same line\n", f.read())

    def test_temporary_log_dir_is_removed_after_success(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "1", "--no-python", "/bin/true"],
                  env=h.base_env(TMPDIR=d))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(d), [])


class Pid1Test(unittest.TestCase):
    def test_ctrun_as_pid1_reaps_orphaned_grandchildren(self):
        if os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"):
            self.skipTest("needs root and unshare for a PID namespace")
        cmd = ["/usr/bin/unshare", "--pid", "--fork", "--mount-proc", h.ctrun_bin(),
               "--nproc-per-node", "1", "--tee", "1", h.worker("orphan_maker.py")]
        import subprocess
        r = subprocess.run(cmd, env=h.base_env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ppid of the orphan was 1; ctrun pid is 1", r.stdout)
        self.assertIn("zombies left: []", r.stdout)


class BadInputTest(unittest.TestCase):
    def check_usage_error(self, args, needle, env=None):
        r = h.run(args, env=env)
        self.assertEqual(r.returncode, 2, (args, r.stderr))
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(needle, lines[0])

    def test_bad_flags_are_one_line_and_exit_2(self):
        script = h.worker("allreduce.py")
        self.check_usage_error(["--nnodes", "0", script], "--nnodes")
        self.check_usage_error(["--nnodes", "3:2", script], "--nnodes")
        self.check_usage_error(["--nnodes", "abc", script], "--nnodes")
        self.check_usage_error(["--nproc-per-node", "-1", script], "--nproc-per-node")
        self.check_usage_error(["--redirects", "9", script], "--redirects")
        self.check_usage_error(["--rdzv-conf", "bogus_key=1", script], "bogus_key")
        self.check_usage_error(["/nonexistent/train.py"], "/nonexistent/train.py")
        not_executable = os.path.join(h.tempdir(self), "train.sh")
        with open(not_executable, "w") as f:
            f.write("echo hi\n")
        os.chmod(not_executable, 0o644)
        self.check_usage_error(["--no-python", not_executable], not_executable)

    def test_bad_pet_value_names_the_variable(self):
        self.check_usage_error([h.worker("allreduce.py")], "PET_NPROC_PER_NODE",
                               env=h.base_env(PET_NPROC_PER_NODE="many"))

    def test_help(self):
        r = h.run(["--help"])
        self.assertEqual(r.returncode, 0)
        for flag in ("--nproc-per-node", "--rdzv-endpoint", "--max-restarts", "--tee"):
            self.assertIn(flag, r.stdout)


if __name__ == "__main__":
    unittest.main()
