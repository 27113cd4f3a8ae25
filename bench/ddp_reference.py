"""The Python side of bench/ddp.sh: PyTorch DistributedDataParallel training
the same SmallCnn as trainer/models/small_cnn.cc on Fashion-MNIST, with the same
per-rank batch, SGD settings, DistributedSampler order, bucket size and
one intra-op thread per rank. Data is preloaded and indexed like the C++
worker (no DataLoader), so only the training step is compared.
Run under torchrun; rank 0 prints `BENCH samples_per_s=<global samples/s>`
for the steps after --warmup."""
import argparse
import gc
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.relu(self.fc1(h.flatten(1)))
        return self.fc2(h)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    args = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    images = torch.from_numpy(read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")).copy())
    labels = torch.from_numpy(read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz")).copy())
    images = images.float().div_(255.0).sub_(0.2860).div_(0.3530).unsqueeze(1)
    labels = labels.long()

    torch.manual_seed(0)
    model = DDP(SmallCnn(), bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sampler = DistributedSampler(range(len(labels)), num_replicas=world, rank=rank, seed=0)

    step, start, samples, epoch = 0, None, 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(sampler))
        for begin in range(0, len(indices), args.batch_size):
            idx = indices[begin:begin + args.batch_size]
            x, y = images.index_select(0, idx), labels.index_select(0, idx)
            opt.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            loss.item()  # the C++ worker reads the loss every step too
            (logits.argmax(1) == y).sum().item()
            step += 1
            if step == args.warmup:
                start = time.perf_counter()
            elif step > args.warmup:
                samples += len(idx) * world
            if step >= args.steps:
                break
        epoch += 1
    dist.barrier()
    if rank == 0:
        seconds = time.perf_counter() - start
        print(f"BENCH samples_per_s={samples / seconds:.1f} steps={step - args.warmup}", flush=True)
    del model, opt  # before the group: torch 1.13 can deadlock otherwise (docs/preemption.md)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
