"""The logic of bench/logs_scale.sh: shared logs from NODES x RANKS ranks
through one ctrund, read at the same time by `ctrun logs --follow`.

Each run: a fresh ctrund (127.0.0.1 port 0); bench/load/logs_load holds a
new run and opens one ShipLogs stream per node ("ready"), then ships for
DURATION s ("start" .. its JSON report); `ctrun logs --follow` on that run
is started at "ready", its stdout to a file in $TMPDIR as `ctrun logs -f >
run.log` writes one (a pipe would stall it whenever this reader pauses), the
file read here as it grows (lines counted, the last line of each read parsed
for its send time: the follower's lag; what was read is freed with
fallocate's PUNCH_HOLE), its stderr for the lines the server reports
dropped. ctrund's CPU is
utime + stime from /proc/PID/stat between "start" and the report, over that
wall time; its peak RSS is VmHWM at the end. After the report the follower
is given FOLLOW_WAIT s to show every line it will see (seen + reported
dropped = lines sent); then ctrund is stopped (its readers end OK).

Lines the follower never saw are either dropped by the ring's policy
(reported as gaps, printed with the policy) or lost otherwise (sent -
seen - reported dropped; must be 0).

Env: CTRUN_BUILD_DIR (./build), REF_BUILD_DIR (unset: no reference),
NODES (1024), RANKS (8), RATE (100), DURATION (60), REPS (3), THREADS (4),
FOLLOW_WAIT (30), JSON (a path for the JSON file).
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
REF = os.environ.get("REF_BUILD_DIR", "")
LOAD = os.path.join(BUILD, "bench", "logs_load")
NODES = int(os.environ.get("NODES", "1024"))
RANKS = int(os.environ.get("RANKS", "8"))
RATE = float(os.environ.get("RATE", "100"))
DURATION = float(os.environ.get("DURATION", "60"))
REPS = int(os.environ.get("REPS", "3"))
THREADS = int(os.environ.get("THREADS", "4"))
FOLLOW_WAIT = float(os.environ.get("FOLLOW_WAIT", "30"))
TICK = os.sysconf("SC_CLK_TCK")
# The server's ring, as rendezvous/grpc/server/log_hub.h bounds it.
POLICY = ("per run, the newest 1,048,576 lines or 64 MiB (text + 64 bytes a chunk), whichever is reached first, "
          "and 256 MiB for all runs together (past it the largest ring gives way); when full a ring drops its "
          "oldest whole chunks; every line is numbered, so a reader sees the drop as a gap and is told its size")
DROPPED = re.compile(rb"ctrun logs: (\d+) lines dropped by the server")
STAMP = re.compile(rb" t (\d+\.\d+) ")
LIBC = ctypes.CDLL(None, use_errno=True)


def binaries(build):
    return os.path.join(build, "rendezvous", "ctrund"), os.path.join(build, "launcher", "ctrun")


def proc_cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)
    except (OSError, IndexError):
        return float("nan")


def proc_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def punch_hole(fd, length):
    """Frees the first `length` bytes of file `fd` (fallocate PUNCH_HOLE | KEEP_SIZE); False if unsupported."""
    try:
        return LIBC.fallocate(fd, 3, ctypes.c_longlong(0), ctypes.c_longlong(length)) == 0
    except (AttributeError, OSError):
        return False


class Follower:
    """`ctrun logs --follow` on the run, its output to a file as `ctrun logs
    -f > run.log` would write it (so that this reader's pauses never stall
    it, as a pipe would once full): counts its lines as the file grows
    (freeing what was read, so the disk holds only the unread part) and the
    drops it reports on stderr."""

    def __init__(self, ctrun, endpoint, run_id, out_dir):
        env = dict(os.environ)
        env.pop("CTRUN_RDZV_TOKEN", None)
        self.path = os.path.join(out_dir, f"{run_id}.log")
        with open(self.path, "wb") as out:
            self.proc = subprocess.Popen([ctrun, "logs", "--follow", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id],
                                         stdout=out, stderr=subprocess.PIPE, env=env)
        self.lock = threading.Lock()
        self.lines = 0
        self.dropped = 0
        self.lags = []  # (when, now - the send time of the last whole line read)
        self.stderr_tail = b""
        self.threads = [threading.Thread(target=self._out, daemon=True), threading.Thread(target=self._err, daemon=True)]
        for t in self.threads:
            t.start()

    def _out(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            offset = freed = 0
            while True:
                block = os.pread(fd, 4 << 20, offset)
                if not block:
                    if self.proc.poll() is not None and not os.pread(fd, 1, offset):
                        return
                    time.sleep(0.005)
                    continue
                now = time.time()
                last = block.rfind(b"\n")
                if last < 0:  # no whole line yet
                    if len(block) >= 1 << 20:
                        offset += len(block)  # no line is that long: skip it
                    time.sleep(0.005)
                    continue
                whole = block[:last + 1]
                offset += len(whole)
                m = STAMP.search(whole, whole.rfind(b"\n", 0, last) + 1)
                with self.lock:
                    self.lines += whole.count(b"\n")
                    if m:
                        self.lags.append((time.monotonic(), now - float(m.group(1))))
                if offset - freed >= 64 << 20 and punch_hole(fd, offset & ~4095):
                    freed = offset & ~4095
        finally:
            os.close(fd)

    def _err(self):
        for line in self.proc.stderr:
            m = DROPPED.search(line)
            with self.lock:
                if m:
                    self.dropped += int(m.group(1))
                else:
                    self.stderr_tail = (self.stderr_tail + line)[-2000:]

    def seen(self):
        with self.lock:
            return self.lines, self.dropped

    def finish(self):
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self.threads:
            t.join(timeout=30)
        os.unlink(self.path)
        return self.proc.returncode


def read_line(stream, what):
    line = stream.readline()
    if not line:
        raise RuntimeError(f"logs_load ended before it said {what!r}")
    return line.strip()


def one_run(build, run_id, out_dir):
    ctrund_bin, ctrun_bin = binaries(build)
    daemon = subprocess.Popen([ctrund_bin, "--listen", "127.0.0.1:0", "--closed-run-ttl", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    follower = None
    gen = None
    try:
        endpoint = re.search(r"serving rendezvous on (\S+)", daemon.stdout.readline()).group(1)
        gen = subprocess.Popen([LOAD, "--endpoint", endpoint, "--run-id", run_id, "--nodes", str(NODES),
                                "--ranks", str(RANKS), "--rate", str(RATE), "--duration-s", str(DURATION),
                                "--threads", str(THREADS), "--start-delay-s", "1", "--timeout-s", "120"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if read_line(gen.stdout, "ready") != "ready":
            raise RuntimeError("logs_load did not say ready")
        follower = Follower(ctrun_bin, endpoint, run_id, out_dir)
        if read_line(gen.stdout, "start") != "start":
            raise RuntimeError("logs_load did not say start")
        t0, cpu0 = time.monotonic(), proc_cpu_s(daemon.pid)
        report_line = read_line(gen.stdout, "its report")
        t1, cpu1 = time.monotonic(), proc_cpu_s(daemon.pid)
        report = json.loads(report_line)
        _, status, usage = os.wait4(gen.pid, 0)  # exits once its report is out; its CPU, all threads
        gen.returncode = os.waitstatus_to_exitcode(status)
        gen_cpu = usage.ru_utime + usage.ru_stime
        if not report["ok"]:
            raise RuntimeError(f"logs_load: {report['error']}")
        sent = report["lines_sent"]
        caught = None
        while time.monotonic() < t1 + FOLLOW_WAIT:
            seen, dropped = follower.seen()
            if seen + dropped >= sent:
                caught = time.monotonic() - t1
                break
            if follower.proc.poll() is not None:
                break
            time.sleep(0.05)
        follower_cpu = proc_cpu_s(follower.proc.pid)
        hwm = proc_kib(daemon.pid, "VmHWM")
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        if gen and gen.poll() is None:
            gen.kill()
            gen.wait()
    rc = follower.finish()
    seen, dropped = follower.seen()
    if rc != 0:
        raise RuntimeError(f"ctrun logs --follow exited {rc}: {follower.stderr_tail.decode(errors='replace')}")
    in_run = [lag for when, lag in follower.lags if t0 <= when <= t1]
    in_run.sort()
    wall = t1 - t0
    return {
        "sent": sent, "accepted": report["accepted"], "seen": seen, "ring_dropped": dropped,
        "other_lost": sent - seen - dropped, "wall_s": wall, "ctrund_cpu": (cpu1 - cpu0) / wall,
        "rss_mib": hwm / 1024, "follower_cpu": follower_cpu / (t1 - t0 + (caught or FOLLOW_WAIT)),
        "catchup_s": caught if caught is not None else float("nan"),
        "lag_median_s": in_run[len(in_run) // 2] if in_run else float("nan"),
        "lag_max_s": in_run[-1] if in_run else float("nan"),
        "generator_cpu": gen_cpu / wall,
        "late_max_s": report["late_max_s"], "late_batches": report["late_batches"],
        "wire_bytes": report["wire_bytes"],
    }


def main():
    builds = {"this": BUILD}
    if REF:
        builds["reference"] = REF
    for build in builds.values():
        for f in binaries(build):
            if not os.access(f, os.X_OK):
                sys.exit(f"logs_scale.py: {f} is not built (build it, or set CTRUN_BUILD_DIR / REF_BUILD_DIR)")
    if not os.access(LOAD, os.X_OK):
        sys.exit(f"logs_scale.py: {LOAD} is not built (ninja logs_load)")
    total = NODES * RANKS * int(RATE * DURATION)
    print(f"{NODES} nodes x {RANKS} ranks x {RATE:g} lines/s for {DURATION:g} s = {total:,} lines "
          f"({NODES * RANKS * RATE:,.0f} lines/s), {REPS} runs per build ({', '.join(builds)}), interleaved; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"the ring's policy: {POLICY}", flush=True)
    runs = {name: [] for name in builds}
    out_dir = tempfile.mkdtemp(prefix="logs_scale-")
    try:
        for i in range(REPS):
            order = list(builds) if i % 2 == 0 else list(builds)[::-1]
            for name in order:
                r = one_run(builds[name], f"scale-{i}-{name}", out_dir)
                runs[name].append(r)
                print(f"  run {i + 1} {name}: ctrund {r['ctrund_cpu']:.2f} cores, {r['rss_mib']:.0f} MiB; follower saw "
                      f"{r['seen']:,} of {r['sent']:,}, {r['ring_dropped']:,} dropped by the ring, {r['other_lost']:,} "
                      f"lost otherwise, caught up {r['catchup_s']:.2f} s after the last batch; lag median "
                      f"{r['lag_median_s']:.3f} s, max {r['lag_max_s']:.3f} s; senders late by up to "
                      f"{r['late_max_s']:.3f} s", flush=True)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)

    rows = [("ctrund CPU, cores", "ctrund_cpu", 1, 2), ("ctrund peak RSS, MiB", "rss_mib", 1, 0),
            ("lines not seen", "lost", 1, 0), ("  dropped by the ring", "ring_dropped", 1, 0),
            ("  lost otherwise", "other_lost", 1, 0), ("follower showed, % of sent", "shown_pct", 1, 1),
            ("follower caught up, s", "catchup_s", 1, 2),
            ("follower lag median, s", "lag_median_s", 1, 3), ("follower lag max, s", "lag_max_s", 1, 3),
            ("follower CPU, cores", "follower_cpu", 1, 2), ("generator CPU, cores", "generator_cpu", 1, 2),
            ("senders late max, s", "late_max_s", 1, 3),
            ("wire bytes per line", "bytes_per_line", 1, 1)]
    for rs in runs.values():
        for r in rs:
            r["lost"] = r["ring_dropped"] + r["other_lost"]
            r["shown_pct"] = 100.0 * r["seen"] / max(1, r["sent"])
            r["bytes_per_line"] = r["wire_bytes"] / max(1, r["sent"])
    print(f"\nmedian (min–max) of {REPS}; load after {os.getloadavg()[0]:.2f}")
    print(f"{'':<24}" + "".join(f"{name:>30}" for name in builds))
    for label, key, scale, digits in rows:
        print(f"{label:<24}" + "".join(f"{benchjson.fmt([r[key] for r in runs[n]], scale, digits):>30}" for n in builds))
    med = lambda key: benchjson.spread([r[key] for r in runs["this"]])["median"]
    results = {"logs_8k_ranks_ctrund_cpu": med("ctrund_cpu"), "logs_8k_ranks_rss_mib": med("rss_mib"),
               "logs_8k_ranks_lost_lines": med("lost"), "logs_8k_ranks_other_lost_lines": med("other_lost"),
               "logs_8k_ranks_follow_catchup_s": med("catchup_s"),
               "logs_8k_ranks_follow_shown_pct": med("shown_pct")}
    doc = {"config": {"nodes": NODES, "ranks": RANKS, "rate": RATE, "duration_s": DURATION, "reps": REPS,
                      "threads": THREADS, "policy": POLICY, "builds": builds},
           "runs": runs, "results": results}
    path = benchjson.write("logs_scale", doc, ROOT, path=os.environ.get("JSON") or None)
    print(f"\nmachine-readable results: {path}")
    for name, value in results.items():
        if name.endswith(("cpu", "_s")):
            print(f"RESULT {name} {value:.3f}")
        elif name.endswith("_pct"):
            print(f"RESULT {name} {value:.2f}")
        else:
            print(f"RESULT {name} {value:.0f}")


if __name__ == "__main__":
    main()
