"""What a survivor's Gloo collective does when a peer dies mid-training:
the measurement behind the cross-replica transport of fault-tolerant
training (docs/fault-tolerance.md, "Aborting a collective").

RANKS processes (torch's ProcessGroupGloo over loopback, PG_TIMEOUT seconds
of process-group timeout) all-reduce 256 KiB in a loop; rank RANKS-1
SIGKILLs itself at iteration 200. Each survivor records how long after the
kill its all_reduce raised. Two modes, interleaved over REPS rounds:
  linger   the survivors keep their process group (and sockets) after the
           error;
  cascade  a survivor that sees the error destroys its process group
           (dist.destroy_process_group), the teardown that would spread the
           error to the ranks that wait on it.
Printed per mode: the first and the last survivor's delay (medians over
rounds, with min-max); a survivor that never raised within PG_TIMEOUT + 5 s
counts as that bound. Ends with
  RESULT gloo_first_survivor_error_s <linger median>
  RESULT gloo_last_survivor_error_s <linger median>
  RESULT gloo_last_survivor_error_cascade_s <cascade median>
against the physical floor of the loopback (the victim's neighbours learn
of the kill from a reset connection within ~0.1 s)."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = int(os.environ.get("RANKS", "4"))
REPS = int(os.environ.get("REPS", "3"))
PG_TIMEOUT = float(os.environ.get("PG_TIMEOUT", "3"))
PYTHON = "/usr/bin/python3"


def store_server():
    """A TCPStore master in a process of its own (no rank hosts it, so a
    dying rank does not take it along); returns (process, port)."""
    code = ("import sys, time, torch.distributed as d\n"
            "s = d.TCPStore('127.0.0.1', 0, 1, True, wait_for_workers=False)\n"
            "print(s.port, flush=True)\n"
            "sys.stdin.read()\n")
    proc = subprocess.Popen([PYTHON, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def survivor_delays(out, bound):
    """Each survivor's delay, once every one wrote it or the wait's bound
    (start-up, then the kill, then at most `bound`) passed: a survivor whose
    collective never raised counts as the bound."""
    files = [os.path.join(out, f"rank-{r}") for r in range(RANKS - 1)]
    deadline = time.monotonic() + 60 + bound
    while not all(os.path.exists(f) for f in files) and time.monotonic() < deadline:
        time.sleep(0.05)
    delays = []
    for f in files:
        try:
            with open(f) as fh:
                delays.append(float(fh.read()))
        except (OSError, ValueError):
            delays.append(bound)
    return delays


def one_run(cascade):
    """The survivors' delays (seconds, sorted) in one run."""
    store, port = store_server()
    with tempfile.TemporaryDirectory() as out:
        bound = PG_TIMEOUT + 5
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(RANKS),
                   LINGER_S=str(60 + bound + 5),
                   PG_TIMEOUT=str(PG_TIMEOUT), VICTIM=str(RANKS - 1), KILL_AT="200", OUT_DIR=out,
                   KILLED_AT=os.path.join(out, "killed_at"), CASCADE="1" if cascade else "0", OMP_NUM_THREADS="1")
        ranks = [subprocess.Popen([PYTHON, os.path.join(HERE, "gloo_abort_rank.py")],
                                  env=dict(env, RANK=str(r)), stderr=subprocess.DEVNULL) for r in range(RANKS)]
        try:
            delays = survivor_delays(out, bound)
        finally:
            for proc in ranks:
                proc.kill()
                proc.wait()
    store.stdin.close()
    store.wait()
    return sorted(delays)


def summary(values):
    return statistics.median(values), min(values), max(values)


def main():
    runs = {"linger": [], "cascade": []}
    for rep in range(REPS):
        order = ["linger", "cascade"] if rep % 2 == 0 else ["cascade", "linger"]
        for mode in order:
            runs[mode].append(one_run(mode == "cascade"))
            print(f"round {rep + 1}/{REPS} {mode}: survivors raised after "
                  f"{', '.join(f'{d:.3f}' for d in runs[mode][-1])} s", file=sys.stderr, flush=True)
    print(f"\n{RANKS} ranks, Gloo over loopback, process-group timeout {PG_TIMEOUT:g} s, "
          f"{REPS} interleaved rounds; medians (min-max)\n")
    print(f"{'mode':<10} {'first survivor raised':>24} {'last survivor raised':>24}")
    medians = {}
    for mode, rounds in runs.items():
        first, last = summary([r[0] for r in rounds]), summary([r[-1] for r in rounds])
        medians[mode] = (first[0], last[0])
        print(f"{mode:<10} {first[0]:>9.3f} s ({first[1]:.3f}-{first[2]:.3f}) {last[0]:>9.3f} s "
              f"({last[1]:.3f}-{last[2]:.3f})")
    print()
    print(f"RESULT gloo_first_survivor_error_s {medians['linger'][0]:.3f}")
    print(f"RESULT gloo_last_survivor_error_s {medians['linger'][1]:.3f}")
    print(f"RESULT gloo_last_survivor_error_cascade_s {medians['cascade'][1]:.3f}")


if __name__ == "__main__":
    main()
