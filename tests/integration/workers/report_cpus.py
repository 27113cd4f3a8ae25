"""Writes where this worker may run to $DUMP_DIR/cpus.<LOCAL_RANK>.json: its
own Cpus_allowed_list, that of a process it starts (the binding is inherited
by the worker's whole process tree), and the memory policy of its heap (the
policy field of /proc/self/numa_maps, e.g. "prefer:0" or "default").
With FAIL_WITH set, then exits with that code."""
import json
import os
import subprocess
import sys


def allowed_list(status_text):
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError("no Cpus_allowed_list in /proc/<pid>/status")


def heap_policy():
    with open("/proc/self/numa_maps") as f:
        lines = f.read().splitlines()
    heap = [line for line in lines if " heap" in line]
    return (heap or lines)[0].split()[1]


with open("/proc/self/status") as f:
    own = allowed_list(f.read())
child = allowed_list(subprocess.run(["/bin/cat", "/proc/self/status"], capture_output=True, text=True,
                                    check=True).stdout)
rank = os.environ["LOCAL_RANK"]
path = os.path.join(os.environ["DUMP_DIR"], f"cpus.{rank}.json")
with open(path + ".tmp", "w") as f:
    json.dump({"own": own, "child": child, "policy": heap_policy()}, f)
os.rename(path + ".tmp", path)
sys.exit(int(os.environ.get("FAIL_WITH", "0")))
