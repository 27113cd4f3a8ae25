"""Gloo all-reduce of (rank + 1) across the world; prints and checks the sum."""
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
expected = world * (world + 1) / 2
print(f"rank {rank} world {world} sum {int(t.item())}", flush=True)
dist.destroy_process_group()
sys.exit(0 if t.item() == expected else 3)
