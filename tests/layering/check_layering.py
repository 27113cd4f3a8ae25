#!/usr/bin/env python3
"""Checks every #include of base/, launcher/, rendezvous/ and trainer/
against the table in allowed.txt (beside this file).

Usage: check_layering.py [SOURCE_ROOT]   (default: the repository root)
Prints one line per include that breaks the table, naming the file, the
line, the include and the rule, and exits 1; exits 0 when none does, and 2
when the table itself is malformed.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKED_TOP = ("base", "launcher", "rendezvous", "trainer")
SOURCE_EXTS = (".h", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# Outside headers by family (`forbids` in the table).
FAMILIES = {
    "torch": lambda h: h.split("/")[0] in ("torch", "ATen", "c10", "c10d", "caffe2", "gloo"),
    "grpc": lambda h: h.split("/")[0] in ("grpc", "grpcpp", "grpc++", "absl") or h.endswith(".grpc.pb.h"),
    "protobuf": lambda h: h.startswith("google/protobuf/") or h.endswith(".pb.h"),
    "boost": lambda h: h.startswith("boost/"),
    # pure.txt's families
    "asio": lambda h: h.startswith("boost/asio"),
    "spdlog": lambda h: h.startswith("spdlog/"),
    "process": lambda h: h.startswith("launcher/process/") or h in ("unistd.h", "sys/wait.h", "spawn.h"),
    "clock": lambda h: h in ("ctime", "time.h", "sys/time.h"),
    "io": lambda h: h in ("fstream", "iostream", "cstdio", "filesystem", "sys/socket.h", "fcntl.h"),
}
CLOCK_READ = re.compile(r"\bnow\(\)")


class TableError(Exception):
    pass


def rows(path, shape):
    """(line number, cells) of each row of a table file: `shape` names its
    cells ('folder | may include | forbids'); comments and blank lines skipped."""
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            cells = [c.strip() for c in line.split("|")]
            if len(cells) != shape.count("|") + 1:
                raise TableError(f"{path}:{number}: expected '{shape}', got {raw.strip()!r}")
            yield number, cells


def families(path, number, cell):
    """The header families a `forbids` cell names ('-': none)."""
    named = set() if cell == "-" else set(cell.split())
    unknown = named - FAMILIES.keys()
    if unknown:
        raise TableError(f"{path}:{number}: unknown header family {sorted(unknown)} "
                         f"(known: {', '.join(sorted(FAMILIES))})")
    return named


def read_table(path):
    """Returns {folder: (set of folders it may include, set of forbidden families)}."""
    table = {}
    for number, (folder, allowed, forbids) in rows(path, "folder | may include | forbids"):
        if folder in table:
            raise TableError(f"{path}:{number}: folder {folder} is listed twice")
        table[folder] = (set() if allowed == "-" else set(allowed.split()), families(path, number, forbids))
    for folder, (allowed, _) in table.items():
        for target in allowed:
            if target not in table:
                raise TableError(f"{path}: {folder} may include {target}, which is not in the table")
    return table


def folder_of(path, table):
    """The folder of the table that holds `path` directly (None if none)."""
    folder = os.path.dirname(path)
    return folder if folder in table else None


def source_files(root):
    for top in CHECKED_TOP:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXTS):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def check(root, table):
    """Returns the list of violations, one line each."""
    problems = []
    for rel in source_files(root):
        home = folder_of(rel, table)
        if home is None:
            problems.append(f"{rel}: its folder is not in tests/layering/allowed.txt; add a line for it")
            continue
        allowed, forbids = table[home]
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(2)
                for family in sorted(forbids):
                    if FAMILIES[family](header):
                        problems.append(f"{rel}:{number}: includes {header} ({family}); "
                                        f"{home}/ may not include {family} headers")
                if m.group(1) != '"' or not os.path.isfile(os.path.join(root, header)):
                    continue
                target = folder_of(header, table)
                if target is None:
                    problems.append(f"{rel}:{number}: includes {header}, outside the folders of "
                                    f"tests/layering/allowed.txt")
                    continue
                if target == home or target == "base" or target in allowed:
                    continue
                problems.append(f"{rel}:{number}: includes {header}; {home}/ may include "
                                f"{', '.join(sorted(allowed)) or 'only itself and base'}, not {target}/")
    return problems


def read_pure(path):
    """Returns {file: set of forbidden families} from pure.txt."""
    pure = {}
    for number, (rel, forbids) in rows(path, "file | forbids"):
        pure[rel] = families(path, number, forbids)
    return pure


def check_pure(root, pure):
    """The files of pure.txt: no forbidden header, no clock read."""
    problems = []
    for rel, forbids in sorted(pure.items()):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            problems.append(f"{rel}: listed in tests/layering/pure.txt, but there is no such file")
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m:
                    for family in sorted(forbids):
                        if FAMILIES[family](m.group(2)):
                            problems.append(f"{rel}:{number}: includes {m.group(2)} ({family}); "
                                            f"it must stay pure (tests/layering/pure.txt)")
                elif CLOCK_READ.search(line.split("//", 1)[0]):
                    problems.append(f"{rel}:{number}: reads a clock; pure code is given the time "
                                    f"(tests/layering/pure.txt)")
    return problems


def main(argv):
    root = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.dirname(os.path.dirname(HERE))
    table_path = os.path.join(root, "tests", "layering", "allowed.txt")
    if not os.path.isfile(table_path):
        table_path = os.path.join(HERE, "allowed.txt")
    try:
        table = read_table(table_path)
    except TableError as e:
        print(f"layering: {e}", file=sys.stderr)
        return 2
    problems = check(root, table)
    pure_path = os.path.join(os.path.dirname(table_path), "pure.txt")
    if os.path.isfile(pure_path):
        try:
            problems += check_pure(root, read_pure(pure_path))
        except TableError as e:
            print(f"layering: {e}", file=sys.stderr)
            return 2
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} include(s) break tests/layering/allowed.txt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
