"""An elastic job in miniature. Announces "<pid> <WORLD_SIZE> <RESTART_COUNT>" on
the FIFO $ANNOUNCE (if set); while WORLD_SIZE is not $TARGET_WORLD it waits to
be restarted by a membership change; at the target it all-reduces (rank + 1),
checks the sum and exits 0."""
import os
import signal
import sys

world = int(os.environ["WORLD_SIZE"])
target = int(os.environ["TARGET_WORLD"])
if "ANNOUNCE" in os.environ:
    fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
    os.write(fd, "{} {} {} {}\n".format(os.getpid(), world, os.environ["TORCHELASTIC_RESTART_COUNT"],
                                        os.environ["GROUP_RANK"]).encode())
    os.close(fd)
if world != target:
    signal.pause()
    sys.exit(5)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} world {world} sum {int(t.item())}", flush=True)
dist.destroy_process_group()
sys.exit(0 if t.item() == world * (world + 1) / 2 else 3)
