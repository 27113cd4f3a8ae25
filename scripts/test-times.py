#!/usr/bin/env python3
"""scripts/test-times.py slowest [-n N] [--title T] JUNIT.xml...
scripts/test-times.py passes JUNIT.xml...

Reads the JUnit files that `ctest --output-junit` wrote.
  slowest: the N (25) slowest tests of one or more CTest runs, slowest first,
           with their seconds and status, and the stage's total of test
           seconds (scripts/test.sh and scripts/test-sanitized.sh print it at
           the end of each stage).
  passes:  one file per round of the same tests (scripts/soak-tests.sh): a
           table of each test's pass count, median and slowest seconds;
           exits 1 unless every test passed in every round."""
import argparse
import os
import statistics
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(name, seconds, status) for every test case of one JUnit file; status
    is passed, failed, skipped or CTest's own word (notrun, disabled)."""
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        elif status == "run":
            status = "passed"
        yield case.get("name"), float(case.get("time") or 0), status


def read(paths):
    """[[case of one file]] for the files that exist (a missing one is said on stderr)."""
    runs = []
    for path in paths:
        if os.path.exists(path):
            runs.append(list(cases(path)))
        else:
            print(f"test-times: {path}: no such file (did ctest run?)", file=sys.stderr)
    return runs


def slowest(a):
    rows = sorted((row for run in read(a.junit) for row in run), key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    print(f"\n{a.title}: the {min(a.n, len(rows))} slowest of {len(rows)} tests "
          f"({total:.0f} s of tests in all)")
    for name, secs, status in rows[:a.n]:
        print(f"  {secs:8.1f} s  {name}{'' if status == 'passed' else '  (' + status + ')'}")
    return 0


def passes(a):
    rounds = len(a.junit)
    by_test = {}
    for run in read(a.junit):
        for name, secs, status in run:
            by_test.setdefault(name, []).append((status == "passed", secs))
    bad = 0
    print("\n| test | passed | median s | slowest s |\n|---|---|---|---|")
    for name in sorted(by_test, key=lambda n: (sum(ok for ok, _ in by_test[n]), n)):
        passed = sum(ok for ok, _ in by_test[name])
        times = [t for _, t in by_test[name]]
        bad += passed < rounds
        print(f"| {name} | {passed}/{rounds} | {statistics.median(times):.1f} | {max(times):.1f} |")
    print(f"\nsoak: {len(by_test) - bad} of {len(by_test)} tests passed {rounds}/{rounds}")
    return 1 if bad or not by_test else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("slowest")
    s.add_argument("-n", type=int, default=25)
    s.add_argument("--title", default="slowest tests")
    s.add_argument("junit", nargs="+")
    p = sub.add_parser("passes")
    p.add_argument("junit", nargs="+")
    a = ap.parse_args()
    return slowest(a) if a.command == "slowest" else passes(a)


if __name__ == "__main__":
    sys.exit(main())
