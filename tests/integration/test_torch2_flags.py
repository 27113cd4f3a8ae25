"""torchrun 2.x's newer flags on real ctrun runs (issue 18, part 2):
--duplicate-stdout-filters / --duplicate-stderr-filters, --virtual-local-rank,
--event-log-handler console, --shutdown-timeout. The workers are small shell
commands (--no-python): these flags are about ctrun, not torch."""
import glob
import json
import os
import unittest

import harness as h

SH = "/bin/sh"


def run_dir(test, log_dir):
    dirs = glob.glob(os.path.join(log_dir, "none_*"))
    test.assertEqual(len(dirs), 1, os.listdir(log_dir))
    return os.path.join(dirs[0], "attempt_0")


def read(path):
    with open(path) as f:
        return f.read()


class DuplicateFiltersTest(unittest.TestCase):
    # Each rank prints two matching stdout lines among others, one matching
    # stderr line; "acc,,top" is the one filter "acc,top".
    WORKER = ['--no-python', SH, "-c",
              'echo "loss ${local_rank}"; echo step; echo "acc,top ${local_rank}"; echo "acc only";'
              ' echo "WARN ${local_rank}" >&2; echo INFO >&2']

    def test_matching_lines_of_every_rank_go_to_the_attempts_filtered_files(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--log-dir", d, "--duplicate-stdout-filters", "loss,acc,,top",
                   "--duplicate_stderr_filters=WARN"] + self.WORKER)
        self.assertEqual(r.returncode, 0, r.stderr)
        attempt = run_dir(self, d)
        out = read(os.path.join(attempt, "filtered_stdout.log")).splitlines()
        # All ranks in one file; each rank's lines in its own order.
        self.assertEqual(sorted(out), ["[default0]:acc,top 0", "[default0]:loss 0",
                                       "[default1]:acc,top 1", "[default1]:loss 1"])
        for lr in range(2):
            self.assertLess(out.index(f"[default{lr}]:loss {lr}"), out.index(f"[default{lr}]:acc,top {lr}"))
        self.assertEqual(sorted(read(os.path.join(attempt, "filtered_stderr.log")).splitlines()),
                         ["[default0]:WARN 0", "[default1]:WARN 1"])
        # Not tee'd: the console gets the worker's lines as written, unprefixed,
        # and no rank file is made.
        self.assertEqual(sorted(r.stdout.splitlines()),
                         sorted(["loss 0", "step", "acc,top 0", "acc only", "loss 1", "step", "acc,top 1",
                                 "acc only"]))
        self.assertFalse(os.path.exists(os.path.join(attempt, "0", "stdout.log")))

    def test_tee_and_ranks_filter_are_unchanged_and_the_filter_still_sees_every_rank(self):
        d = h.tempdir(self)
        r = h.run(["--nproc-per-node", "2", "--log-dir", d, "--tee", "1", "--local-ranks-filter", "1"]
                  + self.WORKER, env=h.base_env(PET_DUPLICATE_STDOUT_FILTERS="loss"))
        self.assertEqual(r.returncode, 0, r.stderr)
        attempt = run_dir(self, d)
        self.assertEqual(sorted(read(os.path.join(attempt, "filtered_stdout.log")).splitlines()),
                         ["[default0]:loss 0", "[default1]:loss 1"])
        self.assertFalse(os.path.exists(os.path.join(attempt, "filtered_stderr.log")))
        self.assertEqual(r.stdout.splitlines(), ["[default1]:loss 1", "[default1]:step", "[default1]:acc,top 1",
                                                 "[default1]:acc only"])
        self.assertEqual(read(os.path.join(attempt, "0", "stdout.log")), "loss 0\nstep\nacc,top 0\nacc only\n")


class VirtualLocalRankTest(unittest.TestCase):
    WORKER = ["--tee", "1", "--no-python", SH, "-c",
              'echo "LOCAL_RANK=$LOCAL_RANK CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES RANK=$RANK"']

    def lines(self, r):
        self.assertEqual(r.returncode, 0, r.stderr)
        return sorted(r.stdout.splitlines())

    def test_each_worker_sees_its_own_entry_of_the_inherited_list_as_device_0(self):
        r = h.run(["--nproc-per-node", "3", "--virtual-local-rank"] + self.WORKER,
                  env=h.base_env(CUDA_VISIBLE_DEVICES="5, 6,GPU-3c1e"))
        self.assertEqual(self.lines(r), ["[default0]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=5 RANK=0",
                                         "[default1]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=6 RANK=1",
                                         "[default2]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=GPU-3c1e RANK=2"])

    def test_without_a_list_worker_i_gets_device_i_and_pet_any_integer_turns_it_on(self):
        r = h.run(["--nproc-per-node", "2"] + self.WORKER,
                  env=h.base_env(CUDA_VISIBLE_DEVICES=None, PET_VIRTUAL_LOCAL_RANK="2"))
        self.assertEqual(self.lines(r), ["[default0]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=0 RANK=0",
                                         "[default1]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=1 RANK=1"])

    def test_off_leaves_local_rank_and_the_list_alone(self):
        r = h.run(["--nproc-per-node", "2"] + self.WORKER,
                  env=h.base_env(CUDA_VISIBLE_DEVICES="5,6", PET_VIRTUAL_LOCAL_RANK="0"))
        self.assertEqual(self.lines(r), ["[default0]:LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=5,6 RANK=0",
                                         "[default1]:LOCAL_RANK=1 CUDA_VISIBLE_DEVICES=5,6 RANK=1"])


class EventLogHandlerTest(unittest.TestCase):
    def json_lines(self, text):
        return [json.loads(l) for l in text.splitlines() if l.startswith("{")]

    def test_console_prints_each_event_as_one_json_line_on_stderr(self):
        d = h.tempdir(self)
        events_file = os.path.join(d, "events.jsonl")
        r = h.run(["--event-log-handler", "console", "--events-file", events_file, "--nproc-per-node", "2",
                   "--no-python", "/bin/true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        on_stderr = self.json_lines(r.stderr)
        names = [e["event"] for e in on_stderr]
        self.assertEqual(names.count("worker_started"), 2, r.stderr)
        self.assertEqual(names[-1], "finished")
        # The same events as the file, line for line.
        self.assertEqual(on_stderr, self.json_lines(read(events_file)))

    def test_console_alone_needs_no_events_file(self):
        r = h.run(["--nproc-per-node", "1", "--no-python", "/bin/true"],
                  env=h.base_env(PET_EVENT_LOG_HANDLER="console", PET_EVENTS_FILE=None, CTRUN_EVENTS_FILE=None))
        self.assertEqual(r.returncode, 0, r.stderr)
        events = self.json_lines(r.stderr)
        self.assertEqual([e["event"] for e in events if e["event"] in ("worker_started", "worker_exited")],
                         ["worker_started", "worker_exited"], r.stderr)
        self.assertTrue(all(e["run_id"] == "none" for e in events))

    def test_null_and_dynamic_rendezvous_print_none(self):
        for name in ("null", "dynamic_rendezvous"):
            r = h.run(["--nproc-per-node", "1", "--no-python", "/bin/true"],
                      env=h.base_env(PET_EVENT_LOG_HANDLER=name))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.json_lines(r.stderr), [], name)


class ShutdownTimeoutTest(unittest.TestCase):
    def test_the_flag_wins_over_torch_elastic_shutdown_timeout(self):
        # Worker 1 ignores SIGTERM; once it is ready, worker 0 fails. With the
        # variable's 600 s the job would outlive the test's timeout; the
        # flag's 0 s sends SIGKILL at once.
        d = h.tempdir(self)
        ready = os.path.join(d, "ready")
        script = (f'if [ "${{local_rank}}" = 1 ]; then trap "" TERM; touch {ready}; exec sleep 600; fi;'
                  f' while [ ! -e {ready} ]; do sleep 0.05; done; exit 3')
        r = h.run(["--nproc-per-node", "2", "--shutdown-timeout", "0", "--no-python", SH, "-c", script],
                  env=h.base_env(TORCH_ELASTIC_SHUTDOWN_TIMEOUT="600"), timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("workers still running after the shutdown grace; sending SIGKILL", r.stderr)


if __name__ == "__main__":
    unittest.main()
