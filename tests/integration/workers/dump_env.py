"""Writes this worker's environment as JSON to $DUMP_DIR/env_<attempt>_<local_rank>.json."""
import json
import os
import sys

path = os.path.join(os.environ["DUMP_DIR"], "env_{}_{}.json".format(
    os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["LOCAL_RANK"]))
with open(path + ".tmp", "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv, "executable": sys.executable}, f)
os.rename(path + ".tmp", path)
