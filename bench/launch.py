"""Launch overhead: ctrun vs torchrun (torch 1.13, patched in-process) vs a
launch by hand, side by side in one run. See bench/launch.sh."""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
ALLREDUCE = os.path.join(ROOT, "tests", "integration", "workers", "allreduce.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env():
    e = dict(os.environ)
    e["PYTHON_EXEC"] = PY
    e["OMP_NUM_THREADS"] = "1"  # same for every launcher; silences both banners
    return e


def timed(cmd_fn, reps):
    times = []
    for _ in range(reps):
        cmd = cmd_fn()
        t0 = time.perf_counter()
        r = subprocess.run(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode()[-2000:]}")
    return times


def ctrun_cmd(ctrun, n, argv):
    return lambda: [ctrun, "--standalone", "--nproc-per-node", str(n)] + argv


def torchrun_cmd(n, argv):
    # torch 1.13: underscored flags only; --standalone would share fixed port 29400.
    return lambda: [PY, os.path.join(HERE, "torchrun_compat.py"), "--nnodes", "1",
                    "--nproc_per_node", str(n), "--rdzv_backend", "c10d",
                    "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", "bench",
                    "--monitor_interval", "0.1"] + argv


def by_hand(n, script, reps):
    times = []
    for _ in range(reps):
        port = free_port()
        t0 = time.perf_counter()
        procs = []
        for rank in range(n):
            e = env()
            e.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n),
                     LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen([PY, "-u", script], env=e, stdout=subprocess.DEVNULL))
        codes = [p.wait() for p in procs]
        times.append(time.perf_counter() - t0)
        if any(codes):
            sys.exit(f"by-hand launch failed: {codes}")
    return times


def row(name, times):
    return (name, min(times), statistics.median(times))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5, help="runs per torchrun / all-reduce cell")
    p.add_argument("--ctrun-reps", type=int, default=20, help="runs per ctrun /bin/true cell")
    args = p.parse_args()
    build = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
    ctrun = os.path.join(build, "launcher", "ctrun")
    if not os.access(ctrun, os.X_OK):
        sys.exit(f"{ctrun} not found: build first (scripts/build.sh) or set CTRUN_BUILD_DIR")

    rows = []
    medians = {}
    for n in (1, 2, 4, 8):
        c = timed(ctrun_cmd(ctrun, n, ["--no-python", "/bin/true"]), args.ctrun_reps)
        t = timed(torchrun_cmd(n, ["--no_python", "/bin/true"]), args.reps)
        rows += [row(f"/bin/true N={n}  ctrun", c), row(f"/bin/true N={n}  torchrun", t)]
        medians[n] = (statistics.median(c), statistics.median(t))
    allreduce = {}
    for n in (2, 4):
        c = timed(ctrun_cmd(ctrun, n, [ALLREDUCE]), args.reps)
        t = timed(torchrun_cmd(n, [ALLREDUCE]), args.reps)
        hnd = by_hand(n, ALLREDUCE, args.reps)
        rows += [row(f"all-reduce N={n}  ctrun", c), row(f"all-reduce N={n}  torchrun", t),
                 row(f"all-reduce N={n}  by hand", hnd)]
        allreduce[n] = (statistics.median(c), statistics.median(t), statistics.median(hnd))

    print(f"{'case':32} {'min s':>9} {'median s':>9}")
    for name, lo, med in rows:
        print(f"{name:32} {lo:9.4f} {med:9.4f}")
    print()
    print(f"{'N':>3} {'torchrun/ctrun (/bin/true)':>28}")
    for n, (c, t) in medians.items():
        print(f"{n:>3} {t / c:28.1f}")
    for n, (c, t, hnd) in allreduce.items():
        print(f"all-reduce N={n}: ctrun/by-hand {c / hnd:.3f}, torchrun/by-hand {t / hnd:.3f}")
    for n, (c, t, hnd) in allreduce.items():
        print(f"RESULT allreduce_{n}_ctrun_vs_hand {c / hnd:.3f}")
    c8, t8 = medians[8]
    print(f"RESULT launch_ratio {t8 / c8:.1f}")


if __name__ == "__main__":
    main()
