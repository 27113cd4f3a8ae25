"""A stock PyTorch DDP script that saves when its job is preempted.

It trains a tiny linear model for --steps steps over Gloo, keeps a checkpoint
in --checkpoint, and resumes from it. Under `ctrun --preempt-grace S`, ctrun
creates the file named by CTRUN_PREEMPT_FILE when the job gets its notice
(SIGTERM, or --preempt-signal, on any node); the ranks agree on one step with
one tiny all-reduce per step, save it, tell ctrun which step they saved, and
exit 0 (docs/preemption.md). Without ctrun's notice (or under torchrun) it is
a plain DDP script.

    ctrun --nproc-per-node 2 --preempt-grace 60 examples/ddp_preemptible.py \\
        --steps 1000 --checkpoint /tmp/ckpt.pt
"""
import argparse
import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


# --- the preemption pattern (docs/preemption.md) -------------------------
def preempt_due():
    """True on every rank, at the same step, once ctrun has a notice."""
    notice = os.environ.get("CTRUN_PREEMPT_FILE")
    if notice is None:  # not under ctrun --preempt-grace
        return False
    flag = torch.tensor([1 if os.path.exists(notice) else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def confirm_saved(step):
    """Tells ctrun this rank's checkpoint of `step` is durable."""
    with open(os.environ["CTRUN_PREEMPT_SAVED_FILE"], "w") as f:
        f.write(f"{step}\n")
# ---------------------------------------------------------------------------


def save(path, model, opt, step):
    if dist.get_rank() == 0:
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, path)  # whole or not at all
    dist.barrier()  # every rank returns once the file is in place


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--checkpoint", required=True)
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print(f"rank {dist.get_rank()}: resumed after step {step}", flush=True)
    gen = torch.Generator().manual_seed(dist.get_rank())
    while step < args.steps:
        x = torch.randn(16, 8, generator=gen)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        print(f"rank {dist.get_rank()}: step {step} loss {loss.item():.4f}", flush=True)
        if preempt_due():
            save(args.checkpoint, model, opt, step)
            confirm_saved(step)
            print(f"rank {dist.get_rank()}: preempted, saved step {step}", flush=True)
            break
    else:
        save(args.checkpoint, model, opt, step)
    # DDP's reducer holds the process group. Dropped first, the group's last
    # reference goes with destroy_process_group(), which lets Gloo's threads
    # finish without the GIL; dropped at interpreter exit, torch (1.13 at
    # least) can deadlock there (pytorch#56297).
    del model, opt
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
