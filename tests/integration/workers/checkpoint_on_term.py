"""Two local ranks standing for a job that checkpoints on SIGTERM.

Local rank 0 announces "ready 0 <restart count>" on the FIFO $ANNOUNCE, then
exits 1 once the test writes a line to the FIFO $FAIL. Local rank 1 announces
"ready 1 <restart count>"; on SIGTERM it announces "term 1", then "saves a
checkpoint" until the test writes a line to the FIFO $GO, announces "saved 1"
and exits 0. Each FIFO is opened read-write, so the worker holds it open
before it announces and the test's write never finds it closed."""
import os
import signal
import sys

rank = os.environ["LOCAL_RANK"]
restarts = os.environ["TORCHELASTIC_RESTART_COUNT"]


def say(line):
    fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
    os.write(fd, (line + "\n").encode())
    os.close(fd)


def wait_line(fd):
    data = b""
    while b"\n" not in data:
        data += os.read(fd, 64)


if rank == "0":
    fail = os.open(os.environ["FAIL"], os.O_RDWR)
    say(f"ready 0 {restarts}")
    wait_line(fail)
    sys.exit(1)

go = os.open(os.environ["GO"], os.O_RDWR)


def on_term(_sig, _frame):
    say("term 1")
    wait_line(go)
    say("saved 1")
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
say(f"ready 1 {restarts}")
while True:
    signal.pause()
