"""The logic of bench/logs.sh: the wall time of a job whose 2 ranks print
LINES lines each, with --share-logs against without, and the bytes per
shipped line that reach the rendezvous server.

Each run: ctrun --nnodes 1 --nproc-per-node 2 --rdzv-backend c10d against
one ctrund (started here, 127.0.0.1 port 0) with a fresh run id, its
console (and so, without --share-logs, the workers' own output) to a file
in $TMPDIR, timed from spawn to exit. The two kinds alternate (which goes
first alternates too); so does a third kind, --tee 3, which reads the
output through pipes as --share-logs does without shipping it (the floor of
any feature that sees every line). Without either flag the workers write
each line straight to the console file (one write() a line, WRITES below);
through the agent's pipes a line costs the worker a pipe write and the agent
writes the console 64 KiB at a time, so the piped kinds can be the faster
ones. Bytes on the wire: the protobuf bytes of the batches
the agent sent, divided by the lines in them, as the agent reports them
(LOGLEVEL=DEBUG: "share-logs: shipped N lines in M bytes"), without gRPC's
and HTTP/2's framing (5 + 9 bytes per batch of ~4,000 lines, in a few chunks).

Env: CTRUN_BUILD_DIR (./build), LINES (100000), REPS (7), WRITES (line: the
workers write each line with its own write(), as a training loop's
logging.StreamHandler or print(..., flush=True) does, set here with
PYTHONUNBUFFERED=1; block: Python's 8 KiB buffer).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
CTRUND = os.path.join(BUILD, "rendezvous", "ctrund")
LINES = int(os.environ.get("LINES", "100000"))
REPS = int(os.environ.get("REPS", "7"))
WRITES = os.environ.get("WRITES", "line")
RANKS = 2
PY = "/usr/bin/python3"
# A training loop's kind of line, ~60 bytes.
WORKER = ("import os, sys\n"
          "r = os.environ['RANK']\n"
          "w = sys.stdout.write\n"
          "for i in range(int(os.environ['LINES'])):\n"
          "    w(f'rank {r} step {i:7d} loss {1.0 / (i + 1):.6f} lr 0.000100 tok/s 123456\\n')\n")


# The kinds of run: their extra flags. "--tee 3" reads the workers' output
# through pipes as --share-logs does, without shipping it: the floor of any
# feature that sees every line.
KINDS = {"without": [], "tee": ["--tee", "3"], "with": ["--share-logs"]}


def run_job(endpoint, run_id, kind, out_dir):
    share = kind == "with"
    cmd = [CTRUN, "--nnodes", "1", "--nproc-per-node", str(RANKS), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--monitor-interval", "0.05"]
    cmd += KINDS[kind]
    cmd += ["--no-python", PY, "-c", WORKER]
    # The agent says at debug level what it shipped (lines, bytes) and how
    # long its last lines took to go; both kinds run with the same level.
    env = dict(os.environ, LINES=str(LINES), LOGLEVEL="DEBUG")
    env.pop("PYTHONUNBUFFERED", None)
    if WRITES == "line":
        env["PYTHONUNBUFFERED"] = "1"
    env.pop("CTRUN_RDZV_TOKEN", None)
    with open(os.path.join(out_dir, f"{run_id}.out"), "w") as out:
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=env, timeout=600)
        wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"logs.py: {' '.join(cmd[:12])} ... exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    if "share-logs: dropped" in proc.stderr:
        print(f"  note: {run_id}: {proc.stderr.strip().splitlines()[-1]}", flush=True)
    with open(os.path.join(out_dir, f"{run_id}.out")) as f:
        shown = sum(1 for _ in f)
    if shown != RANKS * LINES:
        sys.exit(f"logs.py: {run_id} showed {shown} lines, not {RANKS * LINES}")
    m = re.search(r"share-logs: shipped (\d+) lines in (\d+) bytes, dropped (\d+); the last ones took ([\d.]+) s",
                  proc.stderr)
    if share and not m:
        sys.exit(f"logs.py: {run_id}: the agent did not say what it shipped:\n{proc.stderr[-3000:]}")
    shipped = {"lines": int(m.group(1)), "bytes": int(m.group(2)), "dropped": int(m.group(3)),
               "flush_s": float(m.group(4))} if m else None
    return wall, shipped


def main():
    if WRITES not in ("line", "block"):
        sys.exit(f"logs.py: WRITES={WRITES!r}: use line or block")
    for f in (CTRUN, CTRUND):
        if not os.access(f, os.X_OK):
            sys.exit(f"logs.py: {f} is not built (build it, or set CTRUN_BUILD_DIR)")
    daemon = subprocess.Popen([CTRUND, "--listen", "127.0.0.1:0", "--closed-run-ttl", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        endpoint = re.search(r"serving rendezvous on (\S+)", daemon.stdout.readline()).group(1)
        print(f"{RANKS} ranks x {LINES} lines ({WRITES} writes), {REPS} interleaved runs per kind, ctrund at {endpoint}; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
        walls = {kind: [] for kind in KINDS}
        shipped = []
        with tempfile.TemporaryDirectory() as out_dir:
            run_job(endpoint, "warmup", "with", out_dir)
            for i in range(REPS):
                order = list(KINDS)
                for name in order if i % 2 == 0 else order[::-1]:
                    wall, sent = run_job(endpoint, f"logs-{i}-{name}", name, out_dir)
                    walls[name].append(wall)
                    if sent:
                        shipped.append(sent)
                print(f"  run {i + 1}: without {walls['without'][-1]:.3f} s, --tee 3 {walls['tee'][-1]:.3f} s, "
                      f"--share-logs {walls['with'][-1]:.3f} s", flush=True)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

    med = lambda v: benchjson.spread(v)["median"]
    ratio = med(walls["with"]) / med(walls["without"])
    per_line = med([s["bytes"] / s["lines"] for s in shipped if s["lines"]])
    dropped = sum(s["dropped"] for s in shipped)
    print(f"\nwall time, median (min–max) of {REPS}; load after {os.getloadavg()[0]:.2f}")
    print(f"{'':<14} {'wall s':>22} {'/ without':>8}")
    labels = {"without": "without", "tee": "--tee 3", "with": "--share-logs"}
    for name in KINDS:
        print(f"{labels[name]:<14} {benchjson.fmt(walls[name], digits=3):>22} {med(walls[name]) / med(walls['without']):8.3f}")
    print(f"--share-logs / --tee 3 (the shipping alone, on the same pipes): "
          f"{med(walls['with']) / med(walls['tee']):.3f}")
    print(f"ratio {ratio:.3f}; {per_line:.1f} protobuf bytes per line on the wire (lines of 59 bytes with their newline), "
          f"{dropped} lines dropped in all; the last lines took {benchjson.fmt([s['flush_s'] for s in shipped], 1e3, 1)}"
          f" ms to go at the end of a job")
    results = {"logs_overhead_ratio": ratio, "logs_bytes_per_line": per_line,
               "logs_tee_ratio": med(walls["tee"]) / med(walls["without"])}
    doc = {
        "config": {"ranks": RANKS, "lines": LINES, "reps": REPS, "writes": WRITES},
        "wall_s": walls, "shipped": shipped, "results": results,
        "plots": [{
            "file": "logs-wall.png", "title": f"{RANKS} ranks x {LINES} lines: wall time with and without --share-logs",
            "x": "run", "y": "wall s (median, min-max)", "log_x": False, "log_y": False,
            "series": {labels[k]: [benchjson.point("job", walls[k])] for k in KINDS},
        }],
    }
    path = benchjson.write("logs", doc, ROOT)
    print(f"\nmachine-readable results: {path}")
    for name in ("logs_overhead_ratio", "logs_bytes_per_line"):
        print(f"RESULT {name} {results[name]:.3f}")


if __name__ == "__main__":
    main()
