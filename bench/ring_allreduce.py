"""The fault-tolerant mode's abortable ring all-reduce against torch's Gloo
all-reduce, side by side in one run (docs/fault-tolerance.md).

RANKS processes on the loopback sum SIZES (MiB of float32, comma-separated)
in place, REPS timed calls per run after 2 untimed ones; ROUNDS interleaved
rounds (ring first on even rounds, Gloo first on odd ones). The ring is
bench's ring_allreduce (trainer/comm/abortable_ring.h, C++); Gloo is
torch.distributed.all_reduce on a ProcessGroupGloo (Debian's torch 1.13),
its store in a process of its own. Per size: rank 0's median seconds per
call over every timed call of every round (min-max), and the bus bandwidth
2(N-1)/N x bytes / time (what each rank sends and receives). Ends with
  RESULT ring_vs_gloo_time_ratio_<size>mib <ring median / gloo median>
for each size (below 1: the ring is faster). Finds ring_allreduce in
$CTRUN_BUILD_DIR/bench (default build/bench)."""
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(HERE, "..", "build"))
RANKS = int(os.environ.get("RANKS", "4"))
SIZES = [float(s) for s in os.environ.get("SIZES", "1,16").split(",")]
REPS = int(os.environ.get("REPS", "10"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PYTHON = "/usr/bin/python3"

GLOO_RANK = r"""
import datetime, os, sys, time, torch, torch.distributed as dist
rank, world, floats, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = dist.TCPStore("127.0.0.1", int(sys.argv[5]), world, False)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
t = torch.ones(floats)
times = []
for i in range(2 + reps):
    start = time.perf_counter()
    dist.all_reduce(t)
    if i >= 2:
        times.append(time.perf_counter() - start)
if rank == 0:
    print("GLOO seconds=" + ",".join(repr(x) for x in times), flush=True)
"""


def run_ranks(argvs):
    """Starts every rank, waits (bounded), returns rank 0's stdout."""
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1")) for a in argvs]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            raise SystemExit(f"a rank exited {p.returncode}: {err.strip()[-400:]}")
        outs.append(out)
    return outs[0]


def seconds(line, tag):
    return [float(x) for x in line.split(f"{tag} seconds=")[1].split(",")]


def ring(floats):
    tool = os.path.join(BUILD, "bench", "ring_allreduce")
    with tempfile.TemporaryDirectory() as d:
        out = run_ranks([[tool, str(r), str(RANKS), d, str(floats), str(REPS)] for r in range(RANKS)])
    return seconds(out, "RING")


def gloo(floats):
    code = ("import sys, torch.distributed as d\n"
            "s = d.TCPStore('127.0.0.1', 0, 1, True, wait_for_workers=False)\n"
            "print(s.port, flush=True)\nsys.stdin.read()\n")
    store = subprocess.Popen([PYTHON, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = store.stdout.readline().strip()
    try:
        out = run_ranks([[PYTHON, "-c", GLOO_RANK, str(r), str(RANKS), str(floats), str(REPS), port]
                         for r in range(RANKS)])
    finally:
        store.stdin.close()
        store.wait()
    return seconds(out, "GLOO")


def main():
    if not os.path.exists(os.path.join(BUILD, "bench", "ring_allreduce")):
        raise SystemExit(f"ring_allreduce is not built in {BUILD}/bench: run scripts/build.sh")
    results = {}
    for size in SIZES:
        floats = int(size * 1024 * 1024 / 4)
        times = {"ring": [], "gloo": []}
        for rnd in range(ROUNDS):
            for name in (("ring", "gloo") if rnd % 2 == 0 else ("gloo", "ring")):
                times[name] += ring(floats) if name == "ring" else gloo(floats)
                print(f"{size:g} MiB round {rnd + 1}/{ROUNDS}: {name} done", file=sys.stderr, flush=True)
        results[size] = times
    print(f"\n{RANKS} ranks on the loopback, float32 sum in place, {ROUNDS} interleaved rounds x {REPS} calls; "
          "rank 0's seconds per call, median (min-max); bus bandwidth 2(N-1)/N x bytes / median\n")
    print(f"{'size':>8} {'ring':>28} {'gloo':>28} {'ring GB/s':>10} {'gloo GB/s':>10}")
    lines = []
    for size, times in results.items():
        med = {k: statistics.median(v) for k, v in times.items()}
        bus = {k: 2 * (RANKS - 1) / RANKS * size * 1024 * 1024 / med[k] / 1e9 for k in med}
        cell = {k: f"{med[k] * 1e3:.2f} ms ({min(v) * 1e3:.2f}-{max(v) * 1e3:.2f})" for k, v in times.items()}
        print(f"{size:>6g} MiB {cell['ring']:>28} {cell['gloo']:>28} {bus['ring']:>10.2f} {bus['gloo']:>10.2f}")
        lines.append(f"RESULT ring_vs_gloo_time_ratio_{size:g}mib {med['ring'] / med['gloo']:.3f}")
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
