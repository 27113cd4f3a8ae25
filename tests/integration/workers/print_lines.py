"""Prints $LINES numbered lines "line <rank> <i>" (every fifth on stderr),
flushing each, once the test says go: announces "ready <rank>" on the FIFO
$ANNOUNCE (if set), then reads one byte from the FIFO $GO (if set), which
the test fills with one byte per worker. With $DONE set, it then reads one
byte from the FIFO $DONE before it exits (the test's follower is attached by
then)."""
import os
import sys

rank = int(os.environ["RANK"])
if os.environ.get("ANNOUNCE"):
    fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
    os.write(fd, f"ready {rank}\n".encode())
    os.close(fd)
if os.environ.get("GO"):
    fd = os.open(os.environ["GO"], os.O_RDONLY)
    os.read(fd, 1)
    os.close(fd)
for i in range(int(os.environ.get("LINES", "50"))):
    print(f"line {rank} {i}", file=sys.stderr if i % 5 == 4 else sys.stdout, flush=True)
if os.environ.get("DONE"):
    fd = os.open(os.environ["DONE"], os.O_RDONLY)
    os.read(fd, 1)
    os.close(fd)
