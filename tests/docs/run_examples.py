#!/usr/bin/env python3
"""Runs the console examples of README.md and docs/*.md against a build, the
way trycmd and cram do: every ```console block is a test.

    ```console
    $ ctrun --nnodes 3:2 train.py
    ctrun: error: --nnodes '3:2': MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)
    [exit 2]
    ```

A line starting with `$ ` is a command; it goes on over the lines that
start with `> ` and the line after one ending in `\\`. The lines up to the
next command are its expected output, stdout and stderr together. `[exit N]` as the last of them: the command
exits with N (without it: 0). In expected output, `[..]` matches any text
within one line and a line `...` matches any number of lines (none
included). Trailing spaces and trailing empty lines are ignored.

The commands of one block run in order in one bash, so variables, `cd` and
background jobs (`&`) carry from one command to the next; jobs left running
are killed when the block ends. Each block gets a fresh scratch directory as
its working directory, holding `build` (a link to the build directory),
`examples` (a link to the source tree's examples/) and `train.py` (an empty
script, the docs' stand-in for the user's own); `ctrun`, `ctrund`,
`ctrun-fashion-mnist` and `ctrun-gpt` are on PATH; TMPDIR is the scratch
directory's `tmp/`; PET_*, TORCHELASTIC_*, CTRUN_* and LOGLEVEL are unset.

An HTML comment on the line before the fence changes a block:
    <!-- example: skip REASON -->     not run (counted as skipped)
    <!-- example: timeout SECONDS --> the block's limit (default 60 s)

Usage: run_examples.py [--build-dir DIR] [--source-dir DIR] [-v] [FILE[:LINE]...]
The build directory is --build-dir, else $CTRUN_BUILD_DIR, else SOURCE/build.
Exit status: 0 when every block that ran passed, 1 otherwise, 2 for bad use.
"""
import argparse
import dataclasses
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.dirname(os.path.dirname(HERE))
DEFAULT_TIMEOUT = 60
FENCE = re.compile(r"^(\s*)```console\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(\w+)\s*(.*?)\s*-->\s*$")
EXIT_LINE = re.compile(r"^\[exit (\d+)\]$")
CLEARED_ENV = re.compile(r"^(PET_|TORCHELASTIC_|CTRUN_|LOGLEVEL$|TORCH_ELASTIC_|OMP_NUM_THREADS$|PYTHONUNBUFFERED$)")


@dataclasses.dataclass
class Command:
    line: int  # 1-based line of the `$ ` in the file
    text: str
    expected: list  # expected output lines
    exit_code: int = 0


@dataclasses.dataclass
class Block:
    path: str  # as given (relative to the source dir)
    line: int  # line of the opening fence
    commands: list
    skip: str = None
    timeout: float = DEFAULT_TIMEOUT


class BlockError(Exception):
    pass


def parse_blocks(path, text):
    """The console blocks of one Markdown file."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        block = Block(path, i + 1, [])
        if i > 0 and (d := DIRECTIVE.match(lines[i - 1])):
            name, arg = d.group(1), d.group(2)
            if name == "skip":
                if not arg:
                    raise BlockError(f"{path}:{i}: `example: skip` needs a reason")
                block.skip = arg
            elif name == "timeout":
                block.timeout = float(arg)
            else:
                raise BlockError(f"{path}:{i}: unknown directive `example: {name}` (use skip or timeout)")
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append((i + 1, lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip()))
            i += 1
        if i == len(lines):
            raise BlockError(f"{path}:{block.line}: console block is not closed")
        i += 1
        current = None
        j = 0
        while j < len(body):
            number, line = body[j]
            if line.startswith("$ ") or line == "$":
                text_ = line[2:]
                while j + 1 < len(body) and (text_.endswith("\\") or body[j + 1][1].startswith("> ")):
                    j += 1
                    nxt = body[j][1]
                    text_ += "\n" + (nxt[2:] if nxt.startswith("> ") else nxt)
                current = Command(number, text_, [])
                block.commands.append(current)
            elif current is None:
                if line.strip():
                    raise BlockError(f"{path}:{number}: output before the first `$ ` command")
            else:
                current.expected.append(line)
            j += 1
        if not block.commands:
            raise BlockError(f"{path}:{block.line}: console block without a `$ ` command")
        for c in block.commands:
            while c.expected and not c.expected[-1].strip():
                c.expected.pop()
            if c.expected and (e := EXIT_LINE.match(c.expected[-1].strip())):
                c.exit_code = int(e.group(1))
                c.expected.pop()
                while c.expected and not c.expected[-1].strip():
                    c.expected.pop()
        blocks.append(block)
    return blocks


def line_pattern(expected):
    parts = expected.rstrip().split("[..]")
    return re.compile("^" + ".*".join(re.escape(p) for p in parts) + "$")


def matches(expected, actual):
    """Whether the output lines `actual` match `expected` (with `...` lines
    and `[..]` wildcards)."""
    expected = [e.rstrip() for e in expected]
    actual = [a.rstrip() for a in actual]
    memo = {}

    def at(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i] == "...":
            result = any(at(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = j < len(actual) and bool(line_pattern(expected[i]).match(actual[j])) and at(i + 1, j + 1)
        memo[key] = result
        return result

    return at(0, 0)


def block_env(scratch, build_dir):
    env = {k: v for k, v in os.environ.items() if not CLEARED_ENV.match(k)}
    bins = [os.path.join(build_dir, d) for d in ("launcher", "rendezvous", os.path.join("trainer", "apps"))]
    env["PATH"] = os.pathsep.join(bins + [env.get("PATH", "/usr/bin:/bin")])
    env["TMPDIR"] = os.path.join(scratch, "tmp")
    env["LC_ALL"] = "C.UTF-8"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_block(block, build_dir, source_dir):
    """Runs `block`; returns a list of failure texts (empty: it passed)."""
    scratch = tempfile.mkdtemp(prefix="ctrun-doc-")
    try:
        os.mkdir(os.path.join(scratch, "tmp"))
        os.symlink(build_dir, os.path.join(scratch, "build"))
        os.symlink(os.path.join(source_dir, "examples"), os.path.join(scratch, "examples"))
        open(os.path.join(scratch, "train.py"), "w").close()
        marker = f"@@ctrun-doc-{os.getpid()}-{time.monotonic_ns()}@@"
        script = ["exec 2>&1 </dev/null"]
        for c in block.commands:
            script.append(c.text)
            script.append(f"printf '\\n{marker} %d\\n' $?")
        script.append("kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; exit 0")
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=scratch, env=block_env(scratch, build_dir),
                                stdout=subprocess.PIPE, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=block.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the block left behind
        except ProcessLookupError:
            pass
        text = out.decode("utf-8", "replace")
        chunks = re.split(re.escape("\n" + marker) + r" (\d+)\n", text)
        failures = []
        for k, c in enumerate(block.commands):
            if 2 * k + 1 >= len(chunks):
                why = f"timed out after {block.timeout:g} s" if timed_out else "did not finish"
                failures.append(f"{block.path}:{c.line}: `{first_line(c)}` {why}; its output so far:\n"
                                + indent(chunks[-1] if chunks else ""))
                break
            actual = chunks[2 * k].split("\n")
            if actual == [""]:
                actual = []
            while actual and not actual[-1].strip():
                actual.pop()
            rc = int(chunks[2 * k + 1])
            if not matches(c.expected, actual):
                diff = difflib.unified_diff(c.expected, actual, "expected", "actual", lineterm="", n=2)
                failures.append(f"{block.path}:{c.line}: output of `{first_line(c)}` differs:\n"
                                + indent("\n".join(diff)))
            if rc != c.exit_code:
                failures.append(f"{block.path}:{c.line}: `{first_line(c)}` exited {rc}, the doc says "
                                f"{c.exit_code} ({'add' if c.exit_code == 0 else 'fix'} its `[exit N]` line)")
        return failures
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def first_line(command):
    line = command.text.split("\n")[0]
    return line if len(line) <= 80 else line[:77] + "..."


def indent(text):
    return "\n".join("    " + line for line in text.rstrip("\n").split("\n"))


def doc_files(source_dir):
    docs = os.path.join(source_dir, "docs")
    return ["README.md"] + [os.path.join("docs", f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source-dir", default=os.environ.get("CTRUN_SOURCE_DIR", DEFAULT_SOURCE))
    parser.add_argument("--build-dir", default=os.environ.get("CTRUN_BUILD_DIR"))
    parser.add_argument("-v", "--verbose", action="store_true", help="print every block's result")
    parser.add_argument("files", nargs="*", help="FILE or FILE:LINE (a block's fence line) to run only those")
    args = parser.parse_args(argv)
    source_dir = os.path.abspath(args.source_dir)
    build_dir = os.path.abspath(args.build_dir or os.path.join(source_dir, "build"))
    if not os.access(os.path.join(build_dir, "launcher", "ctrun"), os.X_OK):
        print(f"run_examples: no {build_dir}/launcher/ctrun: build first, or give --build-dir "
              "(or CTRUN_BUILD_DIR)", file=sys.stderr)
        return 2
    wanted = {}
    for f in args.files or doc_files(source_dir):
        path, _, line = f.partition(":")
        wanted.setdefault(os.path.relpath(os.path.abspath(os.path.join(source_dir, path)) if not os.path.isabs(path)
                                          else path, source_dir), set()).update({int(line)} if line else set())
    blocks = []
    try:
        for path, lines in wanted.items():
            with open(os.path.join(source_dir, path), encoding="utf-8") as f:
                found = parse_blocks(path, f.read())
            if lines - {b.line for b in found}:
                raise BlockError(f"{path}: no console block opens on line(s) "
                                 f"{', '.join(map(str, sorted(lines - {b.line for b in found})))} "
                                 f"(blocks open on {', '.join(str(b.line) for b in found)})")
            blocks += [b for b in found if not lines or b.line in lines]
    except (BlockError, OSError) as e:
        print(f"run_examples: {e}", file=sys.stderr)
        return 2

    start = time.monotonic()
    ran = skipped = failed = 0
    pages = set()
    for block in blocks:
        if block.skip:
            skipped += 1
            if args.verbose:
                print(f"skip {block.path}:{block.line}: {block.skip}")
            continue
        t0 = time.monotonic()
        failures = run_block(block, build_dir, source_dir)
        ran += 1
        pages.add(block.path)
        if failures:
            failed += 1
            for f in failures:
                print(f"FAIL {f}")
        elif args.verbose:
            print(f"ok   {block.path}:{block.line} ({time.monotonic() - t0:.1f} s)")
        sys.stdout.flush()
    print(f"run_examples: {ran} blocks ran from {len(pages)} pages, {skipped} skipped, {failed} failed "
          f"({time.monotonic() - start:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
