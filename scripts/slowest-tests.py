#!/usr/bin/env python3
"""scripts/slowest-tests.py [-n N] [--title T] JUNIT.xml...

Prints the N (25) slowest tests of one or more CTest runs, from the JUnit
files that `ctest --output-junit` wrote, slowest first, with their seconds
and status, and the stage's total of test seconds. scripts/test.sh and
scripts/test-sanitized.sh print it at the end of each stage."""
import argparse
import os
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(name, seconds, status) for every test case of one JUnit file."""
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        else:
            status = "passed" if status == "run" else status
        yield case.get("name"), float(case.get("time") or 0), status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=25)
    ap.add_argument("--title", default="slowest tests")
    ap.add_argument("junit", nargs="+")
    a = ap.parse_args()
    rows = []
    for path in a.junit:
        if not os.path.exists(path):
            print(f"slowest-tests: {path}: no such file (did ctest run?)", file=sys.stderr)
            continue
        rows += list(cases(path))
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    print(f"\n{a.title}: the {min(a.n, len(rows))} slowest of {len(rows)} tests "
          f"({total:.0f} s of tests in all)")
    for name, secs, status in rows[:a.n]:
        print(f"  {secs:8.1f} s  {name}{'' if status == 'passed' else '  (' + status + ')'}")


if __name__ == "__main__":
    main()
