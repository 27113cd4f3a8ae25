"""A worker that leaves a process SIGKILL cannot end: a zombie in its process
group whose parent has left that group and never reaps it. ctrun waits for
the group to be empty, so without --kill-timeout it would wait for ever.

The worker forks A; A forks B (in the worker's group), leaves the group
(setsid) and sleeps without reaping B. ctrun's SIGTERM/SIGKILL kills B, which
stays a zombie while A lives. A writes "A_PID B_PID" to argv[1] for the test,
which kills A when done. A sleeps 120 s at most."""
import os
import sys
import time

out = sys.argv[1]
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    b = os.fork()
    if b == 0:
        os.close(w)
        while True:
            time.sleep(60)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    with open(out + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {b}\n")
    os.rename(out + ".tmp", out)
    os.write(w, b"x")
    os.close(w)
    time.sleep(120)
    os._exit(0)
os.close(w)
os.read(r, 1)  # A has left the group and written the pids
sys.exit(1)
