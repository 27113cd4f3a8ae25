"""Makes an orphan: a child forks a grandchild and exits at once, so the
grandchild is re-parented to PID 1 of the namespace (ctrun), then exits. The
worker succeeds only if that zombie is reaped (its /proc entry vanishes)
within a deadline; it reports what it saw on stdout."""
import os
import sys
import time

r, w = os.pipe()
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        os.close(r)
        # Wait (bounded) until re-parented away from the exiting child.
        deadline = time.monotonic() + 10
        while os.getppid() != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.write(w, f"{os.getppid()}\n".encode())
        os._exit(0)
    os._exit(0)
os.close(w)
os.waitpid(child, 0)
with os.fdopen(r) as f:
    line = f.readline().strip()
print(f"ppid of the orphan was {line}; ctrun pid is {os.getppid()}", flush=True)
# The grandchild has exited by now; wait (bounded) for PID 1 to reap it.
deadline = time.monotonic() + 10
zombies = None
def state(pid):
    """A process's state letter, or None when it is gone (reaped meanwhile:
    with several workers, another worker's orphan can vanish mid-scan)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


while time.monotonic() < deadline:
    zombies = [p for p in os.listdir("/proc") if p.isdigit() and state(p) == "Z"]
    if not zombies:
        break
    time.sleep(0.02)
print(f"zombies left: {zombies}", flush=True)
sys.exit(0 if line == "1" and not zombies and os.getppid() == 1 else 4)
