"""The docs cannot drift from the code: every message docs/troubleshooting.md
explains still exists in the sources, docs/migration.md covers every flag and
variable `ctrun --help` lists, and relative links between docs resolve."""
import os
import re
import subprocess
import sys
import unittest

import harness as h

SOURCE = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(h.HERE)))
PLACEHOLDER = re.compile(r"<[^>]*>")


def string_literals(code):
    """The C++ string literals of `code`, adjacent ones joined as the compiler
    joins them ("a " "b" -> "a b"); comments and char literals skipped."""
    out, i, n = [], 0, len(code)
    joining = False  # the last token was a string literal
    while i < n:
        c = code[i]
        if code.startswith("//", i):
            i = code.find("\n", i)
            i = n if i < 0 else i
        elif code.startswith("/*", i):
            i = code.find("*/", i + 2)
            i = n if i < 0 else i + 2
        elif code.startswith('R"', i) and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            open_paren = code.index("(", i)
            close = ")" + code[i + 2:open_paren] + '"'
            end = code.index(close, open_paren)
            text = code[open_paren + 1:end]
            out[-1:] = [out[-1] + text] if joining else [*out[-1:], text]
            joining, i = True, end + len(close)
        elif c == '"':
            j, buf = i + 1, []
            while code[j] != '"':
                if code[j] == "\\":
                    buf.append({"n": "\n", "t": "\t"}.get(code[j + 1], code[j + 1]))
                    j += 2
                else:
                    buf.append(code[j])
                    j += 1
            text = "".join(buf)
            if joining:
                out[-1] += text
            else:
                out.append(text)
            joining, i = True, j + 1
        elif c == "'" and i > 0 and code[i - 1].isdigit():  # a digit separator: 1'000
            i += 1
        elif c == "'":
            j = i + 1
            while code[j] != "'":
                j += 2 if code[j] == "\\" else 1
            joining, i = False, j + 1
        else:
            if not c.isspace():
                joining = False
            i += 1
    return out


def source_strings():
    strings = []
    for folder in ("base", "launcher", "rendezvous"):
        for root, dirs, names in sorted(os.walk(os.path.join(SOURCE, folder))):
            dirs.sort()
            for name in sorted(names):
                if name.endswith((".cc", ".h")):
                    with open(os.path.join(root, name), encoding="utf-8") as f:
                        strings += string_literals(f.read())
    return strings


def read_doc(name):
    with open(os.path.join(SOURCE, "docs", name), encoding="utf-8") as f:
        return f.read()


class TroubleshootingTest(unittest.TestCase):
    def test_string_literals_are_joined_like_the_compiler_does(self):
        code = 'x = "a \\"b\\" " // "no"\n  "c"; char q = \'"\'; f("d", /* "e" */ "f", 1\'000);'
        self.assertEqual(string_literals(code), ['a "b" c', "d", "f"])

    def test_every_documented_message_is_in_the_sources(self):
        headings = re.findall(r"^### `(.+)`\s*$", read_doc("troubleshooting.md"), re.M)
        self.assertGreater(len(headings), 60)
        strings = source_strings()
        missing = []
        for message in headings:
            pieces = [p for p in PLACEHOLDER.split(message) if len(p.strip()) >= 4]
            self.assertTrue(pieces, f"'{message}' has no text to look for")
            missing += [f"'{p}' (from '{message}')" for p in pieces if not any(p in s for s in strings)]
        self.assertEqual(missing, [], "troubleshooting.md: these are no longer in the sources:\n" + "\n".join(missing))


class MigrationTest(unittest.TestCase):
    def test_every_flag_and_variable_of_help_is_in_the_table(self):
        text = read_doc("migration.md")
        out = subprocess.run([h.ctrun_bin(), "--help"], capture_output=True, text=True, check=True).stdout
        names = set()
        for line in out.splitlines():
            if line.startswith("  -"):
                names.update(w.rstrip(",") for w in line.split() if w.startswith("-"))
            elif re.match(r"^  [A-Z][A-Z0-9_]+\s", line):  # the Environment section
                names.add(line.split()[0])
        names.update(re.findall(r"\bPET_[A-Z0-9_]+", out))
        self.assertIn("PET_NNODES", names)
        for name in sorted(names):
            self.assertRegex(text, rf"`{re.escape(name)}[ `=]", f"migration.md does not mention {name}")


class ConsoleExamplesTest(unittest.TestCase):
    """The console blocks tests/docs/run_examples.py runs (CTest docs.examples)
    all parse, cover the pages a newcomer follows, and say why when skipped."""

    def blocks(self):
        sys.path.insert(0, os.path.join(SOURCE, "tests", "docs"))
        try:
            import run_examples
        finally:
            sys.path.pop(0)
        found = []
        for path in run_examples.doc_files(SOURCE):
            with open(os.path.join(SOURCE, path), encoding="utf-8") as f:
                found += run_examples.parse_blocks(path, f.read())
        return found

    def test_enough_blocks_run_from_the_pages_a_newcomer_follows(self):
        blocks = self.blocks()
        ran = [b for b in blocks if not b.skip]
        self.assertGreaterEqual(len(ran), 60)
        pages = {b.path for b in ran}
        for page in ("quickstart", "migration", "troubleshooting", "metrics", "events", "trainer"):
            self.assertIn(f"docs/{page}.md", pages)
        for b in blocks:
            if b.skip:
                self.assertGreater(len(b.skip.split()), 2, f"{b.path}:{b.line}: say why it is skipped")

    def test_every_usage_error_example_shows_exit_2(self):
        for b in self.blocks():
            for c in b.commands:
                if any(line.startswith("ctrun: error:")
                       or line.startswith("ctrund: ") and line.endswith("(see ctrund --help)")
                       for line in c.expected):
                    self.assertEqual(c.exit_code, 2, f"{b.path}:{c.line}: a usage error exits 2")


class LinksTest(unittest.TestCase):

    def test_relative_links_resolve(self):
        docs = os.path.join(SOURCE, "docs")
        files = [os.path.join(SOURCE, "README.md")] + [
            os.path.join(docs, f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
        missing = set()
        for path in files:
            with open(path, encoding="utf-8") as f:
                for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read()):
                    if "://" in target or target.startswith("mailto:"):
                        continue
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                    if not os.path.exists(resolved):
                        missing.add((os.path.relpath(path, SOURCE), os.path.relpath(resolved, SOURCE)))
        self.assertEqual(sorted(missing), [], "dangling links")


if __name__ == "__main__":
    unittest.main()
