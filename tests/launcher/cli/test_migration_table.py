"""docs/migration.md's flag table cannot drift from the code's flag table
(launcher/cli/flags.cc) nor from torchrun's flags: every spelling of every
row of flags.cc is in exactly one row of the migration table, with its PET_
name, and the other way round; every row says same, refused (with the
reason) or ctrun-only; every torchrun 2.x flag is in flags.cc with
torchrun's spellings and PET_ name and is not ctrun-only, and every flag
that is not torchrun's is ctrun-only. Reads the sources only: no build."""
import os
import re
import unittest

SOURCE = os.environ.get("CTRUN_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# torchrun 2.x's parser (torch/distributed/run.py, torch main of October 2026;
# docs/migration.md names what was read): canonical name -> (spellings, PET_
# name or None for the flags argparse gives no env default).
TORCHRUN = {
    "--nnodes": (["--nnodes"], "PET_NNODES"),
    "--nproc-per-node": (["--nproc-per-node", "--nproc_per_node"], "PET_NPROC_PER_NODE"),
    "--rdzv-backend": (["--rdzv-backend", "--rdzv_backend"], "PET_RDZV_BACKEND"),
    "--rdzv-endpoint": (["--rdzv-endpoint", "--rdzv_endpoint"], "PET_RDZV_ENDPOINT"),
    "--rdzv-id": (["--rdzv-id", "--rdzv_id"], "PET_RDZV_ID"),
    "--rdzv-conf": (["--rdzv-conf", "--rdzv_conf"], "PET_RDZV_CONF"),
    "--standalone": (["--standalone"], "PET_STANDALONE"),
    "--max-restarts": (["--max-restarts", "--max_restarts"], "PET_MAX_RESTARTS"),
    "--monitor-interval": (["--monitor-interval", "--monitor_interval"], "PET_MONITOR_INTERVAL"),
    "--start-method": (["--start-method", "--start_method"], "PET_START_METHOD"),
    "--event-log-handler": (["--event-log-handler", "--event_log_handler"], "PET_EVENT_LOG_HANDLER"),
    "--role": (["--role"], "PET_ROLE"),
    "--module": (["-m", "--module"], "PET_MODULE"),
    "--no-python": (["--no-python", "--no_python"], "PET_NO_PYTHON"),
    "--run-path": (["--run-path", "--run_path"], "PET_RUN_PATH"),
    "--log-dir": (["--log-dir", "--log_dir"], "PET_LOG_DIR"),
    "--redirects": (["-r", "--redirects"], "PET_REDIRECTS"),
    "--tee": (["-t", "--tee"], "PET_TEE"),
    "--local-ranks-filter": (["--local-ranks-filter", "--local_ranks_filter"], "PET_LOCAL_RANKS_FILTER"),
    "--duplicate-stdout-filters": (["--duplicate-stdout-filters", "--duplicate_stdout_filters"],
                                   "PET_DUPLICATE_STDOUT_FILTERS"),
    "--duplicate-stderr-filters": (["--duplicate-stderr-filters", "--duplicate_stderr_filters"],
                                   "PET_DUPLICATE_STDERR_FILTERS"),
    "--node-rank": (["--node-rank", "--node_rank"], "PET_NODE_RANK"),
    "--master-addr": (["--master-addr", "--master_addr"], "PET_MASTER_ADDR"),
    "--master-port": (["--master-port", "--master_port"], "PET_MASTER_PORT"),
    "--local-addr": (["--local-addr", "--local_addr"], "PET_LOCAL_ADDR"),
    "--logs-specs": (["--logs-specs", "--logs_specs"], None),
    "--numa-binding": (["--numa-binding", "--numa_binding"], None),
    "--signals-to-handle": (["--signals-to-handle", "--signals_to_handle"], "PET_SIGNALS_TO_HANDLE"),
    "--shutdown-timeout": (["--shutdown-timeout", "--shutdown_timeout"], "PET_SHUTDOWN_TIMEOUT"),
    "--virtual-local-rank": (["--virtual-local-rank", "--virtual_local_rank"], "PET_VIRTUAL_LOCAL_RANK"),
    "--help": (["-h", "--help"], None),  # argparse's own
}

KINDS = ("same", "refused", "ctrun-only")
# A row of flags.cc's BuildTable: {"--name", {"--a", "--b"}, "PET_NAME", ...
CODE_ROW = re.compile(r'\{\s*"(-[-\w]+)"\s*,\s*\{((?:\s*"-[-\w]+"\s*,?)+)\}\s*,\s*"([A-Z0-9_]*)"')


def read(*path):
    with open(os.path.join(SOURCE, *path), encoding="utf-8") as f:
        return f.read()


def code_flags(text):
    """flags.cc -> {canonical: (spellings, env or None)}."""
    rows = {}
    for name, spellings, env in CODE_ROW.findall(text):
        rows[name] = (re.findall(r'"(-[-\w]+)"', spellings), env or None)
    return rows


def table_rows(text):
    """migration.md's '## Flags' table -> [(spellings, env or None, kind, notes)]."""
    section = text.split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    lines = [l for l in section.splitlines() if l.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["flag", "env", "kind", "ctrun", "differs on purpose"], header
    rows = []
    for line in lines[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        assert len(cells) == 5, line
        spellings = re.findall(r"`(-[-\w]+)`", cells[0])
        envs = re.findall(r"`(PET_[A-Z0-9_]+)`", cells[1])
        rows.append((spellings, envs[0] if envs else None, cells[2], cells[4], line))
    return rows


class ParsersTest(unittest.TestCase):
    """The parsers of this test find what they must (they fail on a change of format)."""

    def test_code_rows_are_found(self):
        rows = code_flags('{"--a-b", {"--a-b", "--a_b"}, "PET_A_B", "1", K::kValue,\n'
                          ' {"--help", {"-h", "--help"}, "", nullptr, K::kAction')
        self.assertEqual(rows, {"--a-b": (["--a-b", "--a_b"], "PET_A_B"), "--help": (["-h", "--help"], None)})

    def test_table_rows_are_found(self):
        text = ("\n## Flags\n\n| flag | env | kind | ctrun | differs on purpose |\n|---|---|---|---|---|\n"
                "| `-r`, `--redirects` | `PET_REDIRECTS` | same | `0`\\|`1` | — |\n\n## Next\n| x |")
        rows = table_rows(text)
        self.assertEqual([r[:4] for r in rows], [(["-r", "--redirects"], "PET_REDIRECTS", "same", "—")])


# Variables ctrun reads for a torchrun flag that torchrun itself reads none
# for (the issue asked for them; the table's notes say so).
CTRUN_ADDED_ENV = {"--numa-binding": "PET_NUMA_BINDING"}


class MigrationTableTest(unittest.TestCase):
    def setUp(self):
        self.code = code_flags(read("launcher", "cli", "flags.cc"))
        self.rows = table_rows(read("docs", "migration.md"))
        self.assertGreater(len(self.code), 30, "flags.cc's rows were not found")

    def test_every_code_flag_is_one_table_row_and_back(self):
        by_spelling = {}
        for row in self.rows:
            for s in row[0]:
                self.assertNotIn(s, by_spelling, f"migration.md lists {s} twice")
                by_spelling[s] = row
        code_spellings = {s for spellings, _ in self.code.values() for s in spellings}
        self.assertEqual(sorted(set(by_spelling) - code_spellings), [],
                         "migration.md lists flags that launcher/cli/flags.cc does not have")
        self.assertEqual(sorted(code_spellings - set(by_spelling)), [],
                         "launcher/cli/flags.cc has flags that migration.md's table does not list")
        for name, (spellings, env) in self.code.items():
            row = by_spelling[name]
            self.assertEqual(sorted(row[0]), sorted(spellings), f"{name}: one row, every spelling")
            self.assertEqual(row[1], env, f"{name}: the env column must be {env or '—'}")

    def test_every_row_has_a_kind_and_refusals_say_why(self):
        for spellings, _, kind, notes, line in self.rows:
            self.assertIn(kind, KINDS, line)
            if kind == "refused":
                self.assertNotIn(notes, ("", "—"), f"a refused flag needs its reason: {line}")

    def test_torchruns_flags_are_all_there_and_only_ctrun_flags_are_ctrun_only(self):
        for name, (spellings, env) in TORCHRUN.items():
            self.assertIn(name, self.code, f"torchrun's {name} is not in launcher/cli/flags.cc")
            self.assertEqual(sorted(self.code[name][0]), sorted(spellings), f"{name}: torchrun's spellings")
            self.assertEqual(self.code[name][1], CTRUN_ADDED_ENV.get(name, env), f"{name}: torchrun's PET_ name")
        torch_spellings = {s for spellings, _ in TORCHRUN.values() for s in spellings}
        for spellings, _, kind, _, line in self.rows:
            if torch_spellings.intersection(spellings):
                self.assertNotEqual(kind, "ctrun-only", line)
            else:
                self.assertEqual(kind, "ctrun-only", line)


if __name__ == "__main__":
    unittest.main()
