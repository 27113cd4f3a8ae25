"""One rank of bench/gloo_abort.py: all-reduces in a loop over Gloo (torch's
ProcessGroupGloo, a store run by the driver); the victim rank SIGKILLs
itself at iteration KILL_AT after writing the time to KILLED_AT. Every
survivor writes, to OUT_DIR/rank-<r>, the seconds from that instant to the
moment its collective raised, then (CASCADE=1) destroys its process group,
and stays alive until the driver ends it (at most LINGER_S seconds), so its
sockets stay open unless the teardown closes them."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, False)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=float(os.environ["PG_TIMEOUT"])))
tensor = torch.ones(1 << 16)
for i in range(1_000_000):
    if rank == int(os.environ["VICTIM"]) and i == int(os.environ["KILL_AT"]):
        with open(os.environ["KILLED_AT"], "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(tensor)
    except RuntimeError:
        raised = time.time()
        with open(os.environ["KILLED_AT"]) as f:
            gap = raised - float(f.read())
        with open(os.path.join(os.environ["OUT_DIR"], f"rank-{rank}"), "w") as f:
            f.write(repr(gap))
        if os.environ.get("CASCADE") == "1":
            dist.destroy_process_group()
        time.sleep(float(os.environ["LINGER_S"]))
        sys.exit(0)
