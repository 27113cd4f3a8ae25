"""Announces its pid (and a child's, which has a grandchild of its own) on the
FIFO $ANNOUNCE, then waits for a signal. Used to check that nothing survives."""
import os
import signal
import subprocess
import sys


def announce(kind, pid):
    fd = os.open(os.environ["ANNOUNCE"], os.O_WRONLY)
    os.write(fd, f"{kind} {pid} {os.environ.get('LOCAL_RANK', '-')}\n".encode())
    os.close(fd)


child = subprocess.Popen([sys.executable, "-c", (
    "import os, signal, subprocess, sys\n"
    "g = subprocess.Popen(['sleep', '1000'])\n"
    "fd = os.open(os.environ['ANNOUNCE'], os.O_WRONLY)\n"
    "os.write(fd, f'grandchild {g.pid} -\\n'.encode()); os.close(fd)\n"
    "signal.pause()\n")])
announce("worker", os.getpid())
announce("child", child.pid)
signal.pause()
