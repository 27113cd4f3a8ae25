"""Every rank takes one Gloo step (an all-reduce, then a barrier); then rank
$FAIL_RANK raises ValueError under @record (writing its error file) while the
others block in the next all-reduce and fail when its connection goes.
NO_RECORD=1: main is not decorated (a stock script: no error file)."""
import os

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1)
    dist.all_reduce(t)
    dist.barrier()
    if rank == int(os.environ.get("FAIL_RANK", "4")):
        raise ValueError(f"rank {rank} failed on purpose")
    dist.all_reduce(t)  # never completes: rank FAIL_RANK is gone


main() if os.environ.get("NO_RECORD") == "1" else record(main)()
