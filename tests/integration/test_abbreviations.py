"""Flag abbreviations as torchrun's argparse reads them: on the same argv,
ctrun and torch 1.13's own torchrun parser (torch.distributed.run's
get_args_parser, run in this process) accept it with the same values, or
both refuse it. The values ctrun took are read from its workers (small shell
commands, --no_py), where torchrun's workers would read them.

torch 1.13 has one spelling per flag (--nproc_per_node); ctrun and torch 2.x
have two (--nproc-per-node too), and a prefix of both spellings of one flag
is that flag. torch 2.x and ctrun have flags 1.13 lacks, so a prefix 1.13
takes may be ambiguous in both of them (--log: --log-dir, --logs-specs):
those cases are listed apart, with the flags that make them ambiguous."""
import contextlib
import io
import re
import unittest

import harness as h

# Each worker prints what torchrun would have given it.
WORKER = ["--no_py", "/bin/sh", "-c",
          'echo "local_world_size=$LOCAL_WORLD_SIZE world_size=$WORLD_SIZE '
          'max_restarts=$TORCHELASTIC_MAX_RESTARTS role=$ROLE_NAME"']

# argv (before the worker), then what torchrun's namespace holds for it and
# what ctrun's workers print for the same values.
ACCEPTED = [
    (["--nproc", "2", "--standal"], {"nproc_per_node": "2", "standalone": True},
     ["local_world_size=2", "world_size=2"]),
    (["--standalone", "--nproc_per", "3", "--max_re", "2", "--rol", "trainer"],
     {"nproc_per_node": "3", "max_restarts": 2, "role": "trainer"},
     ["local_world_size=3", "max_restarts=2", "role=trainer"]),
    (["--standalone", "--nnode=1", "--nproc_p=1"], {"nnodes": "1", "nproc_per_node": "1"},
     ["local_world_size=1", "world_size=1"]),
    (["--standalone", "--max_restarts=1", "--max_r", "3"], {"max_restarts": 3}, ["max_restarts=3"]),
]
# argv refused by both, and a word each message has.
REFUSED = [
    (["--n", "2", "--standalone"], "ambiguous"),
    (["--rdzv", "c10d", "--standalone"], "ambiguous"),
    (["--rdzv_", "c10d", "--standalone"], "ambiguous"),
    (["--nprocs", "2", "--standalone"], "unrecognized"),
    (["--standalone", "--nproc_per_nodes", "2"], "unrecognized"),
]
# Accepted by torch 1.13, ambiguous in ctrun as in torch 2.x: the flags 2.x
# added that share the prefix.
NEWER_FLAGS = [
    (["--log", "/tmp/x", "--standalone"], ["--logs-specs"]),
]


def torchrun_parse(argv):
    """(torchrun's namespace, "") or (None, argparse's last error line)."""
    from torch.distributed.run import get_args_parser
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return get_args_parser().parse_args(argv), ""
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1]


def flags_named(message):
    """The flags an 'ambiguous' message lists, spelled with dashes."""
    return {f.replace("_", "-") for f in re.findall(r"--[a-z][a-z_-]*", message.split("could match", 1)[1])}


class AbbreviationsTest(unittest.TestCase):
    def test_accepted_with_the_same_values(self):
        for argv, namespace, printed in ACCEPTED:
            with self.subTest(argv=argv):
                ns, err = torchrun_parse(argv + WORKER)
                self.assertIsNotNone(ns, err)
                for key, value in namespace.items():
                    self.assertEqual(getattr(ns, key), value, key)
                r = h.run(argv + WORKER, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                lines = r.stdout.splitlines()
                self.assertEqual(len(lines), int(ns.nproc_per_node), r.stdout)
                for line in lines:
                    for word in printed:
                        self.assertIn(word, line.split())

    def test_refused_by_both(self):
        for argv, word in REFUSED:
            with self.subTest(argv=argv):
                ns, torch_err = torchrun_parse(argv + WORKER)
                self.assertIsNone(ns, argv)
                r = h.run(argv + WORKER, timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertIn(word, torch_err)
                if word == "ambiguous":  # ctrun names every flag torchrun names
                    self.assertIn(f"ambiguous flag '{argv[0]}' could match", r.stderr)
                    self.assertLessEqual(flags_named(torch_err), flags_named(r.stderr), r.stderr)
                else:
                    self.assertIn(f"unknown flag '{argv[0] if argv[0] != '--standalone' else argv[1]}'", r.stderr)
                    self.assertIn("did you mean --nproc", r.stderr)

    def test_prefixes_of_flags_newer_than_torch_1_13_are_ambiguous(self):
        for argv, newer in NEWER_FLAGS:
            with self.subTest(argv=argv):
                ns, err = torchrun_parse(argv + WORKER)
                self.assertIsNotNone(ns, err)  # torch 1.13 knew only --log_dir
                r = h.run(argv + WORKER, timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertLessEqual(set(newer), flags_named(r.stderr), r.stderr)
                self.assertIn("--log-dir", flags_named(r.stderr))


if __name__ == "__main__":
    unittest.main()
