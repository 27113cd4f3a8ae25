"""A stock DDP script, as a user writes it for torchrun: init_process_group
from the environment, DistributedDataParallel around a small model, three
steps of SGD on rank-dependent data. Prints its rank, the interpreter it runs
under and a checksum of the weights, which DDP keeps equal on every rank."""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
for _ in range(3):
    x = torch.randn(16, 8, generator=gen)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
# One write of the whole line: under python -u, print() writes the text and
# its newline apart, and the two ranks' lines could interleave on one pipe.
sys.stdout.write(f"ddp rank {rank} local_rank {os.environ['LOCAL_RANK']} python {sys.executable} "
                 f"checksum {checksum:.6f}\n")
sys.stdout.flush()
dist.destroy_process_group()
