"""A stock PyTorch NCCL script (tests/gpu/check.sh): an all-reduce and five
DDP steps on the GPU, then one line with the loss. CRASH_ONCE=1: the first
attempt exits 3 with NCCL up. HANG=1: it all-reduces forever."""
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
t = torch.ones(1024, device="cuda") * (dist.get_rank() + 1)
dist.all_reduce(t)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8).cuda(), device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 64, device="cuda"), torch.randn(32, 8, device="cuda")
for _ in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
if os.environ.get("CRASH_ONCE") == "1" and attempt == "0":
    print("crashing attempt 0 with NCCL up", flush=True)
    os._exit(3)
if os.environ.get("HANG") == "1":
    print("hanging in a loop on the GPU", flush=True)
    while True:
        dist.all_reduce(t)
        torch.cuda.synchronize()
print(f"rank {dist.get_rank()} attempt {attempt} sum {t[0].item()} loss {loss.item():.6f}", flush=True)
dist.destroy_process_group()
