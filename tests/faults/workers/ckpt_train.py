"""A training loop in miniature for the fault matrix: Gloo all-reduce per step,
global rank 0 checkpoints {step, tensor} to $CKPT_DIR/ckpt.json after every
step (write to a temporary file, fsync, atomic rename), every rank touches its
heartbeat. On start rank 0 loads the checkpoint, checks it (it parses; the
tensor equals the step, as the update rule keeps it) and broadcasts it.

Messages on the FIFO $ANNOUNCE, one line each:
  start <pid> <child_pid> <world> <restart_count> <group_rank> <rank> <step>
      after the first collective of a round (training is running)
  step <n>    rank 0, every 5 steps
  done <rank> <step>
  corrupt <why>   rank 0 found a bad checkpoint (then exits 7)
<child_pid> is a `sleep` this worker started: a descendant the orphan checks
must also find gone.

$FAULT, once per job: "exit:RANK:STEP" exits 3 at STEP; "hang:RANK:STEP"
stops (no heartbeat, no collectives) at STEP. Once is kept by a marker file
in $CKPT_DIR, not by TORCHELASTIC_RESTART_COUNT: that count is per node, and
when the faulty rank's peer is charged for the restart (its agent noticed
first: a peer blocked in a collective misses its heartbeat too), the faulty
node's count stays 0."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heartbeat  # noqa: E402

ANNOUNCE = os.environ["ANNOUNCE"]
CKPT = os.path.join(os.environ["CKPT_DIR"], "ckpt.json")
TOTAL = int(os.environ.get("TOTAL_STEPS", "60"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "0.05"))
RESTART = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
FAULT_DONE = os.path.join(os.environ["CKPT_DIR"], "fault.done")


def announce(msg):
    fd = os.open(ANNOUNCE, os.O_WRONLY)
    os.write(fd, (msg + "\n").encode())
    os.close(fd)


def load():
    try:
        with open(CKPT) as f:
            state = json.load(f)
    except FileNotFoundError:
        return 0, [0.0] * 4
    except ValueError as e:
        announce(f"corrupt does not parse: {e}")
        sys.exit(7)
    step, tensor = state["step"], state["tensor"]
    if tensor != [float(step)] * 4:
        announce(f"corrupt tensor {tensor} at step {step}")
        sys.exit(7)
    return step, tensor


def save(step, tensor):
    tmp = f"{CKPT}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"step": step, "tensor": tensor}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, CKPT)


child = subprocess.Popen(["sleep", "600"])
fault = os.environ.get("FAULT", "").split(":")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
step, tensor = load() if rank == 0 else (0, [0.0] * 4)
state = torch.tensor([float(step)] + tensor)
dist.broadcast(state, 0)
step, w = int(state[0].item()), state[1:].clone()
# The first touch comes once training runs: until then (imports, process
# group, broadcast) only --heartbeat-initial-timeout applies. Touching before
# `import torch` started the steady timeout (2 s in the hang case) during an
# import that takes longer than that on a loaded machine.
heartbeat.beat()
announce(f"start {os.getpid()} {child.pid} {world} {RESTART} {os.environ['GROUP_RANK']} {rank} {step}")

while step < TOTAL:
    heartbeat.beat()
    if len(fault) == 3 and int(fault[1]) == rank and int(fault[2]) == step and not os.path.exists(FAULT_DONE):
        with open(FAULT_DONE, "w"):
            pass
        if fault[0] == "exit":
            sys.exit(3)
        if fault[0] == "hang":
            time.sleep(3600)
    g = torch.ones(4)
    dist.all_reduce(g)
    w += g / world
    step += 1
    if rank == 0:
        save(step, [float(x) for x in w.round().tolist()])
        if step % 5 == 0:
            announce(f"step {step}")
    time.sleep(STEP_SECONDS)

announce(f"done {rank} {step}")
child.kill()
child.wait()
dist.destroy_process_group()
