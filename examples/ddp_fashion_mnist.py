"""A stock PyTorch DDP training script: a small CNN on Fashion-MNIST over Gloo.

Nothing in it knows about ctrun: it reads the environment any torchrun-style
launcher sets (RANK, WORLD_SIZE, MASTER_ADDR, ...) through init_process_group's
env:// default, exactly as under `torchrun`.

    ctrun --nproc-per-node 4 examples/ddp_fashion_mnist.py --epochs 1

Data: Debian's dataset-fashion-mnist package (idx files, no download).
"""
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
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split, limit):
    images = read_idx(os.path.join(DATA, f"{split}-images-idx3-ubyte.gz"))[:limit]
    labels = read_idx(os.path.join(DATA, f"{split}-labels-idx1-ubyte.gz"))[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.2860) / 0.3530
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--train-limit", type=int, default=60000)
    p.add_argument("--log-every", type=int, default=50)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    train = load("train", args.train_limit)
    test = load("t10k", 10000)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        start = time.time()
        total, count = torch.zeros(1), torch.zeros(1)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.detach() * len(y)
            count += len(y)
            if rank == 0 and step % args.log_every == 0:
                print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f}", flush=True)
        dist.all_reduce(total)
        dist.all_reduce(count)

        model.eval()
        correct = torch.zeros(1)
        with torch.no_grad():
            shard = range(rank, len(test), world)
            x, y = test.tensors[0][list(shard)], test.tensors[1][list(shard)]
            correct += (model(x).argmax(1) == y).sum()
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: train loss {(total / count).item():.4f}, "
                  f"test accuracy {correct.item() / len(test):.4f}, "
                  f"{time.time() - start:.1f} s, world size {world}", flush=True)
    # DDP's reducer holds the process group: dropped first, the group's last
    # reference goes with destroy_process_group() and not with the model at
    # interpreter exit, where torch (1.13 at least) can deadlock
    # (docs/preemption.md, pytorch#56297).
    del model, opt
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
