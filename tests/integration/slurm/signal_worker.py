"""A worker that stands for a training script checkpointing on preemption:
it announces "ready <rank>" on the FIFO $ANNOUNCE, waits, and on SIGTERM or
SIGUSR1 announces "got <SIGNAME> <rank>" and exits 0 (its checkpoint done)."""
import os
import signal
import sys


def say(line):
    fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
    os.write(fd, (line + "\n").encode())
    os.close(fd)


def on_signal(sig, _frame):
    say(f"got {signal.Signals(sig).name} {os.environ.get('RANK', '-')}")
    sys.exit(0)


for s in (signal.SIGTERM, signal.SIGUSR1):
    signal.signal(s, on_signal)
say(f"ready {os.environ.get('RANK', '-')}")
while True:
    signal.pause()
