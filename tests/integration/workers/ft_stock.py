"""A stock PyTorch script in a fault-tolerant job (ctrun --ft-replicas; the
contract is in docs/fault-tolerance.md, "A stock PyTorch script"): it trains
within its replica group with torch.distributed as under torchrun, and
follows the quorum over the agent's socket: one `sync` line per step, the
commit decision on its last step, the quorum it trains the next one in.
It does no cross-group average and no healing (ctrun's trainer does both);
it prints `stock step S quorum Q replicas W` for each committed step.

Usage: ft_stock.py STEPS"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def listener():
    # The ports the agent passes on to the other groups (a ring neighbour
    # connects to ring_port, a healing peer to heal_port): this script serves
    # neither, but reports real ones it holds.
    s = socket.socket()
    s.bind((os.environ.get("CTRUN_FT_HOST", "127.0.0.1"), 0))
    s.listen(1)
    return s


def main():
    steps = int(sys.argv[1])
    dist.init_process_group("gloo")
    ring, heal = listener(), listener()
    path = os.environ["CTRUN_FT_SOCKET"]
    link = socket.socket(socket.AF_UNIX)
    link.connect("\0" + path[1:] if path.startswith("@") else path)
    lines = link.makefile("rw")
    local_rank = int(os.environ["LOCAL_RANK"])
    weight = torch.zeros(1)
    committed, ballot, pending = 0, "-", None
    while committed < steps:
        lines.write(f"sync {local_rank} {committed} {ring.getsockname()[1]} {heal.getsockname()[1]} {ballot}\n")
        lines.flush()
        answer = lines.readline().split()
        if not answer or answer[0] != "quorum":
            sys.exit(f"the agent answered {answer}")
        _, commit, quorum_id, _rank, world, max_step, _right, _heal, _serve = answer
        if commit == "1":
            weight += pending  # the step voted on commits
            if dist.get_rank() == 0:
                print(f"stock step {committed} quorum {voted_in} replicas {voted_world}", flush=True)
            committed += 1
        if int(max_step) != committed:
            sys.exit(f"the quorum trains step {max_step}; this script is at {committed} and does not heal")
        grad = torch.ones(1) * (committed + 1)
        dist.all_reduce(grad)  # within the group, as under torchrun
        pending, voted_in, voted_world = grad / dist.get_world_size(), quorum_id, world
        ballot = f"{quorum_id}/{committed}/1"
    lines.write(f"done {local_rank} {committed}\n")  # the agent answers "bye" once the server knows
    lines.flush()
    if lines.readline().strip() != "bye":
        sys.exit("the agent did not answer done with bye")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
