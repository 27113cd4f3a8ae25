"""The docs-example runner itself: how it reads a block, what its wildcards
match, and that an example whose output was changed by hand fails, naming
the file and line (run against the real ctrun of the build)."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import run_examples as rx

BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(rx.DEFAULT_SOURCE, "build"))

PAGE = textwrap.dedent("""\
    # A page

    <!-- example: skip needs two hosts -->
    ```console
    $ ctrun --nnodes 2 train.py
    ```

    ```console
    $ echo one \\
        two
    one two
    $ for x in a b; do
    >   echo $x
    > done
    a
    b
    $ ctrun --nnodes 3:2 train.py
    ctrun: error: --nnodes '3:2': MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)
    [exit 2]
    ```
    """)


class ParseTest(unittest.TestCase):
    def test_commands_outputs_exit_codes_and_skips(self):
        blocks = rx.parse_blocks("page.md", PAGE)
        self.assertEqual([b.line for b in blocks], [4, 8])
        self.assertEqual(blocks[0].skip, "needs two hosts")
        echo, loop, bad = blocks[1].commands
        self.assertEqual((echo.line, echo.text, echo.expected, echo.exit_code),
                         (9, "echo one \\\n    two", ["one two"], 0))
        self.assertEqual(loop.text, "for x in a b; do\n  echo $x\ndone")
        self.assertEqual((bad.line, bad.exit_code), (17, 2))

    def test_bad_blocks_are_refused_with_their_line(self):
        for text, why in [("```console\n$ true\n", "page.md:1: console block is not closed"),
                          ("<!-- example: skip -->\n```console\n$ true\n```\n", "needs a reason"),
                          ("```console\nhello\n```\n", "page.md:2: output before the first")]:
            with self.assertRaisesRegex(rx.BlockError, why):
                rx.parse_blocks("page.md", text)


class MatchTest(unittest.TestCase):
    def test_wildcards(self):
        self.assertTrue(rx.matches(["pid [..] exited", "..."], ["pid 42 exited", "a", "b"]))
        self.assertTrue(rx.matches(["a", "...", "z"], ["a", "z"]))
        self.assertTrue(rx.matches(["x[..]"], ["x"]))
        self.assertFalse(rx.matches(["a", "...", "z"], ["a", "y"]))
        self.assertFalse(rx.matches(["pid [..] exited"], ["pid 42 exited twice"]))
        self.assertFalse(rx.matches(["a.c"], ["abc"]))  # no regular expressions
        self.assertFalse(rx.matches(["a"], ["a", "b"]))


class RunTest(unittest.TestCase):
    def run_page(self, text):
        with tempfile.TemporaryDirectory() as source:
            os.mkdir(os.path.join(source, "docs"))
            os.mkdir(os.path.join(source, "examples"))
            with open(os.path.join(source, "docs", "page.md"), "w") as f:
                f.write(text)
            return subprocess.run([sys.executable, rx.__file__, "--source-dir", source, "--build-dir", BUILD,
                                   "docs/page.md"], capture_output=True, text=True, timeout=60)

    def test_the_page_passes_as_written(self):
        out = self.run_page(PAGE)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("run_examples: 1 blocks ran from 1 pages, 1 skipped, 0 failed", out.stdout)

    def test_an_output_changed_by_hand_fails_naming_file_and_line(self):
        out = self.run_page(PAGE.replace("MIN must not exceed MAX", "MIN must exceed MAX"))
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("FAIL docs/page.md:17: output of `ctrun --nnodes 3:2 train.py` differs", out.stdout)
        self.assertIn("+ctrun: error: --nnodes '3:2': MIN must not exceed MAX", out.stdout)

    def test_a_wrong_exit_code_fails(self):
        out = self.run_page(PAGE.replace("[exit 2]", "[exit 1]"))
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("FAIL docs/page.md:17: `ctrun --nnodes 3:2 train.py` exited 2, the doc says 1", out.stdout)

    def test_a_block_runs_in_one_shell_in_a_scratch_directory(self):
        page = textwrap.dedent("""\
            ```console
            $ x=5; touch here; ls
            build
            examples
            here
            tmp
            train.py
            $ echo $x $TMPDIR
            5 [..]/tmp
            $ sleep 100 &
            ```
            """)
        out = self.run_page(page)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
