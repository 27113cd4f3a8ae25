"""Every call of torch's TCPStore client against the store ctrun hosts
(TORCHELASTIC_USE_AGENT_STORE=True), from a stock init_process_group("gloo").
Prints "rank R store ok" when every check passed; exits 3 otherwise."""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True", os.environ["TORCHELASTIC_USE_AGENT_STORE"]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
store = dist.distributed_c10d._get_default_store()  # PrefixStore over the agent's TCPStore
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


store.set(f"k{rank}", f"v{rank}")
check("get own", store.get(f"k{rank}"), f"v{rank}".encode())
check("add", store.add("counter", rank + 1) > 0, True)
# compare_set: every rank races to take "leader"; exactly one wins.
store.compare_set("leader", "", str(rank))
store.add("raced", 1)
store.wait(["raced"])
dist.barrier()
leader = store.get("leader")
check("one leader", leader in [str(r).encode() for r in range(world)], True)
check("cas mismatch returns current", store.compare_set("leader", "nope", "x"), leader)
check("cas missing key returns expected", store.compare_set(f"absent{rank}", "e", "d"), b"e")
dist.barrier()
check("counter", int(store.get("counter")), world * (world + 1) // 2)
# A blocking wait that another rank satisfies: rank 1 waits for "go", which
# rank 0 sets only once rank 1 said it is about to wait.
if world > 1:
    if rank == 1:
        try:
            store.wait(["never"], timedelta(seconds=0.3))
            failures.append("wait on a missing key returned")
        except Exception:  # torch 1.13 raises RuntimeError("Socket Timeout")
            pass  # it blocked until its timeout, as it must
        store.set("waiting", "1")
        store.wait(["go"], timedelta(seconds=30))
        check("go", store.get("go"), b"rank0")
    elif rank == 0:
        store.wait(["waiting"], timedelta(seconds=30))
        store.set("go", "rank0")
dist.barrier()
for r in range(world):
    check(f"get k{r}", store.get(f"k{r}"), f"v{r}".encode())
dist.barrier()  # every rank has read every key before any is deleted
check("delete own", store.delete_key(f"k{rank}"), True)
check("delete again", store.delete_key(f"k{rank}"), False)
dist.barrier()
check("num_keys > 0", store.num_keys() > 0, True)
t = torch.tensor([1.0])
dist.all_reduce(t)
check("all_reduce", int(t.item()), world)
dist.destroy_process_group()
if failures:
    print(f"rank {rank} store FAILED: " + "; ".join(failures), flush=True)
    sys.exit(3)
print(f"rank {rank} store ok world {world}", flush=True)
