"""The tree's includes follow tests/layering/allowed.txt, and the checker
catches an include of the wrong direction or a forbidden outside header."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("CTRUN_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
CHECKER = os.path.join(HERE, "check_layering.py")


def run_checker(root):
    p = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class TreeFollowsTable(unittest.TestCase):
    def test_every_include_is_allowed(self):
        rc, out, err = run_checker(ROOT)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out, "")

    def test_architecture_doc_shows_the_table(self):
        with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
            doc = f.read()
        with open(os.path.join(HERE, "allowed.txt"), encoding="utf-8") as f:
            rows = [l.rstrip() for l in f if l.strip() and not l.lstrip().startswith("#")]
        for row in rows:
            self.assertIn(row, doc, "docs/architecture.md must show tests/layering/allowed.txt as it is")


class CheckerCatches(unittest.TestCase):
    """A small tree in a temporary folder, with the real table."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="ctrun-layering-")
        os.makedirs(os.path.join(self.root, "tests", "layering"))
        shutil.copy(os.path.join(HERE, "allowed.txt"), os.path.join(self.root, "tests", "layering"))
        self.write("base/status.h", "#pragma once\n")
        self.write("rendezvous/grpc/server/server.h", '#pragma once\n#include "rendezvous/machine/machine.h"\n')
        self.write("rendezvous/machine/machine.h", '#pragma once\n#include "base/status.h"\n#include <map>\n')
        self.write("launcher/cli/flags.h", '#pragma once\n#include "base/status.h"\n')
        self.write("launcher/rdzv/setup.h", '#pragma once\n#include "launcher/cli/flags.h"\n')

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_clean_tree_passes(self):
        self.assertEqual(run_checker(self.root)[0], 0)

    def test_include_running_back_up_fails_naming_file_and_include(self):
        self.write("launcher/cli/config.cc", '#include "launcher/cli/flags.h"\n#include "launcher/rdzv/setup.h"\n')
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/cli/config.cc:2: includes launcher/rdzv/setup.h", out)
        self.assertIn("not launcher/rdzv/", out)

    def test_pure_machine_may_not_include_grpc_folder_or_headers(self):
        self.write("rendezvous/machine/events.cc",
                   '#include "rendezvous/grpc/server/server.h"\n#include <grpcpp/grpcpp.h>\n#include <boost/asio.hpp>\n')
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("rendezvous/machine/events.cc:1: includes rendezvous/grpc/server/server.h", out)
        self.assertIn("rendezvous/machine/events.cc:2: includes grpcpp/grpcpp.h (grpc)", out)
        self.assertIn("rendezvous/machine/events.cc:3: includes boost/asio.hpp (boost)", out)

    def test_only_trainer_includes_torch(self):
        self.write("launcher/cli/nproc.cc", "#include <torch/torch.h>\n")
        self.write("trainer/comm/communicator.cc", "#include <torch/torch.h>\n")
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/cli/nproc.cc:1: includes torch/torch.h (torch)", out)
        self.assertNotIn("trainer/comm/communicator.cc", out)

    def test_nothing_below_apps_includes_apps(self):
        self.write("trainer/apps/train_flags.h", "#pragma once\n")
        self.write("trainer/parallel/ddp.cc", '#include "trainer/apps/train_flags.h"\n')
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("trainer/parallel/ddp.cc:1: includes trainer/apps/train_flags.h", out)

    def test_folder_missing_from_table_fails(self):
        self.write("launcher/newthing/x.cc", '#include "base/status.h"\n')
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/newthing/x.cc: its folder is not in tests/layering/allowed.txt", out)

    def test_malformed_table_is_a_usage_error(self):
        with open(os.path.join(self.root, "tests", "layering", "allowed.txt"), "a", encoding="utf-8") as f:
            f.write("launcher/extra | launcher/nowhere | -\n")
        rc, _, err = run_checker(self.root)
        self.assertEqual(rc, 2)
        self.assertIn("launcher/nowhere, which is not in the table", err)

    def write_pure(self, rel):
        self.write("tests/layering/pure.txt", f"{rel} | asio spdlog process clock io\n")

    def test_a_pure_file_including_asio_or_spdlog_fails(self):
        self.write_pure("launcher/cli/flags.h")
        self.write("launcher/cli/flags.h", '#pragma once\n#include <boost/asio/io_context.hpp>\n#include <spdlog/spdlog.h>\n')
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/cli/flags.h:2: includes boost/asio/io_context.hpp (asio)", out)
        self.assertIn("launcher/cli/flags.h:3: includes spdlog/spdlog.h (spdlog)", out)

    def test_a_pure_file_reading_a_clock_fails(self):
        self.write_pure("launcher/cli/flags.h")
        self.write("launcher/cli/flags.h", "#pragma once\n// now() in a comment is fine\nauto t = Clock::now();\n")
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/cli/flags.h:3: reads a clock", out)
        self.assertNotIn("flags.h:2", out)

    def test_a_pure_file_that_is_gone_fails(self):
        self.write_pure("launcher/cli/gone.h")
        rc, out, _ = run_checker(self.root)
        self.assertEqual(rc, 1)
        self.assertIn("launcher/cli/gone.h: listed in tests/layering/pure.txt", out)


if __name__ == "__main__":
    unittest.main()
