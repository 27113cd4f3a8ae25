"""Runs ctrun's fault matrix (tests/faults/matrix.py) N times, and torchrun
(torch 1.13, c10d, via torchrun_compat.py) beside it on the cases it can run.
Prints one row per run, a summary table (case, runs, recovered, outcome,
median recovery time, orphans) and ends with
  RESULT fault_recovered_pct <percent of ctrun case runs that passed>
  RESULT orphans <orphan processes left by ctrun over all runs>
Skipped and expected-fail cases are listed but not counted."""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "faults"))
import matrix  # noqa: E402


def summarize(title, results):
    print(f"\n{title}")
    print(f"{'case':<18} {'runs':>4} {'recov':>5} {'orphans':>7} {'median_s':>8}  outcome (last run) / note")
    for name, _, _ in matrix.CASES:
        rs = [r for r in results if r.case == name]
        if not rs:
            continue
        counted = [r for r in rs if not r.skipped and not r.xfail]
        ok = sum(r.ok for r in counted)
        orphans = sum(r.orphans for r in rs)
        times = [r.recovery_s for r in counted if r.ok and r.recovery_s is not None]
        med = f"{statistics.median(times):.2f}" if times else "-"
        last = rs[-1]
        note = last.skipped or last.xfail or ("" if last.ok else last.detail[:80])
        recov = f"{ok}/{len(counted)}" if counted else "-"
        print(f"{name:<18} {len(rs):>4} {recov:>5} {orphans:>7} {med:>8}  {last.outcome}"
              + (f" [{note}]" if note else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each case (default 3)")
    ap.add_argument("--cases", default="", help="comma list of case names (default: all)")
    ap.add_argument("--no-torchrun", action="store_true", help="skip the torchrun reference runs")
    args = ap.parse_args()
    names = [n for n, _, _ in matrix.CASES]
    if args.cases:
        names = [n for n in args.cases.split(",") if n in names]

    ctrun, torchrun = [], []
    print(matrix.HEADER, flush=True)
    for i in range(args.runs):
        for name in names:
            res = matrix.run_case(name)
            ctrun.append(res)
            print(f"ctrun    #{i + 1} " + res.row(), flush=True)
            if not args.no_torchrun and name in matrix.TORCHRUN_CASES:
                res = matrix.run_case(name, launcher="torchrun")
                torchrun.append(res)
                print(f"torchrun #{i + 1} " + res.row(), flush=True)

    summarize(f"ctrun fault matrix ({args.runs} runs)", ctrun)
    if torchrun:
        summarize(f"torchrun 1.13 (c10d), same cases ({args.runs} runs)", torchrun)
    counted = [r for r in ctrun if not r.skipped and not r.xfail]
    pct = 100.0 * sum(r.ok for r in counted) / len(counted) if counted else 0.0
    if torchrun:
        tr = [r for r in torchrun if not r.skipped]
        tpct = 100.0 * sum(r.ok for r in tr) / len(tr) if tr else 0.0
        print(f"\ntorchrun: recovered {tpct:.1f}% of {len(tr)} runs, {sum(r.orphans for r in tr)} orphans")
    print(f"RESULT fault_recovered_pct {pct:.1f}")
    print(f"RESULT orphans {sum(r.orphans for r in ctrun)}")


if __name__ == "__main__":
    main()
