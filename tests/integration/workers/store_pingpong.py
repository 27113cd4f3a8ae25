"""A legitimate store client beside the attacks of test_adversarial: every
rank writes its key of round i, waits for every rank's, reads them all back
and checks them, round after round, until the test writes /legit/stop (rank 0
reads it and tells the others through the round's "go" key). Speaks the
TCPStore protocol (torch 2.x dialect) itself: no torch needed. Announces
"store ADDR PORT RANK" on the FIFO $ANNOUNCE once connected; prints
"legit ok rank R rounds N restart C" at the end."""
import os
import socket
import struct
import time

addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def u64(n):
    return struct.pack("<Q", n)


def s(b):
    return u64(len(b)) + b


c = socket.create_connection((addr, port), timeout=60)


def recv_exact(n):
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            raise SystemExit(f"rank {rank}: the store closed the connection")
        data += chunk
    return data


def wait_and_get(keys):
    c.sendall(b"\x06" + u64(len(keys)) + b"".join(s(k) for k in keys))  # WAIT
    assert recv_exact(1) == b"\x00"
    c.sendall(b"\x0a" + u64(len(keys)) + b"".join(s(k) for k in keys))  # MULTI_GET
    return [recv_exact(struct.unpack("<Q", recv_exact(8))[0]) for _ in keys]


c.sendall(struct.pack("<BI", 0, 0x3C85F7CE))  # VALIDATE
fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
os.write(fd, f"store {addr} {port} {rank}\n".encode())
os.close(fd)
i = 0
while True:
    c.sendall(b"\x01" + s(f"/legit/{i}/{rank}".encode()) + s(f"{i * 7 + rank}".encode()))  # SET
    values = wait_and_get([f"/legit/{i}/{r}".encode() for r in range(world)])
    assert values == [f"{i * 7 + r}".encode() for r in range(world)], (i, values)
    if rank == 0:
        c.sendall(b"\x05" + u64(1) + s(b"/legit/stop"))  # CHECK
        stop = recv_exact(1) == b"\x00"
        c.sendall(b"\x01" + s(f"/legit/{i}/go".encode()) + s(b"0" if stop else b"1"))
    go = wait_and_get([f"/legit/{i}/go".encode()])[0]
    i += 1
    if go == b"0":
        break
    time.sleep(0.02)  # pace: a few thousand keys in the store over the test, not millions
print(f"legit ok rank {rank} rounds {i} restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')}", flush=True)
