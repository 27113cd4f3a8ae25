"""Worker of envdiff.py: writes its environment, argv, interpreter and CPU
affinity to $DUMP_DIR/env_<attempt>_<rank>.json."""
import json
import os
import sys

name = "env_{}_{}.json".format(os.environ.get("TORCHELASTIC_RESTART_COUNT", "x"), os.environ.get("RANK", "x"))
with open(os.path.join(os.environ["DUMP_DIR"], name), "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv, "exe": sys.executable,
               "cpus": sorted(os.sched_getaffinity(0))}, f)
