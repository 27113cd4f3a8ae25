"""Processes a bench started, found through /proc: an agent's workers, and
every process left of a run (its environment carries the run's marker)."""
import os


def children(pid):
    """The direct children of `pid` (its workers, for an agent)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def marked(variable, marker):
    """Pids whose environment holds variable=marker."""
    needle = f"{variable}={marker}".encode()
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        out.append(int(name))
            except OSError:
                pass
    return out
