"""One client of bench/store.sh: connects a torch TCPStore client to
MASTER_ADDR:MASTER_PORT, meets the other clients on a start key, then runs
STORE_BENCH_OPS rounds of set, get, add (3 store calls each, get being torch's
wait + get) and prints "ops <calls> start <t0> end <t1>" (time.time())."""
import os
import time
from datetime import timedelta

import torch.distributed as dist

n = int(os.environ["STORE_BENCH_CLIENTS"])
rounds = int(os.environ.get("STORE_BENCH_OPS", "5000"))
me = os.environ.get("RANK") or os.environ["STORE_BENCH_INDEX"]
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                      timedelta(seconds=60))
# Every client starts together: the last one to arrive opens the gate.
if store.add("bench/arrived", 1) == n:
    store.set("bench/go", "1")
store.wait(["bench/go"])
t0 = time.time()
key = f"bench/k{me}"
for i in range(rounds):
    store.set(key, b"x" * 64)
    store.get(key)
    store.add("bench/counter", 1)
t1 = time.time()
print(f"ops {3 * rounds} start {t0:.6f} end {t1:.6f}", flush=True)
