"""Fault-tolerant replica groups against ctrun's whole-job restart from a
checkpoint, side by side in one run (docs/fault-tolerance.md; issue 31's
bench). The job: 3 ctrun agents x 2 ranks of ctrun-fashion-mnist on the
loopback under one ctrund (bench/ft_jobs.py), SmallCnn, batch BATCH per
rank, --deterministic (one thread per rank).

Four runs per round, ROUNDS interleaved rounds (the order of each pair
alternates):
  ft       --ft-replicas 1:3 per agent, --ft; local rank 1 of group 1
           SIGKILLs itself before step KILL_STEP (CTRUN_FT_FAULT=1:K:train):
           the survivors train on, group 1 restarts and heals from a peer.
  restart  --nnodes 3 --max-restarts 1, --checkpoint-every CKPT_EVERY, the
           same kill (the plain loop's CTRUN_FT_FAULT hook): every worker
           restarts and resumes from the last checkpoint (checked).
  ft-nofault / ddp   the same two jobs, no kill, no checkpoint,
           OVERHEAD_STEPS steps: the step time, from rank 0's step lines
           after WARMUP steps, ft over plain DDP at the same world size.
  ft-exact  ft-nofault with ctrun --ft-exact: its step time over ft-nofault's
           (ft_exact_overhead_ratio; docs/fault-tolerance.md, "Exact results").
Both fault runs train FT_STEPS steps.

Counting: a step is committed when the optimizer applied it. "Recomputed":
a step committed before the kill and computed again after it (the restart
baseline: from its last checkpoint up to the kill). "Discarded": a step in
flight at the kill that no one committed (the survivors' step K under ft,
voted down and retrained by the new quorum; the restart baseline loses its
in-flight step too, but it has no vote to count it by); reported apart,
never as recomputed. The gap is from the arrival of the last line of step
K-1 (at or just before the kill: the victim dies right after that step's
vote) to the first line of a new committed step (ft: a survivor's step K;
restart: the job's first step past K after its restart), an upper bound;
gap_from_exited_s in the JSON counts from the victim's worker_exited event
("ts", after the kill) instead. The heal time and bytes come from the
replica_healed event, set against a loopback TCP stream of the same byte
count measured in the same round (loopback_seconds).

Env knobs: ROUNDS (3), FT_STEPS (200; group 0 holds before step
FT_STEPS-20 until the restarted group has asked to join, if it has not yet:
the table says how long that held), KILL_STEP (25), CKPT_EVERY (10: the kill
falls half-way between checkpoints, N/2 steps recomputed as on average),
OVERHEAD_STEPS (150), WARMUP (10), BATCH (8), TRAIN_LIMIT (4000), QUICK=1 (1
round, short no-failure runs: a smoke check of the script, not a
measurement). `bench/ft.sh --redraw RUN.json` draws the chart again from a
run's JSON.
Prints a table and ends with RESULT lines; writes its JSON via
bench/benchjson.py and the loss-against-wall-time chart to CHART
(default $CTRUN_BUILD_DIR/bench/ft-loss-vs-time.png)."""
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchjson  # noqa: E402
import ft_jobs  # noqa: E402

QUICK = os.environ.get("QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", "1" if QUICK else "3"))
FT_STEPS = int(os.environ.get("FT_STEPS", "200"))
HOLD_STEP = FT_STEPS - 20
KILL_STEP = int(os.environ.get("KILL_STEP", "25"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "10"))
OVERHEAD_STEPS = int(os.environ.get("OVERHEAD_STEPS", "40" if QUICK else "150"))
WARMUP = int(os.environ.get("WARMUP", "5" if QUICK else "10"))
BATCH = int(os.environ.get("BATCH", "8"))
TRAIN_LIMIT = int(os.environ.get("TRAIN_LIMIT", "4000"))
TIMEOUT = 300
ROOT = os.path.join(ft_jobs.HERE, "..")


def loopback_seconds(nbytes):
    """Connect, then send `nbytes` and receive them all, over a fresh 127.0.0.1
    TCP connection (the server thread already waiting in accept)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    payload = b"\0" * nbytes
    buf = bytearray(1 << 20)

    def serve():
        conn, _ = listener.accept()
        conn.sendall(payload)
        conn.close()

    server = threading.Thread(target=serve)
    server.start()
    start = time.perf_counter()
    client = socket.create_connection(listener.getsockname())
    got = 0
    while got < nbytes:
        n = client.recv_into(buf)
        if not n:
            break
        got += n
    elapsed = time.perf_counter() - start
    client.close()
    server.join()
    listener.close()
    return elapsed


def ft_fault_run(ctrund, tmp, r):
    job = ft_jobs.Job(ctrund, os.path.join(tmp, f"ft{r}"), f"ft{r}", True, FT_STEPS, TRAIN_LIMIT, BATCH,
                      fault_step=KILL_STEP, hold_step=HOLD_STEP)
    job.wait(TIMEOUT)
    kill = job.kill_time()
    committed, discarded, recomputed = {}, set(), 0
    for a in job.agents:
        seen = set()
        for t, line in a.lines:
            m = ft_jobs.FT_STEP.match(line)
            if m:
                step = int(m.group(1))
                recomputed += step in seen
                seen.add(step)
                committed.setdefault(a.index, []).append((t, step, float(m.group(4))))
            m = ft_jobs.FT_DISCARD.match(line)
            if m:
                discarded.add((int(m.group(1)), int(m.group(2))))
    # The victim dies right after step K-1's vote: the kill's time is the last
    # line of step K-1 (ms before it); the agent's worker_exited comes later.
    killed = max(t for g in committed.values() for t, step, _ in g if step == KILL_STEP - 1)
    survivors = [t for g in (0, 2) for t, step, _ in committed.get(g, []) if step >= KILL_STEP]
    events = job.agents[1].events()
    kinds = [e["event"] for e in events]
    for g in (0, 2):
        if "restart" in [e["event"] for e in job.agents[g].events()]:
            raise SystemExit(f"ft round {r}: survivor group {g} restarted")
    healed = [e for e in events if e["event"] == "replica_healed"]
    if "restart" not in kinds or not healed:
        raise SystemExit(f"ft round {r}: group 1 did not restart and heal (events: {kinds}); "
                         "raise FT_STEPS so the survivors are still training when it asks to join")
    heal = healed[0]
    # How long group 0 waited at HOLD_STEP for the restarted group (0: it had asked already).
    reached = [t for t, step, _ in committed[0] if step == HOLD_STEP - 1]
    held = max(0.0, job.released_at - reached[0]) if reached and job.released_at else 0.0
    hold_t = [reached[0] - job.start, job.released_at - job.start] if held > 0 else None
    return {"gap_s": min(survivors) - killed, "gap_from_exited_s": min(survivors) - kill, "recomputed": recomputed, "discarded": len(discarded),
            "heal_s": heal["seconds"], "heal_bytes": heal["bytes"], "held_s": held, "hold_t": hold_t,
            "loopback_s": statistics.median(loopback_seconds(heal["bytes"]) for _ in range(5)),
            "wall_s": max(t for a in job.agents for t, _ in a.lines) - job.start,
            "curve": [(t - job.start, loss) for t, _, loss in committed[0]], "kill_t": killed - job.start}


def restart_run(ctrund, tmp, r):
    job = ft_jobs.Job(ctrund, os.path.join(tmp, f"restart{r}"), f"restart{r}", False, FT_STEPS, TRAIN_LIMIT,
                      BATCH, fault_step=KILL_STEP, checkpoint_every=CKPT_EVERY)
    job.wait(TIMEOUT)
    kill = job.kill_time()
    lines = [(t, line) for a in job.agents for t, line in a.lines]
    steps = []  # (time, steps done, loss)
    resumed = None
    for t, line in sorted(lines):
        m = ft_jobs.PLAIN_STEP.match(line)
        if m:
            steps.append((t, int(m.group(1)), float(m.group(2))))
        m = ft_jobs.RESUMED.match(line)
        if m:
            resumed = int(m.group(1))
    expected = KILL_STEP // CKPT_EVERY * CKPT_EVERY
    restarts = sum(e["event"] == "restart" for a in job.agents for e in a.events())
    if restarts == 0 or resumed != expected:
        raise SystemExit(f"restart round {r}: expected a restart resuming from step {expected}, "
                         f"got {restarts} restart events and a resume from {resumed}")
    before = {s for t, s, _ in steps if t < kill}
    after = [s for t, s, _ in steps if t >= kill]
    # The plain loop logs "step S" after S steps: the victim dies right after "step K".
    # Its first arrival (the resumed run logs it again): the line and the
    # victim's worker_exited event race, so it may be stamped after the kill.
    killed = min(t for t, s, _ in steps if s == KILL_STEP)
    next_new = min(t for t, s, _ in steps if s > KILL_STEP)
    return {"gap_s": next_new - killed, "gap_from_exited_s": next_new - kill,
            "recomputed": len(before & set(after)), "resumed_from": resumed,
            "wall_s": max(t for t, _ in lines) - job.start,
            "curve": [(t - job.start, loss) for t, _, loss in steps], "kill_t": killed - job.start}


def step_seconds(job, pattern, agents):
    """Seconds per step of rank 0's step lines after WARMUP steps."""
    times = {}
    for a in agents:
        for t, line in a.lines:
            m = pattern.match(line)
            if m:
                times.setdefault(int(m.group(1)), t)
    first, last = min(times) + WARMUP, max(times)
    return (times[last] - times[first]) / (last - first)


def overhead_run(ctrund, tmp, r, ft, exact=False):
    name = f"{'ftexact' if exact else 'ftclean' if ft else 'ddp'}{r}"
    job = ft_jobs.Job(ctrund, os.path.join(tmp, name), name, ft, OVERHEAD_STEPS, TRAIN_LIMIT, BATCH, exact=exact)
    job.wait(TIMEOUT)
    pattern = ft_jobs.FT_STEP if ft else ft_jobs.PLAIN_STEP
    return step_seconds(job, pattern, job.agents[:1] if ft else job.agents)


def draw(chart, ft, restart):
    """Loss against wall time, both runs aligned on their kill (x = 0)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for run, name, color in ((ft, "ft (--ft-replicas 1:3)", "tab:blue"),
                             (restart, f"restart (checkpoint every {CKPT_EVERY})", "tab:orange")):
        # Rank 0's batch losses (faint) and their mean over 10 steps, broken at
        # the kill and wherever no step came for 0.5 s.
        kill = run["kill_t"]
        parts, last = [], None
        for x, y in run["curve"]:
            x -= kill
            if last is None or x - last > 0.5 or (last <= 0 < x):
                parts.append([])
            parts[-1].append((x, y))
            last = x
        for i, part in enumerate(parts):
            xs, ys = [x for x, _ in part], [y for _, y in part]
            ax.plot(xs, ys, ".", color=color, markersize=2, alpha=0.25)
            mean = [statistics.mean(ys[max(0, j - 9):j + 1]) for j in range(len(ys))]
            ax.plot(xs, mean, "-", color=color, linewidth=1.5, label=None if i else name)
        if run.get("hold_t"):
            ax.axvspan(run["hold_t"][0] - kill, run["hold_t"][1] - kill, color=color, alpha=0.12, linewidth=0,
                       label="ft: group 0 held until the restarted group asked to join")
    ax.axvline(0, color="grey", linestyle="--", linewidth=1, label=f"SIGKILL of one rank after step {KILL_STEP - 1}")
    ax.set_xlabel("wall time since the kill (s)")
    ax.set_ylabel("training loss (rank 0's batch; line: mean of 10)")
    ax.set_title(f"3 groups x 2 ranks, one rank killed before step {KILL_STEP}: ft against whole-job restart")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(chart)), exist_ok=True)
    fig.savefig(chart, metadata={"Software": None})
    return chart


def draw_median(ft, restart):
    """The chart of the round with the median ft gap, to CHART; returns (path, round)."""
    mid = sorted(range(len(ft)), key=lambda i: ft[i]["gap_s"])[len(ft) // 2]
    chart = os.environ.get("CHART", os.path.join(ft_jobs.BUILD, "bench", "ft-loss-vs-time.png"))
    return draw(chart, ft[mid], restart[mid]), mid


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--redraw":  # the chart again from a run's JSON
        with open(sys.argv[2]) as f:
            doc = json.load(f)
        global KILL_STEP, CKPT_EVERY
        KILL_STEP, CKPT_EVERY = doc["config"]["kill_step"], doc["config"]["ckpt_every"]
        print(draw_median(doc["ft"], doc["restart"])[0])
        return
    ft_jobs.check_build()
    if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
        raise SystemExit("dataset-fashion-mnist is not installed (/usr/share/datasets/fashion-mnist)")
    ctrund = ft_jobs.Ctrund()
    ft, restart, ft_step, ddp_step, exact_step = [], [], [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="ctrun-bench-ft-") as tmp:
            for r in range(ROUNDS):
                pair = [lambda: ft.append(ft_fault_run(ctrund, tmp, r)),
                        lambda: restart.append(restart_run(ctrund, tmp, r)),
                        lambda: ft_step.append(overhead_run(ctrund, tmp, r, True)),
                        lambda: ddp_step.append(overhead_run(ctrund, tmp, r, False)),
                        lambda: exact_step.append(overhead_run(ctrund, tmp, r, True, exact=True))]
                order = [0, 1, 2, 3, 4] if r % 2 == 0 else [1, 0, 4, 3, 2]
                for i in order:
                    pair[i]()
                print(f"round {r + 1}/{ROUNDS}: ft gap {ft[-1]['gap_s']:.3f} s, restart gap "
                      f"{restart[-1]['gap_s']:.3f} s, step {1e3 * ft_step[-1]:.1f} ms ft / "
                      f"{1e3 * ddp_step[-1]:.1f} ms ddp / {1e3 * exact_step[-1]:.1f} ms ft --ft-exact", flush=True)
    finally:
        ctrund.stop()
    report(ft, restart, ft_step, ddp_step, exact_step)


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def report(ft, restart, ft_step, ddp_step, exact_step):
    f = benchjson.fmt
    heal_mb_s = [r["heal_bytes"] / r["heal_s"] / 1e6 for r in ft]
    loop_mb_s = [r["heal_bytes"] / r["loopback_s"] / 1e6 for r in ft]
    ratio = [a / b for a, b in zip(ft_step, ddp_step)]
    exact_ratio = [a / b for a, b in zip(exact_step, ft_step)]
    print(f"\n3 groups x 2 ranks, {FT_STEPS} steps, kill before step {KILL_STEP}, restart checkpoints every "
          f"{CKPT_EVERY}; {ROUNDS} interleaved rounds, median (min-max)\n")
    print("| | ft (--ft-replicas 1:3) | whole-job restart |\n|---|---|---|")
    print(f"| steps recomputed | {f([r['recomputed'] for r in ft], digits=0)} | "
          f"{f([r['recomputed'] for r in restart], digits=0)} |")
    print(f"| steps discarded (in flight at the kill) | {f([r['discarded'] for r in ft], digits=0)} | "
          "lost, not counted |")
    print(f"| kill to next new committed step | {f([r['gap_s'] for r in ft], digits=3)} s | "
          f"{f([r['gap_s'] for r in restart], digits=3)} s |")
    print(f"| whole run, launch to last step | {f([r['wall_s'] for r in ft], digits=2)} s | "
          f"{f([r['wall_s'] for r in restart], digits=2)} s |")
    print(f"| ft: group 0 held at step {HOLD_STEP} for the restarted group | "
          f"{f([r['held_s'] for r in ft], digits=2)} s | - |")
    print(f"\nheal: {f([r['heal_s'] for r in ft], digits=4)} s for {int(med(ft, 'heal_bytes'))} bytes, "
          f"{f(heal_mb_s)} MB/s; loopback TCP, same bytes: {f([r['loopback_s'] for r in ft], digits=4)} s, "
          f"{f(loop_mb_s)} MB/s")
    print(f"step time, no failure, {OVERHEAD_STEPS} steps after {WARMUP}: ft {f(ft_step, 1e3, 2)} ms, "
          f"plain DDP {f(ddp_step, 1e3, 2)} ms, ratio {f(ratio, digits=3)}")
    print(f"step time with --ft-exact: {f(exact_step, 1e3, 2)} ms, over ft's {f(exact_ratio, digits=3)}")
    chart, mid = draw_median(ft, restart)
    doc = {"config": {"rounds": ROUNDS, "ft_steps": FT_STEPS, "kill_step": KILL_STEP, "ckpt_every": CKPT_EVERY,
                      "overhead_steps": OVERHEAD_STEPS, "warmup": WARMUP, "batch": BATCH,
                      "train_limit": TRAIN_LIMIT},
           "ft": ft, "restart": restart, "ft_step_s": ft_step, "ddp_step_s": ddp_step,
           "ft_exact_step_s": exact_step, "plots": []}
    print(f"chart (round {mid + 1}, the median ft gap): {chart}")
    print("json:", benchjson.write("ft", doc, ROOT))
    print(f"RESULT ft_steps_recomputed {med(ft, 'recomputed'):.0f}")
    print(f"RESULT restart_steps_recomputed {med(restart, 'recomputed'):.0f}")
    print(f"RESULT ft_steps_discarded {med(ft, 'discarded'):.0f}")
    print(f"RESULT ft_survivor_gap_s {med(ft, 'gap_s'):.3f}")
    print(f"RESULT restart_gap_s {med(restart, 'gap_s'):.3f}")
    print(f"RESULT ft_heal_s {med(ft, 'heal_s'):.4f}")
    print(f"RESULT ft_heal_mb_s {statistics.median(heal_mb_s):.1f}")
    print(f"RESULT loopback_mb_s {statistics.median(loop_mb_s):.1f}")
    print(f"RESULT ft_overhead_ratio {statistics.median(ratio):.3f}")
    print(f"RESULT ft_exact_overhead_ratio {statistics.median(exact_ratio):.3f}")


if __name__ == "__main__":
    main()
